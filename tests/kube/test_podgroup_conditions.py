"""A PodGroup's conditions as Volcano's gang plugin writes them (rev-operators finding 4).

At each session's close the gang plugin gives a ready job (minMember of its tasks allocated,
bound, running or succeeded) `Scheduled`, and a job not ready `Unschedulable`; each replaces
only the condition of its type, so a PodGroup keeps one of each, the newer telling the truth.
Tessera wrote a single condition from the job's last verdict: a Running Ray cluster whose
autoscaled extra worker did not fit showed `Unschedulable` for good, beside `phase: Running`;
a gang cut below minMember showed `phase: Unknown` beside `Scheduled`.
"""

from __future__ import annotations

from typing import Any

from contracts.workloads import TaskSpec
from services.cli.up import ControlPlane
from services.core.scheduling import snapshot as st
from services.kube import volcano
from services.kube.client import pods_path
from tests.kube.cluster import Cluster
from tests.kube.test_operators import group_status, phases, plane, pod, podgroup
from tests.kube.test_operators import owner as owner_ref
from tests.processes import wait_until

__all__ = ["plane"]  # the fixture, used by the tests below

CPU2 = {"cpu": "2", "memory": "1Gi"}


def _types(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    conditions = status.get("conditions") or []
    types = [c.get("type") for c in conditions]
    assert len(types) == len(set(types)), f"one condition per type: {conditions}"
    return {str(c.get("type")): c for c in conditions}


async def _pod_condition(cluster: Cluster, name: str) -> dict[str, Any]:
    obj = await cluster.kube.get(pods_path("default", name))
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})


async def _finish(cluster: Cluster, name: str, code: int) -> None:
    state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    await cluster.kube.patch(pods_path("default", name, "status"), {"status": {
        "phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{"name": "c", "state": state}]}})  # fmt: skip


async def test_a_ready_ray_cluster_stays_scheduled_when_an_extra_worker_does_not_fit(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """KubeRay with autoscaling: minMember 1, the head and a worker run; the autoscaler adds a
    worker too big for any node. The pod says why it waits (PodScheduled=False); the group,
    ready, stays Running and `Scheduled`, never `Unschedulable`."""
    await cluster.create_node("n1", cpu="4")
    ref = owner_ref("ray.io/v1", "RayCluster", "rc")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "ray-rc-pg", ref, 1, min_resources=CPU2, pending=True))  # fmt: skip
    for name in ("rc-head", "rc-worker-a"):
        await cluster.create_pod(pod(name, "ray-rc-pg", ref, requests=CPU2, task="wg"))

    async def running() -> bool:
        return set((await phases(cluster, ["rc-head", "rc-worker-a"])).values()) == {"Running"}

    await wait_until(running, 30, "the head and a worker Running")
    await cluster.create_pod(pod("rc-worker-b", "ray-rc-pg", ref, requests={"cpu": "8", "memory": "1Gi"}, task="wg"))

    async def said_on_the_pod() -> bool:
        return (await _pod_condition(cluster, "rc-worker-b")).get("status") == "False"

    await wait_until(said_on_the_pod, 30, "the extra worker's PodScheduled=False")
    # a change the job controller writes after it read the verdict (same job, later in the log)
    await _finish(cluster, "rc-worker-a", 0)

    async def counted() -> bool:
        return (await group_status(cluster, "ray-rc-pg")).get("succeeded") == 1

    await wait_until(counted, 30, "the group's succeeded count")
    status = await group_status(cluster, "ray-rc-pg")
    conditions = _types(status)
    assert status["phase"] == "Running"
    assert conditions["Scheduled"]["status"] == "True"
    assert "Unschedulable" not in conditions, conditions


async def test_a_cut_gang_shown_unknown_says_unschedulable_after_scheduled(
        cluster: Cluster, plane: ControlPlane) -> None:  # fmt: skip
    """A gang of minMember 2 runs (`Scheduled`); one pod fails and nothing replaces it: the group
    shows `Unknown` and its newest condition is `Unschedulable` in the gang's words, beside the
    earlier `Scheduled`, as Volcano's gang writes a job that is not ready."""
    await cluster.create_node("n1", cpu="8")
    ref = owner_ref("kubeflow.org/v1", "PyTorchJob", "pt")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "pt", ref, 2, queue="default", min_resources={"cpu": "4", "memory": "2Gi"}))  # fmt: skip
    names = ["pt-master-0", "pt-worker-0"]
    for name in names:
        await cluster.create_pod(pod(name, "pt", ref, requests=CPU2, task=name.split("-")[1]))

    async def scheduled() -> bool:
        now = await group_status(cluster, "pt")
        return now.get("phase") == "Running" and "Scheduled" in _types(now)

    await wait_until(scheduled, 30, "the gang Running and Scheduled")
    await _finish(cluster, "pt-worker-0", 1)

    async def unknown() -> bool:
        return (await group_status(cluster, "pt")).get("phase") == "Unknown"

    await wait_until(unknown, 30, "the group Unknown")
    conditions = _types(await group_status(cluster, "pt"))
    assert conditions["Unschedulable"]["status"] == "True"
    assert conditions["Unschedulable"]["message"].startswith("1/2 tasks in gang unschedulable: pod group is not ready")
    assert conditions["Unschedulable"]["lastTransitionTime"] >= conditions["Scheduled"]["lastTransitionTime"]


def test_each_condition_replaces_only_its_own_type() -> None:
    """The gang plugin's `UpdatePodGroupCondition`: the other type is kept as written (its
    time too), as is another writer's condition; a refusal's `Admitted=False` from before
    admission is dropped (this write is its one remover)."""
    task = st.TaskSnap
    t = TaskSpec(name="w", replicas=1)
    running = [task("a", "w", 0, t, status=st.RUNNING), task("b", "w", 1, t, status=st.RUNNING)]
    earlier = [{"type": "Admitted", "status": "False", "reason": "Rejected", "message": "x"},
               {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"},
               {"type": "example.com/Audited", "status": "True", "reason": "Seen", "message": "by a policy"}]  # fmt: skip
    got = volcano.podgroup_status("Running", running, "a verdict about an extra pod", 2, earlier)
    assert got["conditions"] == [*earlier[1:], {"type": "Scheduled", "status": "True",
                                                "reason": volcano.SCHEDULED_REASON, "message": ""}]  # fmt: skip
    cut = [running[0], task("b", "w", 1, t, status=st.FAILED)]
    got = volcano.podgroup_status("Unknown", cut, "", 2, got["conditions"])
    assert [c["type"] for c in got["conditions"]] == ["Unschedulable", "example.com/Audited", "Scheduled"]
    assert got["conditions"][0]["message"] == ("1/2 tasks in gang unschedulable: pod group is not ready, "
                                               "1 Failed, 1 Running, 2 minAvailable")  # fmt: skip
    waiting = volcano.podgroup_status("Inqueue", [task("a", "w", 0, t)], "", 2)  # not judged yet: nothing said
    assert "conditions" not in waiting
