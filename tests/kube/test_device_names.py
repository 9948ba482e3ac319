"""A device is asked by a name the node's kubelet must serve: the kubelet admits a pod asking
an extended resource its node does not advertise with that ask dropped, and calls no device
plugin for it — bound there, the pod would start without the card. HAMi's Ascend plugin
serves each model's name (`huawei.com/Ascend910B3`), not the family name of the article's YAML
(`huawei.com/Ascend910`; Tessera's own node side serves both, tests/kube/test_device_plugin.py):
on such a node the family's pod waits, saying which name to ask, and the model's runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube.status import scheduled_condition
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod, ascend_register
from tests.processes import wait_until


def _pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})  # fmt: skip


async def test_a_pod_asking_a_name_no_node_serves_waits_and_says_which_to_ask(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.create_node("hami-1", allocatable={"huawei.com/Ascend910B3": "32"}, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("hami-1"),
        hami.ascend_handshake_key("Ascend910B3"): "Reported_2026.12.01 08:00:00"})  # fmt: skip
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(_pod("family", {"huawei.com/Ascend910": "1"}))
            await cluster.create_pod(_pod("model", {"huawei.com/Ascend910B3": "1"}))

            async def settled() -> bool:
                family, model = await cluster.pod("default", "family"), await cluster.pod("default", "model")
                cond = (scheduled_condition(family) if family else None) or {}
                return model is not None and kpods.phase(model) == "Running" and cond.get("status") == "False"

            await wait_until(settled, 60, "the model's pod Running, the family's told why it waits")
            family = await cluster.pod("default", "family")
            assert family is not None and not kpods.node_name(family)
            message = str((scheduled_condition(family) or {}).get("message"))
            assert "1 node(s) don't serve huawei.com/Ascend910: their device plugins serve " \
                   "huawei.com/Ascend910B3" in message, message  # fmt: skip
        finally:
            await asyncio.to_thread(cp.stop)
