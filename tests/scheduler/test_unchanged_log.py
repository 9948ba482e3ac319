"""No session over a log that has not moved since one that concluded nothing: with a backlog
longer than the cluster, the period's session re-judged every waiting job each second for the
same verdicts (~0.27 CPU-s a second on a full 500-node cluster, issue 29). A new event, or the
clock reaching a time rule's turn (sla here), opens one again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import msgspec
import pytest

from contracts.events import JobSubmitted, JobUnschedulable, PlacementProposed
from services.core.scheduling import record
from services.runtime.eventlog import EventLog
from services.scheduler.service import Scheduler
from tests.allocator.scenario import ascend_node, decoded, put
from tests.scheduler.test_scheduler_service import SLA_CONF, _first_proposal, inference_job, seed


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Scheduler], None]]:
    tasks: list[asyncio.Task[None]] = []

    def start(sched: Scheduler) -> None:
        tasks.extend([asyncio.create_task(sched.service.run(asyncio.Event())),
                      asyncio.create_task(sched.run_sessions(asyncio.Event()))])  # fmt: skip

    yield start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _unchanged_triggers(sched: Scheduler, n: int) -> None:
    """Until `n` more session triggers found the log as the last session left it."""
    for _ in range(n):
        sched.settled.clear()
        await asyncio.wait_for(sched.settled.wait(), 20)


async def test_a_waiting_job_is_not_judged_again_until_the_log_moves(
    event_log: EventLog, running: Callable[[Scheduler], None]
) -> None:
    await seed(event_log)  # n1: two cards, eight 16 GB slices
    s = event_log.subjects
    await put(event_log, s.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9)))
    sched = Scheduler(event_log, period=0.02, debounce=0.01)
    await sched.recover()
    running(sched)
    await _unchanged_triggers(sched, 1)  # its JobUnschedulable is in the log and read back
    sessions = sched.sessions
    await _unchanged_triggers(sched, 5)  # five periods of the same log: no session
    assert sched.sessions == sessions
    await put(event_log, s.node("n2"), ascend_node("n2", cards=1))  # room for the ninth
    events = await _first_proposal(event_log)
    assert [e.name for e in events if isinstance(e, PlacementProposed)] == ["huge"]
    assert sched.sessions > sessions


async def test_a_session_that_only_gave_reasons_is_not_followed_by_one_on_them(
    event_log: EventLog, running: Callable[[Scheduler], None]
) -> None:
    """A node joins that the waiting jobs' node selector does not match: their reasons change
    ("0/2 nodes are unavailable: 2 node(s) didn't match …"), and the session says so and
    nothing else. Its JobUnschedulable events, read back, are all the log moved by: the jobs'
    last words, which no decision reads, so a session on them would conclude nothing — one more
    full session after every change of a reason."""
    await seed(event_log)
    s = event_log.subjects
    for name in ("east", "west"):
        spec = inference_job(name)
        task = msgspec.structs.replace(spec.tasks[0], node_selector={"zone": "b"})
        await put(event_log, s.job("default", name), JobSubmitted(spec=msgspec.structs.replace(spec, tasks=(task,))))
    sched = Scheduler(event_log, period=0.02, debounce=0.01)
    await sched.recover()
    running(sched)
    await _unchanged_triggers(sched, 3)
    sessions = sched.sessions
    joined = await put(event_log, s.node("a2"), ascend_node("a2"))

    async def read_back() -> None:  # the session on the node ran and its verdicts came back
        while sched.view.seq <= joined or sched.view.seq < sched.written:
            await _unchanged_triggers(sched, 1)

    await asyncio.wait_for(read_back(), 20)
    await _unchanged_triggers(sched, 3)
    assert sched.sessions == sessions + 1
    replayed = [m async for m in event_log.replay()]
    told = list(zip([m.seq for m in replayed], decoded(replayed), strict=True))
    assert sorted(e.name for seq, e in told if seq > joined) == ["east", "west"]
    assert all(isinstance(e, JobUnschedulable) for seq, e in told if seq > joined)


async def test_the_clock_reaching_a_time_rule_opens_a_session_on_the_same_log(
    event_log: EventLog, running: Callable[[Scheduler], None]
) -> None:
    """proportion keeps a job larger than the cluster Pending until sla lets it in, 60 s after
    it arrived: the log does not move meanwhile, the wall clock does."""
    await seed(event_log)
    s = event_log.subjects
    big = msgspec.structs.replace(inference_job("big"), arrive_at=1000.0, min_resources={"cpu": 500_000, "memory": 1024})
    await put(event_log, s.job("default", "big"), JobSubmitted(spec=big))
    clock = [1030.0]
    sched = Scheduler(event_log, record.configured(SLA_CONF), period=0.02, debounce=0.01, clock=lambda: clock[0])
    await sched.recover()
    running(sched)
    await _unchanged_triggers(sched, 3)
    sessions = sched.sessions
    clock[0] = 1060.0
    events = await _first_proposal(event_log)
    assert [e.name for e in events if isinstance(e, PlacementProposed)] == ["big"]
    assert sched.sessions > sessions
