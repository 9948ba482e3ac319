"""A session whose appends landed but whose acks were lost (the log slow to answer under full
CPU, as when the scheduler's lease flapped in issue 29's 4,000-pod run) must not lead to a card
the ledger holds looking free to the scheduler.

Two guards, each tested here against the real allocator: the scheduler opens no session until
it has read back every subject the failed append wrote to; and if a second proposal of a job
is made on a view that had not read the first (a replica, an older scheduler), the view books
only the first, so the first's commit keeps its card taken in the view — in the run that
stalled, the card was freed in the view alone, the last pod proposed onto it and refused there
for good ("ExclusiveDeviceAllocateConflict"), 3,998 of 4,000 pods bound."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contracts.events import JobSubmitted, PlacementCommitted, PlacementProposed, PlacementRejected
from contracts.registry import default_registry
from contracts.workloads import JobSpec, TaskSpec
from services.allocator.service import Allocator
from services.core.devices import build_vendors, parse_container
from services.core.scheduling import snapshot as st
from services.runtime.eventlog import EventLog
from services.runtime.eventlog.model import AppendResult, Entry, LogUnavailable
from services.runtime.service import Outgoing
from services.scheduler.service import Scheduler
from tests.allocator.scenario import ascend_node, decoded, put
from tests.draining import drain
from tests.scheduler.test_scheduler_service import seed

CARD = "n1-Ascend910B3-0"


class LostAcks:
    """The real log, except that one pipelined append lands and then reports a timeout."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self.lose = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def append_pipelined(self, entries: Sequence[Entry]) -> list[AppendResult]:
        results = await self._log.append_pipelined(entries)
        if self.lose:
            self.lose -= 1
            raise LogUnavailable(f"no publish ack for {entries[0].subject} (lost)")
        return results


def whole_card_job(name: str) -> JobSpec:
    devices = parse_container({"huawei.com/Ascend910B3": "1"}, registry=build_vendors())
    task = TaskSpec(name="w", cpu_milli=1000, memory_mib=1024, devices=devices)
    return JobSpec(namespace="default", name=name, queue="default", min_available=1, tasks=(task,))


async def one_card_cluster(log: EventLog, *jobs: str) -> None:
    await seed(log)
    await put(
        log, log.subjects.node("n1"), ascend_node("n1", cards=1)
    )  # registered again: one card
    for job in jobs:
        await put(log, log.subjects.job("default", job), JobSubmitted(spec=whole_card_job(job)))


async def read_back(sched: Scheduler, log: EventLog) -> None:
    """Fold what the scheduler's follower would deliver next, in log order."""
    reg = default_registry()
    async for m in log.replay(sched.view.seq + 1, log.subjects.events):
        sched._fold(m.seq, reg.decode(m.headers["Tessera-Type"], m.data))


async def allocate(log: EventLog) -> None:
    alloc = Allocator(log)
    await alloc.recover()
    await drain(alloc.service)


def proposals(outs: list[Outgoing]) -> list[PlacementProposed]:
    return [o.event for o in outs if isinstance(o.event, PlacementProposed)]


async def test_no_session_opens_before_a_failed_appends_events_are_read_back(
    event_log: EventLog,
) -> None:
    await one_card_cluster(event_log, "first")
    lossy = LostAcks(event_log)
    sched = Scheduler(lossy)  # type: ignore[arg-type]
    await sched.recover()
    with pytest.raises(LogUnavailable):
        await sched._session()
    landed = [
        e
        for e in decoded([m async for m in event_log.replay()])
        if isinstance(e, PlacementProposed)
    ]
    assert [p.name for p in landed] == ["first"]  # in the log, though the scheduler was not told
    assert sched.uncertain
    assert await sched._resync()
    assert not sched.caught_up()  # the proposal is in the log, not yet in the view
    await read_back(sched, event_log)
    assert sched.caught_up()
    assert not proposals(sched.session_events())  # the job is proposed, not proposed again


async def test_a_second_proposal_made_on_a_stale_view_leaves_the_committed_card_taken(
    event_log: EventLog,
) -> None:
    await one_card_cluster(event_log, "first")
    sched = Scheduler(event_log)
    await sched.recover()
    # two sessions on the same view (the first's proposal not read back): the same pod twice
    for _ in range(2):
        for o in sched.session_events():
            await put(event_log, o.subject, o.event)
    await allocate(event_log)  # the first is committed, the second answered as a repeat
    answers = [e for e in decoded([m async for m in event_log.replay()])
               if isinstance(e, PlacementCommitted | PlacementRejected)]  # fmt: skip
    assert [type(a).__name__ for a in answers] == ["PlacementCommitted", "PlacementRejected"]
    await read_back(sched, event_log)
    assert sched.outstanding == {}
    assert {t.status for t in sched.projection.tasks["default/first"].values()} == {st.BOUND}
    usage = sched.projection.cards[CARD].usage
    assert usage.owners == ("default/first/first-w-0",) and usage.memory_used == 65536
    # so the next pod waits instead of being proposed onto the card the ledger holds
    await put(
        event_log,
        event_log.subjects.job("default", "second"),
        JobSubmitted(spec=whole_card_job("second")),
    )
    await read_back(sched, event_log)
    assert not proposals(sched.session_events())


async def test_a_commit_of_the_second_proposal_after_the_first_was_refused_stays_bound() -> None:
    """The other order: the first proposal refused, the scheduler proposes the job again (a
    third time), the allocator then commits the second. Refusing the third must not send the
    committed pod back to Pending, nor free its card in the view."""
    from services.runtime.eventlog import MemoryLog

    log = MemoryLog()
    await one_card_cluster(log, "first")
    sched = Scheduler(log)
    await sched.recover()
    p1 = proposals(sched.session_events())[0]
    seq = sched.view.seq
    sched._fold(seq + 1, p1)
    sched._fold(seq + 2, p1)  # the repeat, from a stale view: not booked
    assert sched.outstanding == {"default/first": seq + 1}
    sched._fold(seq + 3, PlacementRejected(namespace="default", name="first", reason="stale proposal: x",
                                           proposal_seq=seq + 1))  # fmt: skip
    p3 = proposals(sched.session_events())[0]
    sched._fold(seq + 4, p3)
    assert sched.outstanding == {"default/first": seq + 4}
    # the allocator commits the repeat (seq + 2): its ledger event, then the commit
    from contracts.events import SliceReserved

    placed = p1.placements[0]
    sl = placed.slices[0]
    held = sched.projection.cards[CARD].usage  # assumed by p3: the same card, the same owner
    sched._fold(
        seq + 5,
        SliceReserved(
            card=CARD, node="n1", owner="default/first/first-w-0", slice=sl.slice, usage=held
        ),
    )
    sched._fold(seq + 6, PlacementCommitted(namespace="default", name="first", placements=p1.placements,
                                            proposal_seq=seq + 2))  # fmt: skip
    sched._fold(seq + 7, PlacementRejected(namespace="default", name="first", reason="already placed as proposed",
                                           proposal_seq=seq + 4))  # fmt: skip
    assert sched.outstanding == {}
    assert {t.status for t in sched.projection.tasks["default/first"].values()} == {st.BOUND}
    assert sched.projection.cards[CARD].usage.owners == ("default/first/first-w-0",)
