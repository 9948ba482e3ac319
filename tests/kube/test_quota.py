"""Issue 25 on a cluster: a namespace's ResourceQuota, watched from the API server, holds a
Volcano Job at enqueue — its PodGroup stays Pending with the quota's numbers and no pod is made
(the job controller makes pods only after enqueue, so the API server's own quota admission
never sees them) — and once the quota is raised the job is admitted and its pods run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import quotas_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_volcano import huge_job, volcano_served
from tests.kube.workload import hami_nodes
from tests.processes import wait_until

HELD = ("namespace default: huawei.com/Ascend910B3 requested 4, quota 2, used 0 "
        "(ResourceQuota npu: requests.huawei.com/Ascend910B3)")  # fmt: skip


def quota(cards: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "npu", "namespace": "default"},
            "spec": {"hard": {"requests.huawei.com/Ascend910B3": str(cards)}}}  # fmt: skip


def pair_job() -> dict[str, Any]:
    """Two pods of two whole cards: 4 cards, the gang's minResources."""
    job = huge_job("default")
    job["metadata"]["name"] = "pair"
    job["spec"]["minAvailable"] = 2
    task = job["spec"]["tasks"][0]
    task["replicas"] = 2
    task["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "huawei.com/Ascend910B3": "2"
    }
    return job


async def test_a_job_over_its_namespace_quota_waits_until_the_quota_is_raised(
    cluster: Cluster, tmp_path: Path
) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    await cluster.kube.create(quotas_path("default"), quota(2))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), pair_job())
            uid = ((await cluster.present(volcano.jobs_path("default", "pair"))) or {})["metadata"][
                "uid"
            ]
            pg_path = volcano.podgroups_path("default", f"pair-{uid}")
            seen: dict[str, Any] = {}

            async def held() -> bool:
                st = seen["status"] = ((await cluster.present(pg_path)) or {}).get("status") or {}
                return st.get("phase") == "Pending" and any(
                    c["type"] == "Unschedulable" and c["status"] == "True" and HELD in c["message"]
                    for c in st.get("conditions") or [])  # fmt: skip

            try:
                await wait_until(held, 60, "PodGroup Pending with the quota's words")
            except TimeoutError as exc:
                raise AssertionError(
                    f"PodGroup status {seen.get('status')!r}, wanted {HELD!r}"
                ) from exc
            assert not [
                p for p in await cluster.pods() if p["metadata"]["name"].startswith("pair-")
            ]

            await cluster.kube.patch(
                quotas_path("default", "npu"),
                {"spec": {"hard": {"requests.huawei.com/Ascend910B3": "4"}}},
            )

            async def running() -> bool:
                ps = [p for p in await cluster.pods() if p["metadata"]["name"].startswith("pair-")]
                return len(ps) == 2 and all(kpods.phase(p) == "Running" for p in ps)

            await wait_until(
                running, 90, "the job admitted and its two pods Running once the quota is 4"
            )
        finally:
            await asyncio.to_thread(cp.stop)
