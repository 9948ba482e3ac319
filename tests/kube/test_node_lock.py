"""HAMi's node lock held on: a device pod waits for it, and after longer than an Allocate
takes says so — a Warning Event naming the node and the holder, and when Tessera takes the lock
over — instead of waiting up to the lock's expiry in silence (`get po` shows it committed).
The holder's release lets it bind at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube.client import nodes_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import NODE_SIDE_ASCEND, as_pod, ascend_register
from tests.processes import wait_until


async def test_a_pod_kept_by_a_held_node_lock_says_so_and_binds_once_it_is_released(
        cluster: Cluster, tmp_path: Path) -> None:  # fmt: skip
    held = hami.lock_value(time.time(), "default", "stuck")  # a pod whose plugin never answered
    await cluster.create_node("npu-1", allocatable=NODE_SIDE_ASCEND, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("npu-1"),
        hami.ascend_handshake_key("Ascend910B3"): "Reported_2026.12.01 08:00:00", hami.NODE_LOCK: held})  # fmt: skip
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waits"},
                                             "spec": {"containers": [{"name": "c", "resources": {
                                                 "limits": {"huawei.com/Ascend910B3": "1"}}}]}}))  # fmt: skip

            async def told() -> list[dict[str, Any]]:
                return [e for e in await cluster.events() if e.get("reason") == "NodeLockHeld"]

            async def said() -> bool:
                return bool(await told())

            await wait_until(said, 60, "the waiting pod's NodeLockHeld Event")
            event = (await told())[0]
            assert event["type"] == "Warning" and event["involvedObject"]["name"] == "waits"
            assert "HAMi node lock of npu-1, held by default/stuck since" in event["message"], event["message"]
            assert not kpods.node_name(await cluster.pod("default", "waits") or {})
            await cluster.kube.patch(nodes_path("npu-1"), {"metadata": {"annotations": {hami.NODE_LOCK: None}}})

            async def runs() -> bool:
                return kpods.phase(await cluster.pod("default", "waits") or {}) == "Running"

            await wait_until(runs, 30, "the pod bound and Running once the lock is released")
            assert len(await told()) == 1
        finally:
            await asyncio.to_thread(cp.stop)

