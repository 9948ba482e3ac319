"""The operators that use Volcano as their gang scheduler, pointed at Tessera unchanged: each
test makes on the cluster exactly what the operator makes — its PodGroup, then its pods, owned
by the operator's custom resource — and acts on what it reads back, as the operator does.

- Kubeflow training-operator (`--gang-scheduler-name=volcano`; PyTorchJob here): a PodGroup
  named after the job, owned by it (`minMember`, `queue`, `priorityClassName`, `minResources`
  = the first minMember replicas' requests); its pods, owned by the job, name the group in
  `scheduling.k8s.io/group-name` and their replica type in `volcano.sh/task-spec`, and are
  made only once the PodGroup's `status.phase` is neither empty nor Pending
  (kubeflow/training-operator `pkg/controller.v1/control/podgroup_control.go`
  DelayPodCreationDueToPodGroup, `pkg/controller.v1/common/job.go` ReconcileJobs). A finished
  or suspended job has its pods and PodGroup deleted; resumed, both are made again.
- KubeRay (`ray.io/scheduler-name: volcano`): the PodGroup `ray-<cluster>-pg`, owned by the
  RayCluster, made with `status.phase: Pending`, minMember = head + workers, minResources
  their sum, queue from the cluster's `volcano.sh/queue-name` label; pods are made at once,
  with the group annotation, `volcano.sh/task-spec` and the queue label
  (ray-project/kuberay `ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go`).
- spark-operator: `spark-<app>-pg`, owned by the SparkApplication, `status.phase: Pending`,
  minMember 1, minResources driver + executors; the driver first, the executors later, made by
  the driver and owned by the driver pod (kubeflow/spark-operator
  `internal/scheduler/volcano/scheduler.go`; apache/spark `KubernetesUtils.addOwnerReference`).
- MindCluster ascend-operator (AscendJob, `mindxdl.gitee.com/v1`): the PodGroup
  `<job>-<uid>` with the job's labels and annotations, its queue as given (empty when unset),
  pods asking whole `huawei.com/Ascend910` cards made only once the group is past Pending
  (Ascend/mind-cluster `component/ascend-operator/pkg/controllers/v1/job.go` isPodGroupSynced).

The training-operator's and ascend-operator's wait for Inqueue needs the group admitted with
no pod at all, as Volcano's enqueue admits it on its minResources alone: Tessera waited for
minMember pods (`PodSource._group_docs`), so such a group was never Inqueue and those operators
never made a pod (the PyTorchJob tests below).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until

GROUP = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"


def owner(api_version: str, kind: str, name: str, uid: str = "") -> dict[str, Any]:
    """The controller reference an operator puts on what it makes (the API server does not
    check that the owner exists at create)."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid or str(uuid.uuid4()),
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def podgroup(name: str, ref: dict[str, Any], min_member: int, *, queue: str = "",
             priority_class: str = "", min_resources: dict[str, str] | None = None,
             pending: bool = False, ns: str = "default") -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_resources is not None:
        spec["minResources"] = min_resources
    pg: dict[str, Any] = {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": ns, "ownerReferences": [ref]}, "spec": spec}  # fmt: skip
    if pending:  # KubeRay and spark-operator write it on create (the CRD has no status subresource)
        pg["status"] = {"phase": "Pending"}
    return pg


def pod(name: str, group: str, ref: dict[str, Any], *, requests: dict[str, str], task: str = "",
        labels: dict[str, str] | None = None, priority_class: str = "") -> dict[str, Any]:  # fmt: skip
    annotations = {GROUP: group, **({TASK_SPEC: task} if task else {})}
    spec: dict[str, Any] = {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}  # fmt: skip
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {},
                         "annotations": annotations, "ownerReferences": [ref]},
            "spec": spec}  # fmt: skip


@pytest.fixture
async def plane(cluster: Cluster, tmp_path: Path) -> AsyncIterator[ControlPlane]:
    """Tessera's control plane and the kubelets, against `cluster`, stopped after the test."""
    await cluster.volcano_crds()
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            yield cp
        finally:
            await asyncio.to_thread(cp.stop)


async def group_status(cluster: Cluster, name: str) -> dict[str, Any]:
    return ((await cluster.present(volcano.podgroups_path("default", name))) or {}).get("status") or {}


async def phases(cluster: Cluster, names: list[str]) -> dict[str, str]:
    """Each pod's phase, "" for one that is not there."""
    got = {p["metadata"]["name"]: p for p in await cluster.pods()}
    return {n: kpods.phase(got[n]) if n in got else "" for n in names}


async def nodes_of(cluster: Cluster, names: list[str]) -> dict[str, str]:
    got = {p["metadata"]["name"]: p for p in await cluster.pods()}
    return {n: kpods.node_name(got.get(n, {})) for n in names}


async def queue(cluster: Cluster, name: str, capability: dict[str, str] | None = None) -> None:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if capability:
        spec["capability"] = capability
    await cluster.kube.create(volcano.queues_path(), {"apiVersion": volcano.SCHEDULING, "kind": "Queue",
                                                      "metadata": {"name": name}, "spec": spec})  # fmt: skip


async def test_a_ray_cluster_is_placed_whole_or_not_at_all_in_the_queue_its_label_names(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """KubeRay makes `ray-<cluster>-pg` (Pending, minMember head + workers, minResources their
    sum, queue from the cluster's `volcano.sh/queue-name` label) and the pods at once. Room for
    two of three: none is bound, the group says Unschedulable; a second node: all three run
    together, and the queue the label named counts the running group."""
    await queue(cluster, "ray")
    await cluster.create_node("n1", cpu="4")
    ref = owner("ray.io/v1", "RayCluster", "raycluster")
    labels = {"ray.io/cluster": "raycluster", "volcano.sh/queue-name": "ray"}
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "ray-raycluster-pg", ref, 3, queue="ray", min_resources={"cpu": "6", "memory": "6Gi"}, pending=True))  # fmt: skip
    names = ["raycluster-head", "raycluster-worker-a", "raycluster-worker-b"]
    for name, task in zip(names, ["headgroup", "workergroup", "workergroup"], strict=True):
        await cluster.create_pod(pod(name, "ray-raycluster-pg", ref, task=task, labels=labels,
                                     requests={"cpu": "2", "memory": "2Gi"}))  # fmt: skip

    async def held() -> bool:
        st = await group_status(cluster, "ray-raycluster-pg")
        return "Unschedulable" in [c.get("type") for c in st.get("conditions") or []]

    await wait_until(held, 20, "the group found unschedulable as one gang")
    assert not any((await nodes_of(cluster, names)).values()), "a Ray pod bound before its whole gang fit"
    await cluster.create_node("n2", cpu="4")

    async def all_run() -> bool:
        return set((await phases(cluster, names)).values()) == {"Running"}

    await wait_until(all_run, 20, "head and workers Running once a second node came")

    async def counted() -> bool:
        q = ((await cluster.present(volcano.queues_path("ray"))) or {}).get("status") or {}
        return q.get("running") == 1 and (await group_status(cluster, "ray-raycluster-pg")).get("phase") == "Running"

    await wait_until(counted, 20, "the group Running, counted by queue `ray`")


class SparkApp:
    """spark-operator's SparkApplication in cluster mode: `spark-<app>-pg` (minMember 1,
    minResources driver + executors), the driver owned by the application, the executors made
    later by the driver and owned by the driver pod."""

    def __init__(self, cluster: Cluster, app: str, executors: int, *, queue: str = "") -> None:
        self.cluster, self.app, self.queue = cluster, app, queue
        self.group = f"spark-{app}-pg"
        self.driver = f"{app}-driver"
        self.executors = [f"{app}-exec-{i + 1}" for i in range(executors)]
        self.labels = {"sparkoperator.k8s.io/app-name": app, "spark-app-selector": f"spark-{uuid.uuid4().hex}"}

    async def submit(self) -> None:
        ref = owner("sparkoperator.k8s.io/v1beta2", "SparkApplication", self.app)
        cpu = 1 + len(self.executors)
        await self.cluster.kube.create(volcano.podgroups_path("default"), podgroup(
            self.group, ref, 1, queue=self.queue, pending=True,
            min_resources={"cpu": str(cpu), "memory": f"{cpu}Gi"}))  # fmt: skip
        await self.cluster.create_pod(pod(self.driver, self.group, ref, requests={"cpu": "1", "memory": "1Gi"},
                                          labels={**self.labels, "spark-role": "driver"}))  # fmt: skip

    async def start_executors(self) -> None:
        """What the driver does once it runs: its executors, owned by the driver pod."""
        driver = await self.cluster.pod("default", self.driver) or {}
        ref = {"apiVersion": "v1", "kind": "Pod", "name": self.driver, "uid": driver["metadata"]["uid"],
               "controller": True}  # fmt: skip
        for name in self.executors:
            await self.cluster.create_pod(pod(name, self.group, ref, requests={"cpu": "1", "memory": "1Gi"},
                                              labels={**self.labels, "spark-role": "executor"}))  # fmt: skip

    async def driver_runs(self) -> bool:
        return (await phases(self.cluster, [self.driver]))[self.driver] == "Running"


async def test_spark_executors_made_after_the_driver_runs_are_placed(cluster: Cluster, plane: ControlPlane) -> None:
    """The driver alone is the gang (minMember 1); once it runs it makes its executors, which
    name the running group: late members, placed as they come."""
    await cluster.create_node("n1", cpu="8")
    app = SparkApp(cluster, "pi", executors=2)
    await app.submit()
    await wait_until(app.driver_runs, 20, "the driver Running")
    await app.start_executors()

    async def all_run() -> bool:
        return set((await phases(cluster, [app.driver, *app.executors])).values()) == {"Running"}

    await wait_until(all_run, 20, "both executors Running beside the driver")

    async def counted() -> bool:
        st = await group_status(cluster, app.group)
        return st.get("phase") == "Running" and st.get("running") == 3

    await wait_until(counted, 20, "the group Running, its three pods counted")


async def test_a_spark_groups_min_resources_decide_its_enqueue(cluster: Cluster, plane: ControlPlane) -> None:
    """The group asks driver + executors (3 cpus) of a queue capped at 2: Volcano never
    enqueues it, so its driver (1 cpu, which alone would fit) is not placed; the queue raised
    to 8 cpus, the group is admitted and the driver runs."""
    await queue(cluster, "etl", capability={"cpu": "2", "memory": "64Gi"})
    await cluster.create_node("n1", cpu="16")
    app = SparkApp(cluster, "etl", executors=2, queue="etl")
    await app.submit()

    async def told() -> bool:
        driver = await cluster.pod("default", app.driver) or {}
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (driver.get("status") or {}).get("conditions") or [])  # fmt: skip

    await wait_until(told, 20, "the driver told why it waits")
    assert not (await nodes_of(cluster, [app.driver]))[app.driver], "placed though its group's minResources exceed the queue"
    assert (await group_status(cluster, app.group)).get("phase") in (None, "Pending")
    await cluster.kube.patch(volcano.queues_path("etl"), {"spec": {"capability": {"cpu": "8", "memory": "64Gi"}}})
    await wait_until(app.driver_runs, 20, "the driver Running once its queue has room for the whole group")


async def test_spark_submits_own_podgroup_without_a_min_member_places_each_pod(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """spark-submit's VolcanoFeatureStep without a template makes `<appId>-podgroup` with an
    empty spec (no minMember: 0) before the driver, and owns it by the driver pod once that
    exists: the driver and, later, its executors are each placed as they come."""
    app = f"spark-{uuid.uuid4().hex}"
    group = f"{app}-podgroup"
    await cluster.create_node("n1", cpu="8")
    await cluster.kube.create(volcano.podgroups_path("default"), {
        "apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
        "metadata": {"name": group, "namespace": "default"}, "spec": {}})  # fmt: skip
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "submitter", "uid": str(uuid.uuid4()), "controller": True}
    driver = await cluster.create_pod(pod(f"{app}-driver", group, ref, requests={"cpu": "1", "memory": "1Gi"}))

    async def driver_runs() -> bool:
        return (await phases(cluster, [f"{app}-driver"]))[f"{app}-driver"] == "Running"

    await wait_until(driver_runs, 20, "the driver Running")
    by_driver = {"apiVersion": "v1", "kind": "Pod", "name": f"{app}-driver",
                 "uid": driver["metadata"]["uid"], "controller": True}  # fmt: skip
    await cluster.kube.patch(volcano.podgroups_path("default", group), {"metadata": {"ownerReferences": [by_driver]}})
    executors = [f"{app}-exec-{i}" for i in (1, 2)]
    for name in executors:
        await cluster.create_pod(pod(name, group, by_driver, requests={"cpu": "1", "memory": "1Gi"}))

    async def all_run() -> bool:
        return set((await phases(cluster, [f"{app}-driver", *executors])).values()) == {"Running"}

    await wait_until(all_run, 20, "the executors Running beside the driver")


class PyTorchJob:
    """What Kubeflow's training-operator makes for a PyTorchJob with `--gang-scheduler-name=volcano`:
    its PodGroup first (named after the job, minMember the replicas, minResources theirs), and
    the pods only once the group's phase is past Pending (common/job.go)."""

    API = "kubeflow.org/v1"

    def __init__(self, cluster: Cluster, name: str, workers: int) -> None:
        self.cluster, self.name = cluster, name
        self.ref = owner(self.API, "PyTorchJob", name)
        self.replicas = [(f"{name}-master-0", "master", "1")] + [(f"{name}-worker-{i}", "worker", "2")
                                                                 for i in range(workers)]  # fmt: skip

    @property
    def names(self) -> list[str]:
        return [n for n, _t, _c in self.replicas]

    async def submit(self) -> None:
        cpu = sum(int(c) for _n, _t, c in self.replicas)
        await self.cluster.kube.create(volcano.podgroups_path("default"), podgroup(
            self.name, self.ref, len(self.replicas), queue="default",
            min_resources={"cpu": str(cpu), "memory": f"{len(self.replicas)}Gi"}))  # fmt: skip

        async def admitted() -> bool:  # the operator's own check before it makes pods
            return (await group_status(self.cluster, self.name)).get("phase") not in (None, "", "Pending")

        await wait_until(admitted, 30, f"PodGroup {self.name} past Pending (the operator waits for it)")
        assert not [p for p in await self.cluster.pods() if p["metadata"]["name"] in self.names]
        for name, task, cpu in self.replicas:
            await self.cluster.create_pod(pod(name, self.name, self.ref, task=task,
                                              requests={"cpu": cpu, "memory": "1Gi"}))  # fmt: skip

    async def running(self) -> bool:
        return set((await phases(self.cluster, self.names)).values()) == {"Running"}


async def test_a_pytorchjob_gets_its_pods_once_its_podgroup_is_inqueue(cluster: Cluster, plane: ControlPlane) -> None:
    await cluster.create_node("n1", cpu="8")
    job = PyTorchJob(cluster, "mnist", workers=2)
    await job.submit()  # waited for good before: the group had no pods, so was never judged
    assert (await group_status(cluster, "mnist"))["phase"] == "Inqueue"
    await wait_until(job.running, 30, "master and workers Running")

    async def shown_running() -> bool:
        st = await group_status(cluster, "mnist")
        return st.get("phase") == "Running" and st.get("running") == 3

    await wait_until(shown_running, 30, "the PodGroup Running with 3 running")


async def test_a_pytorchjob_too_big_for_the_cluster_waits_at_enqueue_with_no_pods(
    cluster: Cluster, plane: ControlPlane
) -> None:
    """Its minResources do not fit: the group stays Pending (no pods made), said why; a node that
    makes room lets it in."""
    await cluster.create_node("n1", cpu="4")
    job = PyTorchJob(cluster, "big", workers=3)  # 7 cpus
    submitting = asyncio.ensure_future(job.submit())
    try:
        async def said() -> bool:
            st = await group_status(cluster, "big")
            return st.get("phase") == "Pending" and any(c.get("type") == "Unschedulable"
                                                        for c in st.get("conditions") or [])  # fmt: skip

        await wait_until(said, 30, "the group Pending and Unschedulable")
        assert not submitting.done()
        await cluster.create_node("n2", cpu="4")
        await submitting
    finally:
        submitting.cancel()
    await wait_until(job.running, 30, "the job Running once a second node came")


async def test_a_suspended_and_resumed_pytorchjob_runs_again_under_the_same_names(
    cluster: Cluster, plane: ControlPlane
) -> None:
    """Suspended (`runPolicy.suspend`), the training-operator deletes the job's pods, then its
    PodGroup; resumed, it makes the PodGroup again, waits for it to be past Pending, and makes
    the pods under their old names. The second run must run as the first did."""
    await cluster.create_node("n1", cpu="8")
    job = PyTorchJob(cluster, "resume", workers=1)
    await job.submit()
    await wait_until(job.running, 30, "the first run Running")
    for name in job.names:
        await cluster.kube.delete(pods_path("default", name))

    async def pods_gone() -> bool:
        return set((await phases(cluster, job.names)).values()) == {""}

    await wait_until(pods_gone, 30, "the pods gone (the kubelet confirmed)")
    await cluster.kube.delete(volcano.podgroups_path("default", "resume"))

    async def group_gone() -> bool:
        return await cluster.present(volcano.podgroups_path("default", "resume")) is None

    await wait_until(group_gone, 30, "the PodGroup gone")
    await job.submit()  # resumed: the group first, the pods once it is past Pending
    await wait_until(job.running, 30, "the second run Running")


async def test_an_ascendjob_waits_at_enqueue_for_its_cards_then_runs_one_pod_per_node(
    cluster: Cluster, plane: ControlPlane
) -> None:
    """MindCluster's ascend-operator: the PodGroup `<job>-<uid>` asking 24 whole
    `huawei.com/Ascend910` cards (3 workers × 8), its pods made only once the group is past
    Pending. Two nodes of 8 cards (served by Huawei's own device plugin): the group waits with no
    pods; a third node lets it in, and the three workers run, one per node."""
    for name in ("npu-1", "npu-2"):
        await cluster.create_node(name, allocatable={"huawei.com/Ascend910": "8"})
    ref = owner("mindxdl.gitee.com/v1", "AscendJob", "llm")
    group = f"llm-{ref['uid']}"
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        group, ref, 3, min_resources={"huawei.com/Ascend910": "24", "cpu": "3"}))  # fmt: skip

    async def admitted() -> bool:
        return (await group_status(cluster, group)).get("phase") not in (None, "", "Pending")

    async def said_pending() -> bool:
        st = await group_status(cluster, group)
        return st.get("phase") == "Pending" and any(c.get("type") == "Unschedulable"
                                                    for c in st.get("conditions") or [])  # fmt: skip

    await wait_until(said_pending, 30, "the group Pending and Unschedulable on two nodes")
    assert not await admitted()
    await cluster.create_node("npu-3", allocatable={"huawei.com/Ascend910": "8"})
    await wait_until(admitted, 30, "the group past Pending once a third node came")
    names = [f"llm-worker-{i}" for i in range(3)]
    for name in names:
        await cluster.create_pod(pod(name, group, ref, task="worker",
                                     requests={"huawei.com/Ascend910": "8", "cpu": "1"}))  # fmt: skip

    async def running() -> bool:
        return set((await phases(cluster, names)).values()) == {"Running"}

    await wait_until(running, 30, "the three workers Running")
    assert sorted((await nodes_of(cluster, names)).values()) == ["npu-1", "npu-2", "npu-3"]
