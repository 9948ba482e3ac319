"""The sources mirroring API objects onto the log (quotas, budgets, claims) read each object's
last event at start: one that does not decode (a newer writer's, a damaged one) failed the
service's start — again at every restart. It is taken as unknown at its sequence, and the
next write of its object follows it."""

from __future__ import annotations

from contracts.envelope import Envelope
from contracts.events import QuotaChanged
from services.kube.lastevents import LastEvents
from services.runtime.eventlog import Entry, MemoryLog
from services.runtime.service import EventService
from tests.allocator.scenario import decoded


async def test_an_undecodable_last_event_is_written_over_not_raised() -> None:
    log = MemoryLog()
    subject = log.subjects.quota("ns", "q")
    await log.append(Entry(subject, b'{"type":"QuotaChanged","namespace":12}', Envelope(type="QuotaChanged").to_headers()))
    written = LastEvents(log, EventService("admission", log, [], {}), "kube-quota")
    assert await written.recover(log.subjects.all_quotas()) == 1
    quota = QuotaChanged(namespace="ns", name="q")
    await written.write(subject, quota, "QuotaChanged", gone=False)
    last = await log.last(subject)
    assert last is not None and last.seq == 2
    assert decoded([last]) == [quota]
