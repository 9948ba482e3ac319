"""Volcano's queue and job gauges follow the log when no session runs.

Volcano opens a session every period and its close sets them; Tessera runs none while nothing
waits (issue 29), so the gauges are refreshed from a session with no actions when the log
moved since they were computed — a waiting job deleted, pods that ended, a restart — and not
at all over a log that did not move."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise

from prometheus_client.parser import text_string_to_metric_families

from contracts.events import JobDeleted, JobSubmitted, PlacementCommitted, TaskFinished
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from services.scheduler import service as scheduler_service
from services.scheduler.service import Scheduler
from tests.allocator.scenario import decoded, put
from tests.processes import wait_until
from tests.scheduler.test_scheduler_service import inference_job, seed

Q = (("queue_name", "default"),)
CARD = (*Q, ("resource", "huawei.com/Ascend910B3"))


def scrape(sched: Scheduler) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert sched.service.metrics is not None
    text = sched.service.metrics.exposition().decode()  # what /metrics serves
    return {(x.name, tuple(sorted(x.labels.items()))): x.value
            for f in text_string_to_metric_families(text) for x in f.samples}  # fmt: skip


@asynccontextmanager
async def running(*services: Scheduler | Allocator) -> AsyncIterator[None]:
    stopping = asyncio.Event()
    tasks = []
    for s in services:
        tasks.append(asyncio.create_task(s.service.run(stopping, poll=0.05)))
        if isinstance(s, Scheduler):
            tasks.append(asyncio.create_task(s.background(stopping)))
    try:
        yield
    finally:
        stopping.set()
        await asyncio.gather(*tasks)


async def until(sched: Scheduler, what: str, holds) -> None:  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return bool(holds(scrape(sched)))

    await wait_until(check, timeout=15, what=what)


async def test_a_deleted_waiting_job_leaves_the_unschedulable_gauges(event_log: EventLog) -> None:
    """An unschedulable job deleted: nothing waits any more, so no session runs; its
    `volcano_unschedule_task_count` read 9 for good, and the job count 1."""
    await seed(event_log)
    s = event_log.subjects
    await put(event_log, s.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9)))
    sched = Scheduler(event_log, period=0.1, debounce=0.01, gauge_every=0.1)
    await sched.recover()
    async with running(sched):
        await until(sched, "huge unschedulable", lambda got: got.get(("volcano_unschedule_job_count", ())) == 1)
        assert [v for (n, _), v in scrape(sched).items() if n == "volcano_unschedule_task_count"] == [9]
        # The gauges are set by the session that appended the job's `JobPhaseChanged` and verdict,
        # before the log delivered them back; folded, they open one more session (it concludes
        # nothing: only a log moved by verdicts alone skips it, `_session`). Counted from before
        # it, that session was taken for one opened by the deletion whenever the deletion was
        # folded after it (a loaded machine): count from when the scheduler has settled.
        await asyncio.wait_for(sched.settled.wait(), 15)
        sessions = sched.session_metrics.e2e._sum.get(), sched.sessions
        await put(event_log, s.job("default", "huge"), JobDeleted(namespace="default", name="huge"))
        await until(sched, "no unschedulable job", lambda got: got.get(("volcano_unschedule_job_count", ())) == 0)
        got = scrape(sched)
        assert not [n for (n, _) in got if n == "volcano_unschedule_task_count"]
        assert sum(v for (n, _), v in got.items() if n == "tessera_unschedulable_jobs") == 0
        assert sum(v for (n, labels), v in got.items() if n.startswith("volcano_queue_pod_group_") and labels == Q) == 0
        # no session ran for it: the refresh is not a session (README, Metrics)
        assert (sched.session_metrics.e2e._sum.get(), sched.sessions) == sessions


async def test_queue_allocated_drops_when_pods_end_and_a_restart_exports_the_queues(event_log: EventLog) -> None:
    """The placed job's pod ends: nothing waits, so no session ran and the queue kept its
    allocation for good. A scheduler started over that log exported no `volcano_queue_*` at
    all until some job waited."""
    await seed(event_log)
    s = event_log.subjects
    await put(event_log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    small = inference_job("small").tasks[0]
    sched, alloc = Scheduler(event_log, period=0.1, debounce=0.01, gauge_every=0.1), Allocator(event_log)
    await sched.recover()
    await alloc.recover()
    async with running(sched, alloc):
        await until(sched, "allocated", lambda got: got.get(("volcano_queue_allocated_milli_cpu", Q)) == small.cpu_milli)
        commits: list[PlacementCommitted] = []

        async def committed() -> bool:
            """The session counts the pod it proposed as allocated, as Volcano's close does: the
            gauge reads it before the allocator commits (a loaded machine: well before)."""
            commits[:] = [e for e in decoded([m async for m in event_log.replay()]) if isinstance(e, PlacementCommitted)]
            return bool(commits) and not sched.projection.waiting()

        await wait_until(committed, timeout=15, what="the placement committed and folded")
        (commit,) = commits
        pod = commit.placements[0].task
        await put(event_log, s.job("default", "small"),
                  TaskFinished(namespace="default", name="small", task=pod, node="n1", reason="Completed"))  # fmt: skip
        await until(sched, "allocation released", lambda got: got.get(("volcano_queue_allocated_milli_cpu", Q)) == 0)
        got = scrape(sched)
        assert got[("volcano_queue_allocated_memory_bytes", Q)] == 0
        assert got.get(("volcano_queue_allocated_scalar_resources", CARD), 0) == 0

    restarted = Scheduler(event_log, period=0.1, debounce=0.01, gauge_every=0.1)
    await restarted.recover()
    assert not restarted.projection.waiting()
    assert not [n for (n, _) in scrape(restarted) if n.startswith("volcano_queue_")]
    async with running(restarted):
        await until(restarted, "queues exported after a restart",
                    lambda got: got.get(("volcano_queue_weight", Q)) == 1)  # fmt: skip
        got = scrape(restarted)
        assert got[("volcano_queue_allocated_milli_cpu", Q)] == 0
        assert got[("volcano_unschedule_job_count", ())] == 0
    assert restarted.sessions == 0  # not a session: nothing waited


async def test_the_gauges_cost_nothing_over_a_log_that_does_not_move(event_log: EventLog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 29's saving kept: computed once after the start, again only when the log moves,
    and at most once per period however often it moves."""
    calls: list[tuple[int, float]] = []  # (the snapshot's sequence, the loop's time)
    real = scheduler_service.decide

    def counted(snap, conf=None, **kw):  # type: ignore[no-untyped-def]
        calls.append((snap.seq, asyncio.get_running_loop().time()))
        return real(snap, conf, **kw)

    monkeypatch.setattr(scheduler_service, "decide", counted)
    await seed(event_log)
    sched = Scheduler(event_log, period=0.5, debounce=0.01, gauge_every=0.5)
    await sched.recover()
    async with running(sched):
        await until(sched, "queues exported", lambda got: ("volcano_queue_weight", Q) in got)
        await asyncio.sleep(1.6)  # three periods, nothing appended
        assert len(calls) == 1
        for i in range(8):  # the log moves every 50 ms or so: not a recomputation each time
            await put(event_log, event_log.subjects.job("default", f"gone-{i}"),
                      JobDeleted(namespace="default", name=f"gone-{i}"))  # fmt: skip
            await asyncio.sleep(0.05)
        await wait_until(lambda: asyncio.sleep(0, result=sched._series_seq == sched.view.seq), timeout=5)
        assert calls[-1][0] == sched.view.seq and len(calls) >= 2  # the last move is in them
        # At most once per `gauge_every`, not "at most 3": the 8 appends take 0.4 s only on an
        # idle machine; loaded, they spread over two periods and a fourth computation is due.
        # (Each time is taken a moment after the clock read the refresh compares: 50 ms slack.)
        gaps = [b - a for (_, a), (_, b) in pairwise(calls)]
        assert min(gaps) >= 0.5 - 0.05, gaps
    assert sched.sessions == 0
