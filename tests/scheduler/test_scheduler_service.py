"""The scheduler service over the log: sessions propose, the allocator commits, nothing twice."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest

from contracts.events import (
    JobSubmitted,
    JobUnschedulable,
    NodesListed,
    PlacementCommitted,
    PlacementProposed,
    QueueCreated,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.allocator.service import Allocator
from services.core.devices import build_vendors, parse_container
from services.runtime.eventlog import EventLog
from services.scheduler.service import Scheduler
from tests.allocator.scenario import ascend_node, decoded, put
from tests.processes import wait_until


def inference_job(name: str, memory: int = 15000, replicas: int = 1) -> JobSpec:
    limits = {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": str(memory)}
    devices = parse_container(limits, registry=build_vendors())  # HAMi rounding → vir05 template
    task = TaskSpec(
        name="infer", replicas=replicas, cpu_milli=1000, memory_mib=1024, devices=devices
    )
    return JobSpec(
        namespace="default", name=name, queue="default", min_available=replicas, tasks=(task,)
    )


async def seed(log: EventLog) -> None:
    s = log.subjects
    for q in ("root", "default"):
        await put(
            log,
            s.queue(q),
            QueueCreated(spec=QueueSpec(name=q, parent="" if q == "root" else "root")),
        )
    await put(log, s.node("n1"), ascend_node("n1", cards=2))


async def test_a_session_proposes_fitting_jobs_and_explains_the_rest(event_log: EventLog) -> None:
    await seed(event_log)
    s = event_log.subjects
    await put(event_log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    await put(
        event_log, s.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9))
    )
    sched = Scheduler(event_log)
    await sched.recover()
    outs = sched.session_events()
    by_type: dict[str, list] = {}
    for o in outs:
        by_type.setdefault(o.event.type_name(), []).append(o.event)
    proposed = {p.name: p for p in by_type.get("PlacementProposed", [])}
    assert set(proposed) == {"small"}
    slices = proposed["small"].placements[0].slices
    assert slices[0].node == "n1" and slices[0].slice.memory == 16384
    assert slices[0].slice.template == "vir05_1c_16g"
    unsched = {u.name: u for u in by_type.get("JobUnschedulable", [])}
    assert "huge" in unsched and unsched["huge"].reason
    # Once the log holds them, the next session repeats neither the proposal nor the reason.
    for i, o in enumerate(outs):
        sched._fold(10_000 + i, o.event)
    again = [o.event.type_name() for o in sched.session_events()]
    assert "PlacementProposed" not in again and "JobUnschedulable" not in again


async def test_scheduler_and_allocator_together_bind_each_job_once(event_log: EventLog) -> None:
    await seed(event_log)
    s = event_log.subjects
    for i in range(6):  # 6 × 16 GB on two 64 GB cards: all fit, as vir05 templates
        await put(
            event_log, s.job("default", f"inf-{i}"), JobSubmitted(spec=inference_job(f"inf-{i}"))
        )
    sched, alloc = Scheduler(event_log, period=0.2, debounce=0.01), Allocator(event_log)
    await sched.recover()
    await alloc.recover()
    stopping = asyncio.Event()
    tasks = [
        asyncio.create_task(sched.service.run(stopping, poll=0.1)),
        asyncio.create_task(sched.background(stopping)),
        asyncio.create_task(alloc.service.run(stopping, poll=0.1)),
    ]
    watcher = await event_log.consumer("watcher", [s.all_jobs()])
    committed: set[str] = set()
    try:
        async with asyncio.timeout(60):
            while len(committed) < 6:
                d = await watcher.next(timeout=1)
                if d is not None:
                    if d.message.headers["Tessera-Type"] == "PlacementCommitted":
                        committed.add(decoded([d.message])[0].name)  # type: ignore[attr-defined]
                    await d.ack()
    finally:
        stopping.set()
        await asyncio.gather(*tasks)
        await watcher.close()
    events = decoded([m async for m in event_log.replay()])
    commits = [e for e in events if isinstance(e, PlacementCommitted)]
    assert sorted(c.name for c in commits) == [f"inf-{i}" for i in range(6)]
    assert not any(isinstance(e, JobUnschedulable) for e in events)
    assert sum(isinstance(e, PlacementProposed) for e in events) == 6
    used = sorted(c.usage.memory_used for c in alloc.cards.values())
    assert used == [3 * 16384, 3 * 16384] or sum(used) == 6 * 16384


async def test_an_answer_to_an_older_proposal_leaves_the_outstanding_one_alone() -> None:
    """The allocator answers stale proposals (an older one of the job) with a rejection; that
    must not undo the job's current proposal in the scheduler (tasks back to Pending, proposed
    again while the allocator commits the first) — only the answer to it does."""
    from contracts.events import PlacementRejected
    from services.core.scheduling import snapshot as st
    from services.runtime.eventlog import MemoryLog

    log = MemoryLog()
    await seed(log)
    s = log.subjects
    await put(log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    sched = Scheduler(log)
    await sched.recover()
    proposal = next(o.event for o in sched.session_events() if isinstance(o.event, PlacementProposed))
    sched._fold(100, proposal)
    stale = PlacementRejected(namespace="default", name="small", reason="stale", proposal_seq=50)
    sched._fold(101, stale)
    assert sched.outstanding == {"default/small": 100}
    assert {t.status for t in sched.projection.tasks["default/small"].values()} == {st.BOUND}
    assert not [o for o in sched.session_events() if isinstance(o.event, PlacementProposed)]
    sched._fold(102, PlacementRejected(namespace="default", name="small", reason="x", proposal_seq=100))
    assert sched.outstanding == {}
    assert {t.status for t in sched.projection.tasks["default/small"].values()} == {st.PENDING}


async def test_a_session_exports_volcanos_queue_and_job_metrics(event_log: EventLog) -> None:
    """What a scrape of the scheduler shows after one session: Volcano's names, values that
    follow from the jobs (one placed task, nine waiting ones of a gang that does not fit)."""
    from prometheus_client.parser import text_string_to_metric_families

    await seed(event_log)
    s = event_log.subjects
    await put(event_log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    await put(event_log, s.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9)))
    sched = Scheduler(event_log)
    await sched.recover()
    await sched._session()
    assert sched.service.metrics is not None
    text = sched.service.metrics.exposition().decode()  # what /metrics serves
    got = {(x.name, tuple(sorted(x.labels.items()))): x.value
           for f in text_string_to_metric_families(text) for x in f.samples}  # fmt: skip
    assert got[("volcano_unschedule_job_count", ())] == 1
    # job_id: the PodGroup's name, as Volcano's (test_session_metrics.py)
    assert [v for (n, _), v in got.items() if n == "volcano_unschedule_task_count"] == [9]
    assert sum(v for (n, _), v in got.items() if n == "tessera_unschedulable_jobs") == 1
    assert got[("volcano_schedule_attempts_total", (("result", "scheduled"),))] == 1
    assert got[("volcano_schedule_attempts_total", (("result", "unschedulable"),))] == 9
    assert got[("volcano_e2e_scheduling_latency_milliseconds_count", ())] == 1
    assert got[("tessera_session_seconds_count", (("stage", "decide"),))] == 1
    q = (("queue_name", "default"),)
    assert got[("volcano_queue_weight", q)] == 1
    groups = sum(v for (n, labels), v in got.items()
                 if n.startswith("volcano_queue_pod_group_") and labels == q)  # fmt: skip
    assert groups == 2  # both jobs, each in one phase
    small = inference_job("small").tasks[0]
    assert got[("volcano_queue_allocated_milli_cpu", q)] == small.cpu_milli  # the placed task
    assert got[("volcano_queue_allocated_memory_bytes", q)] == small.memory_mib * 2**20
    assert got[("volcano_queue_allocated_scalar_resources", (*q, ("resource", "huawei.com/Ascend910B3")))] > 0


async def _first_proposal(event_log: EventLog) -> list:
    """The log once it holds a PlacementProposed (polled: nothing announces it)."""
    async def proposed() -> list:
        while True:
            events = decoded([m async for m in event_log.replay()])
            if any(isinstance(e, PlacementProposed) for e in events):
                return events
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(proposed(), 20)


async def test_no_pod_is_judged_while_nodes_are_registering(event_log: EventLog) -> None:
    """Nodes register one after another (the node agent listing the cluster): a session in the
    middle of that told the pods that fit only on the last nodes "no node has a free card" —
    a Warning per pod, seconds before placing them. Sessions wait for registrations to go
    quiet; the job is placed and never reported unschedulable."""
    s = event_log.subjects
    for q in ("root", "default"):
        await put(event_log, s.queue(q), QueueCreated(spec=QueueSpec(name=q, parent="" if q == "root" else "root")))
    await put(event_log, s.job("default", "wide"), JobSubmitted(spec=inference_job("wide", replicas=8)))
    now = [0.0]  # the quiet spell's clock, stepped here: under load the real gaps passed `quiet`
    sched = Scheduler(event_log, period=0.05, debounce=0.01, registration_quiet=1.0, quiet_clock=lambda: now[0])
    await sched.recover()
    follow = asyncio.create_task(sched.service.run(asyncio.Event()))
    sessions = asyncio.create_task(sched.run_sessions(asyncio.Event()))
    try:
        for i in range(4):  # a card holds four 16 GB pods: the 8 fit once two nodes are in
            last = await put(event_log, s.node(f"n{i}"), ascend_node(f"n{i}", cards=1))
            await wait_until(lambda: asyncio.sleep(0, result=sched.view.seq >= last), 20, f"n{i} folded")  # noqa: B023
            now[0] += 0.05  # the gaps between registrations, far below `quiet`
        assert sched.sessions == 0
        now[0] += 1.5  # quiet at last
        events = await _first_proposal(event_log)
    finally:
        sessions.cancel()
        follow.cancel()
    assert not [e for e in events if isinstance(e, JobUnschedulable)]


async def test_with_a_node_agent_no_session_opens_before_its_listing(event_log: EventLog) -> None:
    """Deployed with a node agent, the scheduler holds every session until the agent's
    `NodesListed` (kube-scheduler's informer sync): a gang that fits only once the last nodes
    are in is never told "no node fits", however long the gap between two registrations."""
    s = event_log.subjects
    for q in ("root", "default"):
        await put(event_log, s.queue(q), QueueCreated(spec=QueueSpec(name=q, parent="" if q == "root" else "root")))
    await put(event_log, s.node("n0"), ascend_node("n0", cards=1))
    last = await put(event_log, s.job("default", "wide"), JobSubmitted(spec=inference_job("wide", replicas=8)))
    sched = Scheduler(event_log, period=0.05, debounce=0.01, registration_quiet=0.0, await_inventory=True)
    await sched.recover()
    assert not sched.listed.is_set()  # a fresh log: no agent has listed anything yet
    follow = asyncio.create_task(sched.service.run(asyncio.Event()))
    sessions = asyncio.create_task(sched.run_sessions(asyncio.Event()))
    try:
        # the job waits and a node is in, registrations are "quiet" (0 s): only the missing
        # listing keeps the session from judging the gang on one node
        await asyncio.wait_for(sched.holding.wait(), 20)
        assert sched.view.seq >= last  # it knows the job and the node: only the listing holds it
        assert sched.sessions == 0
        await put(event_log, s.node("n1"), ascend_node("n1", cards=1))  # a card holds four of the eight
        await put(event_log, s.inventory("nodeagent"), NodesListed(agent="nodeagent", nodes=2))
        events = await _first_proposal(event_log)
    finally:
        sessions.cancel()
        follow.cancel()
    assert not [e for e in events if isinstance(e, JobUnschedulable)]
    (proposal,) = [e for e in events if isinstance(e, PlacementProposed)]
    assert {p.node for p in proposal.placements} == {"n0", "n1"}


async def test_a_scheduler_holding_for_the_listing_stops_when_told(event_log: EventLog) -> None:
    """A stop while the session loop holds for a node agent's listing (none is coming: a node
    agent failed at start) ends the loop at once; it waited out the hold (30 s) and the process,
    SIGTERMed, was killed 10 s later, its last words unsaid (`tessera up` with a broken
    inventory took 13 s to say why)."""
    s = event_log.subjects
    await put(event_log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    sched = Scheduler(event_log, period=0.05, debounce=0.01, registration_quiet=0.0, await_inventory=True)
    await sched.recover()
    stopping = asyncio.Event()
    sessions = asyncio.create_task(sched.run_sessions(stopping))
    try:
        await asyncio.wait_for(sched.holding.wait(), 20)
        stopping.set()
        await asyncio.wait_for(asyncio.shield(sessions), 10)  # the hold lasts 30 s
    finally:
        sessions.cancel()
    assert sched.sessions == 0 and not sched.listed.is_set()


async def test_a_stop_ends_the_wait_for_the_next_period(event_log: EventLog) -> None:
    """Stopped between sessions, the loop ends then, not at its next period (here ten minutes;
    the default second made the scheduler the last service to end every stop)."""
    await seed(event_log)
    sched = Scheduler(event_log, period=600.0, debounce=0.01, registration_quiet=0.0)
    await sched.recover()
    stopping = asyncio.Event()
    loop = asyncio.create_task(sched.background(stopping))
    try:
        async def waiting_for_events() -> bool:  # its trigger taken: nothing awaits after that
            return not sched._dirty.is_set()  # but the next one (nothing waits to be placed)

        await wait_until(waiting_for_events, 30, "the session loop waiting for the next period")
        stopping.set()
        await asyncio.wait_for(asyncio.shield(loop), 10)
    finally:
        loop.cancel()
    assert sched.sessions == 0


async def test_a_restarted_scheduler_finds_the_listing_in_the_log(event_log: EventLog) -> None:
    """The agent listed the cluster before this scheduler started (a restart, a new leader):
    the log says so and nothing is held."""
    await seed(event_log)
    s = event_log.subjects
    await put(event_log, s.inventory("nodeagent"), NodesListed(agent="nodeagent", nodes=1))
    await put(event_log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    sched = Scheduler(event_log, period=0.05, debounce=0.01, await_inventory=True)
    await sched.recover()
    assert sched.listed.is_set()
    follow = asyncio.create_task(sched.service.run(asyncio.Event()))
    sessions = asyncio.create_task(sched.run_sessions(asyncio.Event()))
    try:
        events = await _first_proposal(event_log)
    finally:
        sessions.cancel()
        follow.cancel()
    assert sched.held_for_inventory == 0
    assert [e.name for e in events if isinstance(e, PlacementProposed)] == ["small"]


async def test_the_scheduler_says_at_start_what_of_its_conf_it_does_not_run(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    from services.core.scheduling import record
    from tests.core.scheduling.test_conf_not_run import MOVED

    with caplog.at_level(logging.WARNING, logger="services.scheduler.service"):
        Scheduler(event_log, record.configured(MOVED))
    said = [r.getMessage() for r in caplog.records if r.name == "services.scheduler.service"]
    assert [s.split(": ")[1] for s in said] == ["actions", "actions", "tiers[0].plugins[2].name",
                                                "tiers[1].plugins[1].name"], said  # fmt: skip
    assert all(s.startswith("volcano-scheduler.conf: ") for s in said)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="services.scheduler.service"):
        Scheduler(event_log, record.configured(MOVED, "nvidia:\n  enableNumaTopology: true\n"))
    said = [r.getMessage() for r in caplog.records if r.name == "services.scheduler.service"]
    assert "device-config.yaml: nvidia.enableNumaTopology: not acted on by Tessera (" in said[-1], said


SLA_CONF = """actions: "enqueue, allocate"
tiers:
- plugins:
  - name: sla
    arguments: {sla-waiting-time: 60s}
- plugins:
  - name: proportion
  - name: predicates
  - name: deviceshare
    arguments: {deviceshare.AscendHAMiVNPUEnable: true}
"""


async def test_a_job_waits_out_its_sla_time_on_the_wall_clock(event_log: EventLog) -> None:
    """Sessions run at the wall clock where the log's lags it: the log's clock moves only with
    events that carry a time (a pod started), so a job whose sla waiting time had run out on a
    quiet cluster waited on, and one submitted after any pod had started was let through at
    once. Here proportion keeps a job larger than the cluster Pending until sla lets it in,
    60 s after it arrived — and the clock each session ran at is in its record."""
    from services.core.scheduling import record

    await seed(event_log)
    s = event_log.subjects
    big = msgspec.structs.replace(inference_job("big"), arrive_at=1000.0, min_resources={"cpu": 500_000, "memory": 1024})
    await put(event_log, s.job("default", "big"), JobSubmitted(spec=big))
    clock = [1059.0]
    sched = Scheduler(event_log, record.configured(SLA_CONF), clock=lambda: clock[0])
    await sched.recover()

    def decided() -> list[str]:
        outs = sched.session_events()
        assert all((ref := record.ref_of(o.headers or {})) is not None and ref.now == clock[0] for o in outs)
        return [o.event.type_name() for o in outs]

    assert decided() == ["JobUnschedulable"]  # 59 s: proportion's word stands
    clock[0] = 1060.0
    assert decided() == ["PlacementProposed"]  # its waiting time is over: sla let it in
