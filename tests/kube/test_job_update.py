"""Live changes to admitted Volcano objects on a cluster (issue 14): a running Job's replicas
edited 2 → 3 → 2 (`kubectl edit vcjob`) creates and binds the third pod, then deletes it, the
Job's counts following; a field Volcano's update webhook does not allow is refused with a
Warning Event naming it while the job runs on; a third pod named into a running kubectl PodGroup joins its
gang, and leaves it again when deleted. Against kmock's emulator, and a real API server with Volcano's CRDs when one is given."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path as kpods_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_volcano import _job, _start, create_article_job, volcano_served
from tests.kube.workload import hami_nodes
from tests.processes import wait_until

JOB = "npu-train-job"


async def _running(cluster: Cluster, prefix: str) -> set[str]:
    return {p["metadata"]["name"] for p in await cluster.pods()
            if p["metadata"]["name"].startswith(prefix) and kpods.phase(p) == "Running"
            and not kpods.terminating(p)}  # fmt: skip


async def _scale(cluster: Cluster, replicas: int, **spec: Any) -> None:
    """What `kubectl edit vcjob` sends: the Job's spec with the task's replicas changed."""
    tasks = copy.deepcopy((await _job(cluster))["spec"]["tasks"])
    tasks[0]["replicas"] = replicas
    await cluster.kube.patch(volcano.jobs_path("default", JOB), {"spec": {"tasks": tasks, **spec}})


async def test_scaling_a_running_job_creates_and_deletes_its_pods(cluster: Cluster, tmp_path: Path) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await _start(cp)
        try:
            pg_path = await create_article_job(cluster)
            workers = {f"{JOB}-worker-{i}" for i in range(3)}

            async def runs(n: int) -> bool:
                st = (await _job(cluster)).get("status") or {}
                return await _running(cluster, f"{JOB}-worker-") == set(sorted(workers)[:n]) \
                    and st.get("running") == n and st.get("state", {}).get("phase") == "Running"  # fmt: skip

            await wait_until(lambda: runs(2), 90, "two pods Running, the Job Running")
            await _scale(cluster, 3)
            await wait_until(lambda: runs(3), 60, "a third pod created, bound and Running; the Job counts 3")
            third = next(p for p in await cluster.pods() if p["metadata"]["name"] == f"{JOB}-worker-2")
            assert third["spec"].get("nodeName") and third["metadata"]["annotations"][volcano.TASK_INDEX] == "2"
            pg = await cluster.present(pg_path)
            # the task's minAvailable is the 2 Volcano's mutating webhook wrote at creation: an
            # edit of its replicas leaves it (the gang does not grow with them)
            assert pg is not None and pg["spec"]["minTaskMember"] == {"worker": 2}

            await _scale(cluster, 2)

            async def third_gone() -> bool:
                names = {p["metadata"]["name"] for p in await cluster.pods()}
                return f"{JOB}-worker-2" not in names and await runs(2)

            await wait_until(third_gone, 60, "the third pod deleted, the Job counts 2 again")
            pg = await cluster.present(pg_path)
            assert pg is not None and pg["spec"]["minTaskMember"] == {"worker": 2}

            await cluster.kube.patch(volcano.jobs_path("default", JOB), {"spec": {"maxRetry": 9}})

            async def refused() -> list[tuple[str, str]]:
                return [(e["reason"], e["message"]) for e in await cluster.events()
                        if e["involvedObject"].get("name") == JOB and e["type"] == "Warning"]  # fmt: skip

            await wait_until(refused, 30, "the forbidden edit refused with a Warning on the Job")
            warnings = await refused()  # (every one of them shown if there are more)
            assert len(warnings) == 1, warnings
            [(reason, message)] = warnings
            assert reason == "FailedUpdate", warnings
            assert message.startswith("spec.maxRetry: Forbidden: job updates may not change fields other than")
            # nothing else changed: still (or, once a late report of the removed pod is folded,
            # again) two pods Running and the Job Running
            await wait_until(lambda: runs(2), 30, "the Job as it was: two pods Running")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_pod_named_into_a_running_podgroup_joins_it(cluster: Cluster, tmp_path: Path) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pair", "namespace": "default"}, "spec": {"minMember": 2, "queue": "default"}}  # fmt: skip

    def member(i: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pair-{i}", "annotations": {"scheduling.k8s.io/group-name": "pair"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox", "resources": {
                    "limits": {"huawei.com/Ascend910B3": "1"}}}]}}  # fmt: skip

    async def group_runs(n: int) -> bool:
        st = ((await cluster.present(volcano.podgroups_path("default", "pair"))) or {}).get("status") or {}
        return await _running(cluster, "pair-") == {f"pair-{i}" for i in range(n)} \
            and st.get("phase") == "Running" and st.get("running") == n  # fmt: skip

    async with Kubelet(cluster):
        await _start(cp)
        try:
            await cluster.kube.create(volcano.podgroups_path("default"), pg)
            for i in range(2):
                await cluster.create_pod(member(i))
            await wait_until(lambda: group_runs(2), 90, "the gang of two Running")
            await cluster.create_pod(member(2))
            await wait_until(lambda: group_runs(3), 60, "the third pod bound and Running in the group")
            await cluster.kube.delete(kpods_path("default", "pair-2"))  # it leaves; the gang goes on

            async def left() -> bool:
                names = {p["metadata"]["name"] for p in await cluster.pods()}
                return "pair-2" not in names and await group_runs(2)

            await wait_until(left, 60, "the deleted member gone, the PodGroup Running with 2")
        finally:
            await asyncio.to_thread(cp.stop)
