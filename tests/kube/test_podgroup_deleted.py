"""A PodGroup deleted while its pods are still on their nodes (rev-operators finding 1).

The training-operator deletes a finished job's PodGroup and, with `cleanPodPolicy: None` (the
MPIJob, XGBoost, Paddle, JAX and DeepSpeed default), keeps its pods, which run on; `kubectl
delete raycluster` has the garbage collector delete the pods (gracefully) and the PodGroup at
once. Volcano's cache only unsets a deleted PodGroup's scheduling spec (its job is dropped
once it has no task left) and takes a node's usage from the pods on it, so those pods keep
their CPUs and cards until they are gone. Tessera ended the job at the PodGroup's deletion,
its slices were released, and a second gang was bound onto the same cards (16 on an 8-card
node) or CPUs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from contracts.events import JobDeleted, JobUpdated
from services.admission.service import AdmissionService
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_judged_again import replayed
from tests.kube.test_operators import group_status, nodes_of, owner, phases, plane, pod, podgroup
from tests.processes import wait_until

__all__ = ["plane"]  # the fixture, used by the tests below

WORKER = {"cpu": "1", "memory": "1Gi", "huawei.com/Ascend910": "4"}
LAUNCHER = {"cpu": "1", "memory": "1Gi"}


@pytest.fixture
async def held(cluster: Cluster, tmp_path: Path) -> AsyncIterator[Kubelet]:
    """The control plane with kubelets that keep a deleted pod running (its grace period)
    until the test confirms it."""
    await cluster.volcano_crds()
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, hold_deletions=True) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            yield kubelet
        finally:
            await asyncio.to_thread(cp.stop)


async def _running(cluster: Cluster, names: list[str]) -> bool:
    return set((await phases(cluster, names)).values()) == {"Running"}


async def _past_pending(cluster: Cluster, group: str) -> bool:
    """What the training-operator waits for before it makes the pods."""
    return (await group_status(cluster, group)).get("phase") not in (None, "", "Pending")


async def _held_back(cluster: Cluster, group: str) -> bool:
    """The group judged and kept Pending for want of room, said in its Unschedulable condition."""
    st = await group_status(cluster, group)
    return st.get("phase") == "Pending" and any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                                                for c in st.get("conditions") or [])  # fmt: skip


async def _mpijob(cluster: Cluster, name: str, *, make_pods: bool = True) -> list[str]:
    """An MPIJob as the training-operator makes it: its PodGroup (3 members, 8 cards), then,
    once the group is past Pending, the launcher and two 4-card workers."""
    ref = owner("kubeflow.org/v1", "MPIJob", name)
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        name, ref, 3, queue="default", min_resources={"cpu": "3", "huawei.com/Ascend910": "8"}))  # fmt: skip
    names = [f"{name}-launcher", f"{name}-worker-0", f"{name}-worker-1"]
    if make_pods:
        await wait_until(lambda: _past_pending(cluster, name), 30, f"{name} Inqueue")
        await _mpijob_pods(cluster, name, ref)
    return names


async def _mpijob_pods(cluster: Cluster, name: str, ref: dict[str, Any]) -> None:
    await cluster.create_pod(pod(f"{name}-launcher", name, ref, requests=LAUNCHER, task="launcher"))
    for i in range(2):
        await cluster.create_pod(pod(f"{name}-worker-{i}", name, ref, requests=WORKER, task="worker"))


async def _finish(cluster: Cluster, name: str) -> None:
    await cluster.kube.patch(pods_path("default", name, "status"), {"status": {
        "phase": "Succeeded", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}})  # fmt: skip


async def _cards_bound(cluster: Cluster, node: str) -> int:
    """The cards the live pods bound to the node ask for."""
    total = 0
    for p in await cluster.pods():
        if kpods.node_name(p) != node or kpods.phase(p) in ("Succeeded", "Failed"):
            continue
        for c in (p.get("spec") or {}).get("containers") or []:
            total += int(((c.get("resources") or {}).get("requests") or {}).get("huawei.com/Ascend910", 0))
    return total


async def test_an_mpijobs_workers_keep_their_cards_after_its_podgroup_is_deleted(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """The launcher exits 0; the training-operator deletes the PodGroup and keeps the workers
    (cleanPodPolicy None), which run on with their 8 cards. A second MPIJob asking for 8 cards
    stays Pending, said why, with no pod bound, until the first job's workers are deleted;
    then it runs. Before, it was Inqueue at once and its workers were bound beside the old
    ones: 16 cards on an 8-card node."""
    await cluster.create_node("npu-1", cpu="64", allocatable={"huawei.com/Ascend910": "8"})
    first = await _mpijob(cluster, "mpi1")
    await wait_until(lambda: _running(cluster, first), 30, "mpi1 Running")
    await _finish(cluster, "mpi1-launcher")
    await cluster.kube.delete(volcano.podgroups_path("default", "mpi1"))
    second = await _mpijob(cluster, "mpi2", make_pods=False)
    await wait_until(lambda: _held_back(cluster, "mpi2"), 30, "mpi2 Pending for want of cards")
    # a KubeRay-like operator makes its pods at once: they are not bound either
    await _mpijob_pods(cluster, "mpi2", owner("kubeflow.org/v1", "MPIJob", "mpi2"))
    assert await _held_back(cluster, "mpi2")
    assert await _cards_bound(cluster, "npu-1") == 8
    assert not any((await nodes_of(cluster, second)).values())
    for name in first[1:]:  # the MPIJob deleted: its workers go
        await cluster.kube.delete(pods_path("default", name))
    await wait_until(lambda: _running(cluster, second), 30, "mpi2 Running once mpi1's workers are gone")
    assert await _cards_bound(cluster, "npu-1") == 8


async def test_a_ray_clusters_terminating_pods_keep_their_cpus_after_its_podgroup_is_deleted(
        cluster: Cluster, held: Kubelet) -> None:  # fmt: skip
    """`kubectl delete raycluster`: the garbage collector deletes the pods, which run through
    their grace period, and the PodGroup. A new cluster's 6-CPU gang on the same 8-CPU node
    waits until the kubelet confirms the old pods gone. Before, it was bound at once: 12 CPUs."""
    await cluster.create_node("n1", cpu="8")
    ref = owner("ray.io/v1", "RayCluster", "rc")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "ray-rc-pg", ref, 3, min_resources={"cpu": "6", "memory": "3Gi"}, pending=True))  # fmt: skip
    old = ["rc-head", "rc-w0", "rc-w1"]
    for name in old:
        await cluster.create_pod(pod(name, "ray-rc-pg", ref, requests={"cpu": "2", "memory": "1Gi"}))
    await wait_until(lambda: _running(cluster, old), 30, "rc Running")
    for name in old:
        await cluster.kube.delete(pods_path("default", name))
    await cluster.kube.delete(volcano.podgroups_path("default", "ray-rc-pg"))
    await wait_until(lambda: asyncio.sleep(0, len(held.terminating) == 3), 30, "the old pods terminating")
    ref2 = owner("ray.io/v1", "RayCluster", "rc2")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "ray-rc2-pg", ref2, 3, min_resources={"cpu": "6", "memory": "3Gi"}, pending=True))  # fmt: skip
    new = ["rc2-head", "rc2-w0", "rc2-w1"]
    for name in new:
        await cluster.create_pod(pod(name, "ray-rc2-pg", ref2, requests={"cpu": "2", "memory": "1Gi"}))
    await wait_until(lambda: _held_back(cluster, "ray-rc2-pg"), 30, "rc2 Pending for want of CPUs")
    assert not any((await nodes_of(cluster, new)).values())
    for name in old:
        await held.confirm("default", name)
    await wait_until(lambda: _running(cluster, new), 30, "rc2 Running once the old pods are gone")


async def test_a_podgroup_made_again_under_its_name_is_a_new_job_once_the_old_pods_are_gone(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """The PodGroup `mpi` is deleted while its workers run on, and made again under the same
    name (a new object): it is a new job, which waits — said in an Event — while the old
    workers hold the cards, and is admitted and placed once they are gone. Before, the old job
    ended at once and the new group's pods were bound beside the old ones."""
    await cluster.create_node("npu-1", cpu="64", allocatable={"huawei.com/Ascend910": "8"})
    first = await _mpijob(cluster, "mpi")
    await wait_until(lambda: _running(cluster, first), 30, "mpi Running")
    await _finish(cluster, "mpi-launcher")
    await cluster.kube.delete(volcano.podgroups_path("default", "mpi"))
    ref = owner("kubeflow.org/v1", "MPIJob", "mpi")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "mpi", ref, 2, queue="default", min_resources={"cpu": "2", "huawei.com/Ascend910": "8"}))  # fmt: skip

    async def told() -> bool:
        return any(e.get("reason") == "Waiting" and (e.get("involvedObject") or {}).get("kind") == "PodGroup"
                   and "still on their nodes" in str(e.get("message")) for e in await cluster.events())  # fmt: skip

    await wait_until(told, 30, "the new PodGroup told why it waits")
    assert not await _past_pending(cluster, "mpi")
    new = ["mpi-b-worker-0", "mpi-b-worker-1"]
    for name in new:
        await cluster.create_pod(pod(name, "mpi", ref, requests=WORKER, task="worker"))
    for name in first[1:]:
        await cluster.kube.delete(pods_path("default", name))
    await wait_until(lambda: _running(cluster, new), 30, "the new group's pods Running once the old ones are gone")
    assert await _cards_bound(cluster, "npu-1") == 8


async def test_a_deleted_podgroups_job_keeps_only_its_placed_pods_while_it_waits_for_them(cluster: Cluster) -> None:
    """A RayCluster's group: the head bound and Running, a worker still Pending, when the
    PodGroup is deleted (the worker's pod is not gone yet). The job waits for the head, and
    keeps only the head's task (`JobUpdated`, minAvailable 1): the worker is placed no more —
    before, the scheduler kept placing it (its binding 404 once the pod went, again and again)
    and could preempt for a group that no longer exists. The head gone, the job ends."""
    await cluster.volcano_crds()
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    ref = owner("ray.io/v1", "RayCluster", "rc")
    pg = volcano.typed(await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "rc-pg", ref, 2, queue="default", min_resources={"cpu": "2"})), "PodGroup")  # fmt: skip
    head = pod("rc-head", "rc-pg", ref, requests={"cpu": "1"})
    head["spec"]["nodeName"] = "n1"
    head["status"] = {"phase": "Running"}
    head = await cluster.create_pod(head)
    worker = await cluster.create_pod(pod("rc-worker", "rc-pg", ref, requests={"cpu": "1"}))
    await source.process([("podgroup", Change("upsert", "default/rc-pg", pg)),
                          ("pod", Change("upsert", "default/rc-head", head)),
                          ("pod", Change("upsert", "default/rc-worker", worker)),
                          ("pod", Change("synced", "", {})), ("podgroup", Change("synced", "", {}))])  # fmt: skip
    job = admission.known.jobs[("default", "rc-pg")]
    assert job.live and sorted(p for t in job.spec.tasks for p in t.pod_names) == ["rc-head", "rc-worker"]
    await cluster.kube.delete(volcano.podgroups_path("default", "rc-pg"))
    await source.process([("podgroup", Change("delete", "default/rc-pg", pg))])
    job = admission.known.jobs[("default", "rc-pg")]
    assert job.live and [t.pod_names for t in job.spec.tasks] == [("rc-head",)] and job.spec.min_available == 1
    [update] = [e for _m, e in await replayed(log) if isinstance(e, JobUpdated)]
    assert update.reason.startswith(f"its PodGroup (uid {volcano.uid(pg)}) was deleted: only its 1 placed pod(s)")
    await source.process([("pod", Change("delete", "default/rc-worker", worker)),
                          ("pod", Change("delete", "default/rc-head", head))])  # fmt: skip
    assert isinstance((await replayed(log))[-1][1], JobDeleted)
