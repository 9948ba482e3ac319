"""Two schedulers on one log (issue 12 item 6): each folds the whole log (not a share of one
durable), only the holder of the lease decides — one proposal per job, not one per replica —
and when the leader dies without giving the lease up, the other takes over once it expires."""

from __future__ import annotations

import asyncio

from contracts.events import JobSubmitted, PlacementCommitted, PlacementProposed
from services.allocator.service import Allocator
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.lease import Lease
from services.scheduler.service import Scheduler
from tests.allocator.scenario import decoded, put
from tests.processes import wait_until
from tests.scheduler.test_scheduler_service import inference_job, seed

TTL = 1.5


def statuses(sched: Scheduler) -> dict[str, dict[str, str]]:
    return {job: {t: task.status for t, task in tasks.items()}
            for job, tasks in sched.projection.tasks.items()}  # fmt: skip


async def test_one_leader_proposes_and_a_standby_takes_over(jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    s = log.subjects
    await seed(log)
    for i in range(6):
        await put(log, s.job("default", f"inf-{i}"), JobSubmitted(spec=inference_job(f"inf-{i}")))
    scheds = [Scheduler(log, period=0.2, debounce=0.01,
                        lease=Lease(log.js, f"{log.stream}_leases", "scheduler", ttl=TTL))
              for _ in range(2)]  # fmt: skip
    alloc = Allocator(log)
    stops = [asyncio.Event() for _ in range(3)]
    tasks: list[list[asyncio.Task[None]]] = []
    for sched, stop in zip(scheds, stops, strict=False):
        await sched.recover()
        tasks.append([asyncio.create_task(sched.service.run(stop)),
                      asyncio.create_task(sched.background(stop))])  # fmt: skip
    await alloc.recover()
    tasks.append([asyncio.create_task(alloc.service.run(stops[2], poll=0.1)),
                  asyncio.create_task(alloc.background(stops[2]))])  # fmt: skip

    async def events() -> list:
        return decoded([m async for m in log.replay()])

    async def committed(n: int) -> bool:
        return sum(isinstance(e, PlacementCommitted) for e in await events()) >= n

    try:
        await wait_until(lambda: committed(6), timeout=30, what="six jobs committed")
        proposals = [e.name for e in await events() if isinstance(e, PlacementProposed)]
        assert sorted(proposals) == [f"inf-{i}" for i in range(6)]  # once each, by the leader

        async def same_views() -> bool:
            return statuses(scheds[0]) == statuses(scheds[1]) and scheds[0].projection.seq == scheds[1].projection.seq

        await wait_until(same_views, timeout=10, what="the standby's projection = the leader's")
        leader = next(i for i, sc in enumerate(scheds) if sc.lease is not None and sc.lease.held())
        for t in tasks[leader]:
            t.cancel()  # dies as with kill -9: the lease is not given up, it has to expire
        await asyncio.gather(*tasks[leader], return_exceptions=True)
        await put(log, s.job("default", "late"), JobSubmitted(spec=inference_job("late")))
        await wait_until(lambda: committed(7), timeout=TTL * 6, what="the standby to place 'late'")
        late = [e for e in await events() if isinstance(e, PlacementProposed) and e.name == "late"]
        assert len(late) == 1
    finally:
        for stop in stops:
            stop.set()
        await asyncio.gather(*(t for ts in tasks for t in ts), return_exceptions=True)
