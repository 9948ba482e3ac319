"""A PodGroup whose job ended stays ended, whatever admission has forgotten (rev-sre finding 2).

Admission forgets a finished job once `--keep-finished` others ended after it; the PodGroup
object stays on the cluster, `Completed`. At admission's restart (a crash, a `helm upgrade`)
its relist met every such group again and, knowing none of them, admitted each as a new job:
the scheduler put them Inqueue, their status went Completed → Inqueue on the API server, and
their queue counted them Inqueue for good. Volcano never enqueues a Completed group again.
And a group's end does not depend on which comes first, its pods' deletion or the node agent's
word that they ended (finding 3).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from contracts.events import EvictionRequested, JobPhaseChanged, JobSubmitted, JobUpdated
from services.admission.service import AdmissionService
from services.cli.up import ControlPlane
from services.kube import podsource, volcano
from services.kube.client import pods_path
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.kube.test_operators import group_status, owner, pod, podgroup
from tests.kube.test_side_by_side import listed, submitted_uids, upsert
from tests.processes import wait_until

CPU = {"cpu": "1", "memory": "1Gi"}
SYNCED = Change("synced", "", {})


async def _gang(cluster: Cluster, name: str) -> None:
    """A PodGroup of two pods as an operator makes it (each pod ends at once: see `Kubelet`)."""
    ref = owner("example.com/v1", "Trainer", name)
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(name, ref, 2))
    for i in range(2):
        await cluster.create_pod(pod(f"{name}-{i}", name, ref, requests=CPU))


async def _completed(cluster: Cluster, name: str) -> bool:
    return (await group_status(cluster, name)).get("phase") == "Completed"


async def _queue_status(cluster: Cluster) -> dict[str, Any]:
    return ((await cluster.present(volcano.queues_path("default"))) or {}).get("status") or {}


async def test_completed_podgroups_admission_forgot_are_not_admitted_again_at_its_restart(
        cluster: Cluster, tmp_path: Path) -> None:  # fmt: skip
    """Admission keeps one finished job: of the three groups ended before its restart, two are
    forgotten (one by a uid it still holds, beyond that by the object's own Completed). Killed
    and started again, it lists them all: none is submitted again, each stays Completed, and the
    default queue counts none Inqueue; a group made afterwards runs and ends as any other."""
    await cluster.volcano_crds()
    await cluster.create_node("n1", cpu="8")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig),
                      extra={"admission": ["--keep-finished", "1"]})  # fmt: skip
    ended = ["pg-a", "pg-b", "pg-c"]
    run_for = {f"{g}-{i}": 0 for g in [*ended, "pg-later"] for i in range(2)}
    async with Kubelet(cluster, run_for=run_for):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            for name in ended:
                await _gang(cluster, name)
                await wait_until(lambda name=name: _completed(cluster, name), 60, f"{name} Completed")
            after = max(seq for seq, _e in await logged(cp))
            await asyncio.to_thread(cp.kill, "admission")
            await asyncio.to_thread(cp.restart, "admission")  # lists every PodGroup again
            await _gang(cluster, "pg-later")  # watched after the relist judged the old ones
            await wait_until(lambda: _completed(cluster, "pg-later"), 60, "a group made after the restart Completed")
            again = [e.spec.name for seq, e in await logged(cp) if seq > after and isinstance(e, JobSubmitted)]
            assert again == ["pg-later"]
            for name in ended:
                assert await _completed(cluster, name), (name, await group_status(cluster, name))

            async def none_inqueue() -> bool:  # written as it converges (pg-later's own Inqueue passes)
                st = await _queue_status(cluster)
                return st.get("inqueue", 0) == 0 and st.get("completed") == len(ended) + 1

            await wait_until(none_inqueue, 30, "the default queue counting 4 Completed, none Inqueue")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_completed_podgroup_is_not_admitted_by_an_admission_whose_log_holds_nothing_of_it(
        cluster: Cluster) -> None:  # fmt: skip
    """Beyond the uids admission holds of forgotten jobs (`ENDED_UIDS`), after a compaction, or
    on a new log over a cluster Volcano ran: the object's own `Completed` is the record that its
    job ran. Listed beside a Pending group, only the Pending one is submitted."""
    await cluster.volcano_crds()
    log = MemoryLog()
    source = PodSource(AdmissionService(log), cluster.kube)
    changes = []
    for name, phase in (("done", "Completed"), ("waiting", "Pending")):
        ref = owner("example.com/v1", "Trainer", name)
        pg = podgroup(name, ref, 1)
        pg["status"] = {"phase": phase}  # (the CRD has no status subresource: written on create)
        pg = await cluster.kube.create(volcano.podgroups_path("default"), pg)
        member = await cluster.create_pod(pod(f"{name}-0", name, ref, requests=CPU))
        changes += [("podgroup", upsert(pg, "PodGroup")), ("pod", Change("upsert", f"default/{name}-0", member))]
    await listed(source, *changes)
    assert await submitted_uids(log, "waiting") and not await submitted_uids(log, "done")
    assert (await group_status(cluster, "done")).get("phase") == "Completed"


async def test_a_podgroup_whose_pods_succeed_and_are_deleted_while_the_node_agent_is_down_completes(
        cluster: Cluster, tmp_path: Path) -> None:  # fmt: skip
    """rev-sre finding 3: both pods of a running group Succeed and are deleted (an operator's
    cleanup) while the node agent is frozen. Admission saw the deletions first and judged them
    a removal from the group ("pods removed", each evicted as "scaled down"); the agent's
    reports of their ends came after and found them gone from the job, which, empty, stayed
    Running for good (`running: 0`). A pod deleted once it Succeeded stays its group's task,
    as Volcano's session counted it Succeeded before it went: the group ends Completed, the
    same end as when the agent reports first."""
    await cluster.volcano_crds()
    await cluster.create_node("n1", cpu="8")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    members = ["pg-0", "pg-1"]
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        agent = cp.procs["nodeagent"]
        try:
            await _gang(cluster, "pg")

            async def running() -> bool:
                return (await group_status(cluster, "pg")).get("running") == 2

            await wait_until(running, 60, "both pods Running, said by the node agent")
            agent.send_signal(signal.SIGSTOP)
            for name in members:
                await kubelet.finish("default", name, 0)
                await cluster.kube.delete(pods_path("default", name))
            marker = pod("marker", "", {}, requests=CPU)
            marker["metadata"] = {"name": "marker", "namespace": "default"}  # a pod of its own
            await cluster.create_pod(marker)

            async def marker_admitted() -> bool:  # (its deletions, watched before it, were judged)
                return any(isinstance(e, JobSubmitted) and e.spec.name == "marker" for _s, e in await logged(cp))

            await wait_until(marker_admitted, 30, "a pod made after the deletions admitted")
            agent.send_signal(signal.SIGCONT)
            await wait_until(lambda: _completed(cluster, "pg"), 60, "the group Completed")
            events = [e for _s, e in await logged(cp) if getattr(e, "name", "") == "pg"]
            removed = [e for e in events if isinstance(e, EvictionRequested)
                       or (isinstance(e, JobUpdated) and "removed" in e.reason)]  # fmt: skip
            assert not removed, removed
            assert [e.phase for e in events if isinstance(e, JobPhaseChanged)][-1] == "Completed"
        finally:
            agent.send_signal(signal.SIGCONT)
            await asyncio.to_thread(cp.stop)


async def test_a_long_lived_groups_succeeded_pods_deleted_stay_its_tasks_up_to_a_bound(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """diff-shell F7: a live group whose pods finish and are cleaned up under fresh names (Ray
    workers scaled down, batch executors) kept every one of them as its task, for as long as it
    lived. The newest `ENDED_GONE_KEPT` stay (its minMember when more); older ones leave the job."""
    monkeypatch.setattr(podsource, "ENDED_GONE_KEPT", 2)
    await cluster.volcano_crds()
    admission = AdmissionService(MemoryLog())
    source = PodSource(admission, cluster.kube)
    ref = owner("ray.io/v1", "RayCluster", "ray")
    pg = volcano.typed(await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "ray", ref, 1, queue="default", min_resources={"cpu": "1"})), "PodGroup")  # fmt: skip

    def worker(i: int, phase: str) -> dict[str, Any]:
        w = pod(f"ray-w-{i}", "ray", ref, requests={"cpu": "1"})
        w["metadata"]["uid"] = f"u-ray-w-{i}"
        w["spec"]["nodeName"] = "n1"
        w["status"] = {"phase": phase}
        return w

    def up(w: dict[str, Any], kind: str = "upsert") -> tuple[str, Change]:
        return "pod", Change(kind, f"default/{w['metadata']['name']}", w)

    await source.process([("pod", SYNCED), ("podgroup", SYNCED), ("podgroup", Change("upsert", "default/ray", pg)),
                          *(up(worker(i, "Running")) for i in range(5))])  # fmt: skip
    assert admission.known.jobs[("default", "ray")].live
    for i in range(4):  # each finishes and is cleaned up; a fresh one takes its place
        await source.process([up(worker(i, "Succeeded")), up(worker(i, "Succeeded"), "delete"),
                              up(worker(5 + i, "Running"))])  # fmt: skip
    job = admission.known.jobs[("default", "ray")]
    assert job.live
    assert sorted(source.ended_gone[("default", "ray")]) == ["ray-w-2", "ray-w-3"]
    names = {p for t in job.spec.tasks for p in t.pod_names}
    assert names == {"ray-w-2", "ray-w-3", "ray-w-4", "ray-w-5", "ray-w-6", "ray-w-7", "ray-w-8"}
