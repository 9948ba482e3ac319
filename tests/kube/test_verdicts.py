"""Why a pod waits, on the API: written by the status writer's own task after a short grace, so
a verdict a placement overtook is never written, and reading the log never waits on the API."""

from __future__ import annotations

import asyncio
from pathlib import Path

from contracts.events import (
    EvictionRequested,
    JobSubmitted,
    JobUnschedulable,
    PlacementProposed,
    TaskPlacement,
)
from contracts.registry import default_registry
from contracts.subjects import subject_of
from contracts.workloads import JobSpec, TaskSpec
from services.kube.client import Kube, Limits, configuration
from services.kube.status import PodStatusWriter, scheduled_condition
from services.runtime.eventlog import Entry
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.workload import as_pod
from tests.processes import wait_until


def _pod(name: str) -> dict:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip


def _spec(name: str) -> JobSpec:
    return JobSpec(namespace="default", name=name, tasks=(TaskSpec(name="main", pod_names=(name,)),))


async def test_an_overtaken_verdict_is_never_written_and_a_current_one_is(cluster: Cluster, tmp_path: Path) -> None:
    kube = Kube(await configuration(str(cluster.kubeconfig)), Limits(qps=0))
    log = MemoryLog()
    reg = default_registry()
    writer = PodStatusWriter(log, kube, grace=0.3)
    for name in ("overtaken", "waiting"):
        await cluster.create_pod(_pod(name))
    stopping = asyncio.Event()
    running = asyncio.create_task(writer.run(stopping))
    try:
        # one session's output: both judged, then one of them placed before the grace is over
        events = [JobSubmitted(spec=_spec("overtaken")), JobSubmitted(spec=_spec("waiting")),
                  JobUnschedulable(namespace="default", name="overtaken", reason="0/3 nodes are available"),
                  JobUnschedulable(namespace="default", name="waiting", reason="0/3 nodes are available"),
                  PlacementProposed(namespace="default", name="overtaken", based_on=1,
                                    placements=(TaskPlacement(task="overtaken", node="n1"),))]  # fmt: skip
        for i, ev in enumerate(events):
            await log.append(Entry(subject_of(log.subjects, ev), reg.encode(ev),
                                   reg.envelope(ev, msg_id=f"v{i}").to_headers()))  # fmt: skip

        async def waiting_said() -> bool:
            pod = await cluster.pod("default", "waiting")
            cond = scheduled_condition(pod) if pod else None
            if not (cond and cond["status"] == "False"):
                return False
            # (its Event is written after the condition, by a request of its own)
            return any(e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] == "waiting"
                       for e in await cluster.events())  # fmt: skip

        await wait_until(waiting_said, 30, "the waiting pod's PodScheduled=False and its Event")
        assert writer.due == {}  # the verdicts of that session are all settled (the loop's order)
        overtaken = await cluster.pod("default", "overtaken")
        assert overtaken is not None and scheduled_condition(overtaken) is None
        said = {e["involvedObject"]["name"] for e in await cluster.events() if e.get("reason") == "FailedScheduling"}
        assert said == {"waiting"}
    finally:
        stopping.set()
        await asyncio.wait_for(running, 30)
        await kube.close()


async def test_an_eviction_asked_while_the_writer_was_away_is_carried_out_once_it_lists(cluster: Cluster) -> None:
    """A preemption's `EvictionRequested` appended while the queue service (the status writer's
    host) was restarting: its start folds it with the rest of the log, and the live path never
    sees it. Before, the victim ran on — its cards wanted by the preemptor, which waited for
    good. The writer carries out every eviction no ending followed, once its pods are listed."""
    kube = Kube(await configuration(str(cluster.kubeconfig)), Limits(qps=0))
    log = MemoryLog()
    reg = default_registry()
    victim = _pod("victim")
    victim["spec"]["nodeName"] = "n1"
    made = await cluster.create_pod(victim)
    events = [JobSubmitted(spec=_spec("victim")),
              EvictionRequested(namespace="default", name="victim", task="victim", reason="preempted for default/urgent")]  # fmt: skip
    for i, ev in enumerate(events):
        await log.append(Entry(subject_of(log.subjects, ev), reg.encode(ev), reg.envelope(ev, msg_id=f"e{i}").to_headers()))
    writer = PodStatusWriter(log, kube, grace=0.3)
    await writer.recover()  # the eviction is at or below its watermark: folded, not delivered live
    stopping = asyncio.Event()
    running = asyncio.create_task(writer.run(stopping))
    try:

        async def evicted() -> bool:
            pod = await cluster.pod("default", "victim")
            return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

        await wait_until(evicted, 30, "the victim evicted")
        said = [e for e in await cluster.events() if e.get("reason") == "Preempted"]
        assert [e["involvedObject"]["uid"] for e in said] == [made["metadata"]["uid"]]
        assert "preempted for default/urgent" in said[0]["message"]
    finally:
        stopping.set()
        await asyncio.wait_for(running, 30)
        await kube.close()


async def test_an_eviction_delivered_again_after_its_ending_stops_nothing(cluster: Cluster) -> None:
    """The writer rides the queue's consumer: an eviction held past ack_wait comes again after
    its pod's ending. Taken as a new stop, it deleted the pod a user made again under the name
    once that pod was bound."""
    from contracts.envelope import Envelope
    from contracts.events import TaskFinished
    from services.runtime.service import Received

    kube = Kube(await configuration(str(cluster.kubeconfig)), Limits(qps=0))
    log = MemoryLog()  # where the deliveries below come from (the writer's own consumer reads another)
    reg = default_registry()
    writer = PodStatusWriter(MemoryLog(), kube, grace=0.3)
    await writer.recover()
    stopping = asyncio.Event()
    running = asyncio.create_task(writer.run(stopping))
    try:
        await writer.synced.wait()
        events = [JobSubmitted(spec=_spec("web")),
                  EvictionRequested(namespace="default", name="web", task="web", reason="preempted for default/urgent"),
                  TaskFinished(namespace="default", name="web", task="web", node="n1", exit_code=-1, reason="pod deleted")]  # fmt: skip
        delivered = []
        for i, ev in enumerate(events):
            await log.append(Entry(subject_of(log.subjects, ev), reg.encode(ev), reg.envelope(ev, msg_id=f"d{i}").to_headers()))
            msg = next(m for m in log.messages() if m.headers.get("Nats-Msg-Id") == f"d{i}" or m.seq == i + 1)
            delivered.append(Received(msg, Envelope.from_headers(msg.headers)))
            await writer.on_event(ev, delivered[-1])
        await writer.on_event(events[1], delivered[1])  # the eviction again, after its ending
        again = _pod("web")
        again["spec"]["nodeName"] = "n1"  # made again by the user, bound
        made = await cluster.create_pod(again)

        await cluster.create_pod(_pod("marker"))  # seen after it: what the writer did of `web` is done

        async def seen() -> bool:
            return ("default", "marker") in writer.pods

        await wait_until(seen, 30, "the pods made after it on the writer's watch")
        pod = await cluster.pod("default", "web")
        assert pod is not None and pod["metadata"]["uid"] == made["metadata"]["uid"]
        assert not pod["metadata"].get("deletionTimestamp")
        assert writer.stops == {}
    finally:
        stopping.set()
        await asyncio.wait_for(running, 30)
        await kube.close()


async def test_the_podgroups_unschedulable_condition_counts_the_nodes_its_pods_event_counts(cluster: Cluster) -> None:
    """A NotReady Node (there, read by no session) is counted in the pods' FailedScheduling
    ("0/3 nodes are available: …, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }"),
    as kube-scheduler counts every Node; the same job's PodGroup condition counted only the
    session's nodes and never said why the NotReady one was out ("0/3 nodes are available: 2
    Insufficient cpu."). Both now fold the nodes alike and say the same."""
    from contracts.events import NodeLost, NodeRegistered
    from services.admission.service import AdmissionService
    from services.kube import volcano
    from services.kube.jobcontroller import JobController
    from services.kube.podsource import PodSource
    from tests.kube.test_judged_again import replayed
    from tests.kube.test_side_by_side import listed, team_pg, upsert
    from tests.kube.test_status_counts import Clock

    await cluster.volcano_crds()
    log = MemoryLog()
    pg = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "64"))
    await listed(PodSource(AdmissionService(log), cluster.kube), ("podgroup", upsert(pg, "PodGroup")))
    controller = JobController(log, cluster.kube, clock=Clock())
    writer = PodStatusWriter(log, cluster.kube)
    verdict = JobUnschedulable(namespace="default", name="team-pg", reason="0/2 nodes are available: 2 Insufficient cpu.",
                               node_reasons={"n1": "Insufficient cpu", "n2": "Insufficient cpu"})  # fmt: skip
    nodes = [NodeRegistered(node=n, cpu_milli=8000, memory_mib=16384) for n in ("n1", "n2", "n3")]
    events = [e for _m, e in await replayed(log)] + [*nodes, NodeLost(node="n3", reason="NotReady"), verdict]
    for seq, event in enumerate(events, start=1):
        controller.fold(seq, event)
        writer.fold(event)
    said = writer.message(verdict)
    assert "0/3 nodes are available" in said, said
    controller.podgroups["default/team-pg"] = volcano.typed(pg, "PodGroup")
    await controller.reconcile("default/team-pg")
    status = (await cluster.kube.get(volcano.podgroups_path("default", "team-pg"))).get("status") or {}
    (cond,) = [c for c in status.get("conditions") or [] if c.get("type") == "Unschedulable"]
    assert said in cond["message"], (said, cond["message"])
