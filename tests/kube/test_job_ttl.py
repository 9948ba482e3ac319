"""`spec.ttlSecondsAfterFinished` (Volcano's garbage collector): a finished Job Tessera admitted
is deleted that long after its status says it finished — its pods with it — and one without
the field, or another scheduler's, is kept."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import volcano
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until


def one_pod_job(name: str, ttl: int | None, scheduler: str = "volcano") -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 1, "schedulerName": scheduler, "queue": "default", "tasks": [
        {"name": "w", "replicas": 1, "template": {"spec": {
            "schedulerName": scheduler, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}  # fmt: skip
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def test_a_finished_job_with_a_ttl_is_deleted_and_one_without_is_kept(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            for name, ttl in (("short", 1), ("kept", None)):
                await cluster.kube.create(volcano.jobs_path("default"), one_pod_job(name, ttl))
            theirs = one_pod_job("theirs", 0, scheduler="other-scheduler")
            theirs["status"] = {"state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}}
            await cluster.kube.create(volcano.jobs_path("default"), theirs)

            async def running() -> bool:
                pods = [await cluster.pod("default", f"{n}-w-0") for n in ("short", "kept")]
                return all(p is not None and (p.get("status") or {}).get("phase") == "Running" for p in pods)

            await wait_until(running, 60, "both jobs' pods Running")
            asked = ("tessera-queue", "fetch", "batch.volcano.sh/jobs")
            asked_before = cluster.requests[asked]  # (a Job admitted before its watch brought it is asked for)
            for name in ("short", "kept"):
                await kubelet.finish("default", f"{name}-w-0", 0)

            async def phases() -> dict[str, str]:
                out = {}
                for name in ("short", "kept"):
                    job = await cluster.present(volcano.jobs_path("default", name))
                    out[name] = "gone" if job is None else str(((job.get("status") or {}).get("state") or {}).get("phase"))
                return out

            async def settled() -> bool:
                return await phases() == {"short": "gone", "kept": "Completed"}

            await wait_until(settled, 60, "the short-lived job deleted after its ttl, the other kept Completed")

            async def pod_gone() -> bool:
                return await cluster.pod("default", "short-w-0") is None

            await wait_until(pod_gone, 30, "the deleted job's pod gone with it")
            if cluster.kind == "kmock":  # its watch said the very Job went: not asked of the server again
                assert cluster.requests[asked] == asked_before, cluster.requests
                # and its ttl deletion asked once, though the job was reconciled again before
                # its watch said the Job went
                assert cluster.requests[("tessera-queue", "delete", "batch.volcano.sh/jobs")] == 1, cluster.requests
            assert await cluster.present(volcano.jobs_path("default", "theirs")) is not None  # not Tessera's
        finally:
            await asyncio.to_thread(cp.stop)
