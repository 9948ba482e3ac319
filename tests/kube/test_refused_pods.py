"""A Volcano Job whose pods the API server refuses (PodSecurity, a quota, a webhook) books no
node while its controller backs off. Placed, its cards stayed booked for good: its pods were
never made, so never bound, and every other job that needed the node waited behind a job that
could not run (under Volcano a pod never made is never allocated). Now the job controller gives
a refused job's committed tasks back (`BindingFailed` with a `retry_at`), and the scheduler
holds the job from every node until then, saying why."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from contracts.events import BindingFailed, JobUnschedulable, PlacementCommitted
from services.cli.up import ControlPlane
from services.core.story import story
from services.kube import pods as kpods
from services.kube import volcano
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.kube.test_job_ttl import one_pod_job
from tests.processes import wait_until


def job(name: str, ns: str) -> dict[str, Any]:
    body = one_pod_job(name, None)
    body["metadata"]["namespace"] = ns
    body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    return body


async def test_a_job_whose_pods_are_refused_leaves_its_node_to_the_others(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1", cpu="5")  # one 3-cpu job at a time (both pass enqueue: 6 ≤ 5 × 1.2)
    await cluster.enforce_pod_security("locked")  # the template's pod sets no securityContext
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("locked"), job("refused", "locked"))

            async def placed() -> bool:
                return any(isinstance(e, PlacementCommitted) and e.name == "refused" for _s, e in await logged(cp))

            await wait_until(placed, 60, "the refused job placed (its pods not made yet)")
            await cluster.kube.create(volcano.jobs_path("default"), job("other", "default"))

            async def other_runs() -> bool:
                return kpods.phase(await cluster.pod("default", "other-w-0") or {}) == "Running"

            await wait_until(other_runs, 60, "the other job running on the node the refused one booked")
            events = [e for _s, e in await logged(cp) if getattr(e, "name", "") == "refused"]
            back = [e for e in events if isinstance(e, BindingFailed)]
            assert back and all(e.retry_at > 0 and 'violates PodSecurity "restricted:latest"' in e.reason for e in back), back
            said = [e.reason for e in events if isinstance(e, JobUnschedulable)]
            assert any("held back: the API server refused its pods" in r for r in said), said
            assert await cluster.pod("locked", "refused-w-0") is None
            log = await JetStreamLog.connect(cp.url)  # what `tessera explain job refused` tells
            try:
                told = story([m async for m in log.replay()], "job", "refused", "locked") or {}
            finally:
                await log.close()
            given = [t["details"] for t in told.get("timeline", []) if t["event"] == "given back"]
            assert given and "refused-w-0 on n1: Error creating pod refused-w-0" in given[0], told
            assert "; held until " in given[0], given
        finally:
            await asyncio.to_thread(cp.stop)
