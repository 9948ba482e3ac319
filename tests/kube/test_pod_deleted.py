"""A deleted pod's end is its deletion, whatever the kubelet writes on the way out.

A kubelet (1.27 on) moves a deleted pod to a terminal phase before it is removed: Failed with
its containers killed by SIGTERM (exit 143), or Succeeded where they exit 0 on it. Volcano's
job controller takes any word on a pod with a deletionTimestamp as `PodEvicted`; Tessera read
the phase, so a preempted, drained or `kubectl delete`d Volcano Job pod was PodFailed or even
Succeeded — a `PodEvicted → RestartJob` policy never fired, and without a policy the pod was
never made again (Volcano's job makes it anew)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from contracts.events import JobPhaseChanged, TaskFinished
from services.cli.up import ControlPlane
from services.core.scheduling.snapshot import POD_DELETED
from services.kube import volcano
from services.kube.client import pods_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.kube.test_job_ttl import one_pod_job
from tests.processes import wait_until


@pytest.mark.parametrize("stop_exit_code", [143, 0])
async def test_a_deleted_job_pod_is_evicted_whatever_phase_the_kubelet_ends_it_in(
    cluster: Cluster, tmp_path: Path, stop_exit_code: int
) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    job = one_pod_job("ev", None)
    job["spec"]["policies"] = [{"event": "PodEvicted", "action": "RestartJob"}]
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, stop_exit_code=stop_exit_code):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), job)

            async def running() -> dict | None:
                pod = await cluster.pod("default", "ev-w-0")
                return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

            async def is_running() -> bool:
                return await running() is not None

            await wait_until(is_running, 60, "the job's pod Running")
            first = await running()
            assert first is not None
            await cluster.kube.delete(pods_path("default", "ev-w-0"))  # kubectl delete pod, a drain

            async def restarted() -> bool:
                return any(isinstance(e, JobPhaseChanged) and e.name == "ev" and e.phase == "Restarting"
                           for _seq, e in await logged(cp))  # fmt: skip

            await wait_until(restarted, 60, "the job restarting by its PodEvicted policy")
            finished = [e for _seq, e in await logged(cp) if isinstance(e, TaskFinished) and e.name == "ev"]
            assert finished and finished[0].reason == POD_DELETED and finished[0].exit_code == -1, finished

            async def made_again() -> bool:
                pod = await running()
                return pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]

            await wait_until(made_again, 60, "the pod made again and Running")
        finally:
            await asyncio.to_thread(cp.stop)
