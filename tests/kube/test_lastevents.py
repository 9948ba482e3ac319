"""The sources mirroring API objects onto the log (quotas, budgets, claims). Each object's last
event is read at start: one that does not decode (a newer writer's, a damaged one) failed the
service's start — again at every restart; it is taken as unknown at its sequence, and the next
write of its object follows it. A report whose append failed is made again by itself."""

from __future__ import annotations

import asyncio

from contracts.envelope import Envelope
from contracts.events import QuotaChanged
from services.kube.client import quotas_path
from services.kube.lastevents import LastEvents, Reports
from services.kube.quotasource import QuotaSource
from services.runtime.eventlog import Entry, MemoryLog
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import EventService
from services.runtime.tasks import cancel_all
from tests.allocator.scenario import decoded
from tests.kube.cluster import Cluster
from tests.processes import fail_once, wait_until


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


async def test_a_quota_whose_append_failed_is_written_again_with_nothing_else_changing(
    cluster: Cluster, jetstream_log: JetStreamLog
) -> None:
    """The log out of reach for one append (a failover): the quota's change was logged and
    dropped, and the next try came with the quota's next change — admission enforced what the
    log last held (a deleted quota, for good: only a restart read it again)."""
    log = jetstream_log
    source = QuotaSource(log, cluster.kube)
    await source.recover()
    failed = fail_once(source.service)
    stopping = asyncio.Event()
    running = asyncio.create_task(source.run(stopping))
    try:
        await cluster.kube.create(quotas_path("default"), {
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "npu", "namespace": "default"},
            "spec": {"hard": {"requests.huawei.com/Ascend910B3": "4"}}})  # fmt: skip

        async def logged() -> bool:
            return await log.last(log.subjects.quota("default", "npu")) is not None

        await wait_until(logged, 30, "the quota in the log after a failed append")
        assert [type(e).__name__ for e in failed] == ["QuotaChanged"]
    finally:
        stopping.set()
        await cancel_all([running])


async def test_a_deletion_after_an_undecodable_last_event_is_written() -> None:
    """Taken for "nothing there", the bad last event kept a deleted quota enforced for good:
    readers skip it and hold the last state they could read."""
    from contracts.events import QuotaDeleted

    log = MemoryLog()
    subject = log.subjects.quota("ns", "q")
    await log.append(Entry(subject, b'{"type":"QuotaChanged","namespace":12}', Envelope(type="QuotaChanged").to_headers()))
    written = LastEvents(log, EventService("admission", log, [], {}), "kube-quota")
    await written.recover(log.subjects.all_quotas())
    gone = QuotaDeleted(namespace="ns", name="q")
    await written.write(subject, gone, "QuotaDeleted", gone=True)
    last = await log.last(subject)
    assert last is not None and decoded([last]) == [gone]


async def test_a_failed_report_made_again_never_writes_over_a_newer_one() -> None:
    """The retry took its report, then waited for the lock a newer report of the object held:
    the newer landed, then the older over it (a claim's Bound written over by its Pending)."""
    reports = Reports("thing", delay=0.01)
    written: list[str] = []
    gate = asyncio.Event()
    tries = [0]

    async def old() -> None:
        tries[0] += 1
        if tries[0] == 1:
            raise ConnectionError("the log out of reach, once")
        written.append("old")

    async def newer() -> None:
        await gate.wait()
        written.append("new")

    retrying = asyncio.create_task(reports.run())
    try:
        assert not await reports.report("k", old)
        making = asyncio.create_task(reports.report("k", newer))  # holds the lock until the gate

        async def retry_waiting() -> bool:
            return bool(reports._lock._waiters)  # type: ignore[attr-defined]

        await wait_until(retry_waiting, 10, "the retry waiting for the lock the newer report holds")
        gate.set()
        assert await making
        await wait_until(lambda: _idle(reports), 10, "the retry done")
        assert written == ["new"] and reports.failed == {}
    finally:
        await cancel_all([retrying])


async def _idle(reports: Reports) -> bool:
    return not reports._lock.locked() and not reports._wake.is_set()
