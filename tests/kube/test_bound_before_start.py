"""Tessera started on a cluster whose pods are already bound (a migration from HAMi, a log lost):
a pod bound with HAMi's `-devices-allocated` annotations is booked once, on the cards they name,
and its job is placed in the log — whatever reaches the log first, admission's `existing`
proposal or its node's registration (issue rev-sre 1a). Its node registered after the proposal
was judged, the proposal was refused ("card … is not registered") while the registration booked
the cards anyway: the pod stayed Pending in Tessera for good, the scheduler's proposals for it
were refused "already placed on cards" in a loop, and once the pod Succeeded its cards stayed
booked — leaked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube.client import pods_path
from tests.kube.cluster import Cluster
from tests.kube.workload import MEMORY_910B3, as_pod, ascend_register, cli_json
from tests.processes import wait_until

HELD = ("n0-npu-4", "n0-npu-5")


def _bound_pod() -> dict[str, Any]:
    """Bound to n0 by another scheduler (HAMi's), Running on two whole cards."""
    allocated = "".join(f"{c},Ascend910B3,{MEMORY_910B3},20:" for c in HELD) + ";"
    pod = as_pod({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "w-9", "annotations": {hami.ascend_allocated_key("Ascend910B3"): allocated}},
                  "spec": {"nodeName": "n0", "containers": [
                      {"name": "c", "resources": {"limits": {"huawei.com/Ascend910B3": "2"}}}]}})  # fmt: skip
    pod["status"] = {"phase": "Running"}
    return pod


def _cpu_pod(name: str) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})  # fmt: skip


async def test_a_pod_bound_before_its_node_registers_is_placed_once_and_frees_its_cards(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.create_node("cpu-1")
    await cluster.create_pod(_bound_pod())  # its node's Node object comes later (a kubelet late to register)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:

        async def events(job: str) -> list[dict[str, Any]]:
            return list(await cli_json(cp, "events", "--job", f"default/{job}", "-o", "json", codes=(0, 1)))

        async def proposed() -> bool:
            return any(e["type"] == "PlacementProposed" for e in await events("w-9"))

        await wait_until(proposed, 60, "w-9's existing proposal in the log")
        # a pod placed after it: the allocator (which reads in log order) has judged w-9's
        # proposal once that one is committed — before n0 registers
        await cluster.create_pod(_cpu_pod("probe"))

        async def probe_bound() -> bool:
            return bool((((await cluster.pod("default", "probe")) or {}).get("spec") or {}).get("nodeName"))

        await wait_until(probe_bound, 60, "the probe pod bound")
        await cluster.create_node("n0", allocatable={"huawei.com/Ascend910B3": "32"}, annotations={
            hami.ascend_register_key("Ascend910B3"): ascend_register("n0"),
            hami.ascend_handshake_key("Ascend910B3"): "Reported_2026.12.01 08:00:00"})  # fmt: skip

        async def cards() -> dict[str, int]:
            """Each card's memory booked in the ledger."""
            return {c["uuid"]: c["memory_used"] for c in await cli_json(cp, "get", "cards", "-o", "records", codes=(0, 1))}

        async def w9() -> dict[str, Any]:
            return next(p for p in await cli_json(cp, "get", "pods", "-o", "records", codes=(0, 1)) if p["name"] == "w-9")

        async def placed() -> bool:
            return any(e["type"] == "PlacementCommitted" for e in await events("w-9"))

        await wait_until(placed, 60, "w-9 placed in the log where it runs")
        held = await cards()
        assert {u: m for u, m in held.items() if m} == dict.fromkeys(HELD, MEMORY_910B3), held
        pod = await w9()
        assert (pod["node"], sorted(d["uuid"] for d in pod["devices"])) == ("n0", list(HELD)), pod

        await cluster.kube.patch(pods_path("default", "w-9", "status"), {"status": {"phase": "Succeeded"}})

        async def freed() -> bool:
            return not any((await cards()).values())

        await wait_until(freed, 60, "w-9's cards free once it Succeeded")
        assert (await w9())["phase"] == "Succeeded"
        kinds = [e["type"] for e in await events("w-9")]
        assert "PlacementRejected" not in kinds, kinds
        assert kinds.count("PlacementProposed") == 1 and kinds.count("PlacementCommitted") == 1, kinds
    finally:
        await asyncio.to_thread(cp.stop)
