"""One name, two objects: a standalone pod and a Volcano Job may carry the same name in a
namespace (a test pod `train`, then the Job `train`). Tessera knows a job by namespace and name,
so the pod's deletion — by hand, or the terminated-pod collector's — was taken for the end of
whatever job held the name then: the Job's running pods were ended and its cards freed under
them. A deletion ends a job only when the deleted object is the one the job was admitted from."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.processes import wait_until


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "default", "tasks": [
                {"name": "main", "replicas": 1, "template": {"spec": pod("t")["spec"]}}]}}  # fmt: skip


async def test_deleting_a_finished_pod_leaves_the_volcano_job_of_its_name_running(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, run_for={"train": 0}):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(pod("train"))

            async def phase(name: str, want: str) -> bool:
                return kpods.phase(await cluster.pod("default", name) or {}) == want

            await wait_until(lambda: phase("train", "Succeeded"), 60, "the test pod run to its end")

            async def ended() -> bool:  # (a Job judged while the pod's job is live is refused: one name)
                return any(type(e).__name__ == "JobPhaseChanged" and e.name == "train" and e.phase == "Completed"
                           for _s, e in await logged(cp))  # fmt: skip

            await wait_until(ended, 60, "the pod's job Completed in the log")
            await cluster.kube.create(volcano.jobs_path("default"), job("train"))
            await wait_until(lambda: phase("train-main-0", "Running"), 60, "the Job of the same name running")
            await cluster.kube.delete(pods_path("default", "train"))
            # a pod made after the deletion, admitted and bound: admission has read the deletion
            await cluster.create_pod(pod("after"))

            async def bound() -> bool:
                return bool(((await cluster.pod("default", "after")) or {}).get("spec", {}).get("nodeName"))

            await wait_until(bound, 60, "a later pod admitted and bound")
            running = await cluster.pod("default", "train-main-0") or {}
            assert kpods.phase(running) == "Running" and not kpods.terminating(running)
            state = ((await cluster.present(volcano.jobs_path("default", "train")) or {}).get("status") or {}).get("state")
            assert (state or {}).get("phase") == "Running", state
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_pending_pod_deleted_while_admission_was_down_is_deleted_in_the_log(cluster: Cluster, tmp_path: Path) -> None:
    """No watch event tells a restarted admission of a pod deleted while it was away (a
    ReplicaSet scaled down during an upgrade deletes its pending pods first): the job lived on
    in the log, placed, its binding refused (404), placed again, for good. Its first listing
    without the pod ends it, as it did already for a Volcano Job's object."""
    await cluster.create_node("n1")
    big = pod("waits")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000"  # fits no node: stays pending
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:
        await cluster.create_pod(big)

        async def admitted() -> bool:
            return await _logged(cp, "JobSubmitted", "waits")

        await wait_until(admitted, 60, "the pod admitted")
        cp.kill("admission")
        await cluster.kube.delete(pods_path("default", "waits"))  # unbound: gone at once
        assert await cluster.pod("default", "waits") is None
        await asyncio.to_thread(cp.restart, "admission")

        async def deleted() -> bool:
            return await _logged(cp, "JobDeleted", "waits")

        await wait_until(deleted, 60, "the job deleted in the log once admission listed the pods")
    finally:
        await asyncio.to_thread(cp.stop)


async def _logged(cp: ControlPlane, kind: str, job: str) -> bool:
    return any(type(e).__name__ == kind and _job_of(e) == job for _seq, e in await logged(cp))


def _job_of(event: Any) -> str:
    spec = getattr(event, "spec", None)
    return str(spec.name if spec is not None else getattr(event, "name", ""))
