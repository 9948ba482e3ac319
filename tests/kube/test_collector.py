"""A deleted Volcano Job's pods and PodGroup go with it: on a cluster with a garbage collector
(every real one) the collector deletes them through their owner references and Tessera asks
nothing for them; on an API server alone (envtest, the emulator without the harness's
collector) Tessera finds them still there after its grace and deletes them itself. A Job being
deleted in the foreground is going: its job ends, and nothing is made for it again while the
collector takes its objects."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from contracts.events import JobDeleted, JobPhaseChanged
from services.cli.up import ControlPlane
from services.kube import volcano
from tests.kube.cluster import Cluster, GarbageCollector, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.test_volcano import QUEUE_AGENT
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
                job = await cluster.present(volcano.jobs_path("default", "done")) or {}
                return ((job.get("status") or {}).get("state") or {}).get("phase") == "Completed"

            await wait_until(completed, 60, "the Job Completed")
            groups = (await cluster.kube.get(volcano.podgroups_path("default"))).get("items") or []
            assert len(groups) == 1
            group = groups[0]["metadata"]["name"]
            await cluster.kube.delete(volcano.jobs_path("default", "done"))

            async def all_gone() -> bool:
                # (the collector counts a deletion once its answer is back: after the object went)
                counted = not isinstance(gc, GarbageCollector) or gc.deleted >= 2
                return counted and await cluster.pod("default", "done-w-0") is None and \
                    await cluster.present(volcano.podgroups_path("default", group)) is None  # fmt: skip

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


async def test_a_job_deleted_in_the_foreground_ends_and_nothing_is_made_for_it_again(cluster: Cluster, tmp_path: Path) -> None:
    """`kubectl delete --cascade=foreground` (or Argo CD's prune) leaves the Job with a
    deletionTimestamp and the `foregroundDeletion` finalizer until the collector has deleted its
    pods and PodGroup. The job controller took it as live: it made again the PodGroup the
    collector had just deleted (which then held the Job for good), and the job ran on in the
    log, its cards booked. Here its job ends in the log while its pod is still terminating,
    neither PodGroup nor pod is made again, and once the pod is gone the Job goes and the job
    is deleted in the log."""
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, hold_deletions=True) as kubelet, GarbageCollector(str(cluster.kubeconfig)):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), one_pod_job("fg", None))

            async def running() -> bool:
                pod = await cluster.pod("default", "fg-w-0")
                return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

            await wait_until(running, 60, "the job's pod Running")
            await cluster.kube.delete(volcano.jobs_path("default", "fg"), {
                "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"})  # fmt: skip

            async def ended() -> bool:
                return any(isinstance(e, JobPhaseChanged) and e.name == "fg" and e.phase == "Terminating"
                           for _seq, e in await logged(cp))  # fmt: skip

            await wait_until(ended, 60, "the job ending in the log while its Job is being deleted")

            async def pod_held_podgroup_gone() -> bool:
                groups = (await cluster.kube.get(volcano.podgroups_path("default"))).get("items") or []
                return ("default", "fg-w-0") in kubelet.terminating and not groups

            await wait_until(pod_held_podgroup_gone, 60, "the pod terminating, the PodGroup deleted")
            assert await cluster.present(volcano.jobs_path("default", "fg")) is not None, "gone before its pod"
            await kubelet.confirm("default", "fg-w-0")

            async def all_gone() -> bool:
                groups = (await cluster.kube.get(volcano.podgroups_path("default"))).get("items") or []
                return await cluster.present(volcano.jobs_path("default", "fg")) is None and not groups \
                    and await cluster.pod("default", "fg-w-0") is None  # fmt: skip

            await wait_until(all_gone, 60, "the Job gone after its pod, and nothing of it left")

            async def deleted() -> bool:
                return any(isinstance(e, JobDeleted) and e.name == "fg" for _seq, e in await logged(cp))

            await wait_until(deleted, 60, "the job deleted in the log")
            if cluster.kind == "kmock":
                made = [cluster.requests[(QUEUE_AGENT, "create", what)]
                        for what in ("pods", "scheduling.volcano.sh/podgroups")]  # fmt: skip
                assert made == [1, 1], f"made again for a Job being deleted: {cluster.requests}"
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_job_already_being_deleted_when_admission_lists_it_is_not_admitted(cluster: Cluster, tmp_path: Path) -> None:
    """A Job another finalizer holds in deletion (deletionTimestamp set) before Tessera saw it:
    it was admitted, its pod made and its cards booked, and the job controller then ended it at
    once. It is left alone now, as Volcano's controller skips a terminating Job."""
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    held = one_pod_job("held", None)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await cluster.kube.create(volcano.jobs_path("default"), held)
    await cluster.kube.delete(volcano.jobs_path("default", "held"))
    going = await cluster.present(volcano.jobs_path("default", "held"))
    assert going is not None and going["metadata"].get("deletionTimestamp")
    await cluster.kube.create(volcano.jobs_path("default"), one_pod_job("live", None))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            async def live_runs() -> bool:
                pod = await cluster.pod("default", "live-w-0")
                return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

            await wait_until(live_runs, 60, "the other Job's pod Running (both were listed together)")
            assert await cluster.pod("default", "held-w-0") is None
            assert not [e for _seq, e in await logged(cp) if getattr(e, "name", "") == "held"]
        finally:
            await asyncio.to_thread(cp.stop)
        await cluster.kube.patch(volcano.jobs_path("default", "held"), {"metadata": {"finalizers": None}})
