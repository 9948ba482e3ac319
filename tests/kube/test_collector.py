"""A deleted Volcano Job's pods and PodGroup go with it: on a cluster with a garbage collector
(every real one) the collector deletes them through their owner references and Tessera asks
nothing for them; on an API server alone (envtest, the emulator without the harness's
collector) Tessera finds them still there after its grace and deletes them itself."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from services.cli.up import ControlPlane
from services.kube import volcano
from tests.kube.cluster import Cluster, GarbageCollector, Kubelet
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.test_volcano import _get
from tests.processes import wait_until


@pytest.mark.parametrize("collector", [True, False], ids=["with-collector", "api-server-alone"])
async def test_a_deleted_jobs_pods_and_podgroup_go_by_the_collector_or_by_tessera(
        cluster: Cluster, tmp_path: Path, collector: bool) -> None:  # fmt: skip
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    gc = GarbageCollector(str(cluster.kubeconfig)) if collector else contextlib.nullcontext()
    async with Kubelet(cluster) as kubelet, gc:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), one_pod_job("done", None))

            async def running() -> bool:
                pod = await cluster.pod("default", "done-w-0")
                return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

            await wait_until(running, 60, "the job's pod Running")
            await kubelet.finish("default", "done-w-0", 0)

            async def completed() -> bool:
                job = await _get(cluster, volcano.jobs_path("default", "done")) or {}
                return ((job.get("status") or {}).get("state") or {}).get("phase") == "Completed"

            await wait_until(completed, 60, "the Job Completed")
            groups = (await cluster.kube.get(volcano.podgroups_path("default"))).get("items") or []
            assert len(groups) == 1
            group = groups[0]["metadata"]["name"]
            await cluster.kube.delete(volcano.jobs_path("default", "done"))

            async def all_gone() -> bool:
                return await cluster.pod("default", "done-w-0") is None and \
                    await _get(cluster, volcano.podgroups_path("default", group)) is None  # fmt: skip

            await wait_until(all_gone, 60, "the Succeeded pod and the PodGroup gone with the Job")
            if cluster.kind == "kmock":
                by_tessera = [cluster.requests[("tessera-queue", "delete", what)]
                              for what in ("pods", "scheduling.volcano.sh/podgroups")]  # fmt: skip
                if collector:
                    assert by_tessera == [0, 0], "Tessera deleted what the garbage collector deletes"
                    assert isinstance(gc, GarbageCollector) and gc.deleted == 2
                else:  # (a reconcile before its watch brought the first deletion may ask again: 404)
                    assert all(n >= 1 for n in by_tessera), cluster.requests
        finally:
            await asyncio.to_thread(cp.stop)
