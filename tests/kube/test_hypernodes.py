"""Issue 25 through the services on the emulator: HyperNodes created on the API server reach the
scheduler through admission's watch, and a Volcano Job with networkTopology hard (tier 1) is
bound whole inside one super-pod — the one that holds it — where without the constraint the
default node order spreads its pods over the least used nodes of both."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_volcano import volcano_served
from tests.processes import wait_until

REQUESTS = {"requests": {"cpu": "4", "memory": "4Gi"}}


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": volcano.TOPOLOGY, "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}  # fmt: skip


def train_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "minAvailable": 3,
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                 "tasks": [{"name": "w", "replicas": 3, "template": {"spec": {
                     "containers": [{"name": "c", "image": "busybox", "resources": REQUESTS}]}}}]},
    }  # fmt: skip


async def two_superpods(cluster: Cluster) -> None:
    """sp-a: two nodes of 8 cpu (room for 4 pods); sp-b: one of 8 and one of 64 (the biggest),
    mostly taken by a default-scheduler pod: sp-b has room for 2 of a 3-pod gang."""
    await volcano_served(cluster)
    for name, cpu, pod in (("a-0", "8", "sp-a"), ("a-1", "8", "sp-a"), ("b-0", "8", "sp-b"), ("b-1", "64", "sp-b")):
        await cluster.create_node(name, cpu=cpu, labels={"superpod": pod})
    await cluster.kube.create(volcano.hypernodes_path(), hypernode(
        "sp-a", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"superpod": "sp-a"}}}}]))  # fmt: skip
    await cluster.kube.create(volcano.hypernodes_path(), hypernode(
        "sp-b", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^b-"}}}]))  # fmt: skip
    await cluster.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": "default"},
                              "spec": {"schedulerName": "default-scheduler", "nodeName": "b-1",
                                       "containers": [{"name": "c", "image": "busybox",
                                                       "resources": {"requests": {"cpu": "62"}}}]},
                              "status": {"phase": "Running"}})  # fmt: skip


async def train_placed(cluster: Cluster) -> dict[str, str]:
    """The Job's Running pods and their nodes, once all three run."""

    async def placed() -> dict[str, str]:
        return {p["metadata"]["name"]: kpods.node_name(p) for p in await cluster.pods()
                if p["metadata"]["name"].startswith("train-w-") and kpods.phase(p) == "Running"}  # fmt: skip

    async def settled() -> bool:
        return len(await placed()) == 3

    await wait_until(settled, 90, "the Job's 3 pods Running")
    return await placed()


async def test_a_hard_gang_is_bound_inside_one_hypernode(cluster: Cluster, tmp_path: Path) -> None:
    await two_superpods(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), train_job())
            nodes = await train_placed(cluster)
            assert set(nodes.values()) <= {"a-0", "a-1"}, nodes  # the super-pod that holds all three
        finally:
            await asyncio.to_thread(cp.stop)


async def test_jobs_are_judged_after_the_hypernodes_there_at_start(cluster: Cluster, tmp_path: Path) -> None:
    """HyperNodes are listed before jobs, as Volcano's scheduler waits for its informers: jobs
    and HyperNodes were listed together, and a job that reached the log first was placed by a
    session that had no HyperNodes yet — across both super-pods (seen in a loaded run). Here
    admission's HyperNode list is slow to answer."""
    if cluster.kind != "kmock":
        pytest.skip("holds one client's list: the emulator's doing")
    await two_superpods(cluster)
    await cluster.kube.create(volcano.jobs_path("default"), train_job())
    slow = cluster.held_lists[("tessera-admission", "topology.volcano.sh/hypernodes")] = asyncio.Event()
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            async def answering() -> bool:
                return len(slow._waiters or ()) == 1  # type: ignore[attr-defined]

            await wait_until(answering, 30, "admission's HyperNode list waiting for its answer")
            assert not cluster.requests[("tessera-admission", "list", "batch.volcano.sh/jobs")], \
                "jobs listed before the HyperNodes were"  # fmt: skip
            slow.set()
            nodes = await train_placed(cluster)
            assert set(nodes.values()) <= {"a-0", "a-1"}, nodes
        finally:
            slow.set()
            await asyncio.to_thread(cp.stop)
