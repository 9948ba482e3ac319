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
from services.kube import volcano
from services.kube.status import scheduled_condition
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod, ascend_register
from tests.processes import wait_until


def _pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})  # fmt: skip


async def _hami_node(cluster: Cluster) -> None:
    """A node of HAMi's Ascend plugin: it serves the model's name only."""
    await cluster.create_node("hami-1", allocatable={"huawei.com/Ascend910B3": "32"}, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("hami-1"),
        hami.ascend_handshake_key("Ascend910B3"): "Reported_2026.12.01 08:00:00"})  # fmt: skip


async def test_a_pod_asking_a_name_no_node_serves_waits_and_says_which_to_ask(cluster: Cluster, tmp_path: Path) -> None:
    await _hami_node(cluster)
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


async def test_a_slice_asked_without_its_count_is_refused_for_a_pod_and_counted_for_a_jobs_pod(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The kubelet calls the device plugin only for a resource the container asks: a pod asking
    `huawei.com/Ascend910B3-memory` alone would start without its card. A bare pod (it exists
    as written) is refused, naming the count to add; a Volcano Job's pod is made with the count
    written in, as HAMi's webhook writes it, and runs on its slice."""
    await cluster.volcano_crds()
    await _hami_node(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    memory_only = {"huawei.com/Ascend910B3-memory": "16384"}
    job = {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "infer", "namespace": "default"},
           "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": [{"name": "w", "replicas": 1, "template": {
               "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": memory_only}}]}}}]}}  # fmt: skip
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(_pod("bare", memory_only))
            await cluster.kube.create(volcano.jobs_path("default"), job)

            async def settled() -> bool:
                bare, made = await cluster.pod("default", "bare"), await cluster.pod("default", "infer-w-0")
                cond = (scheduled_condition(bare) if bare else None) or {}
                return made is not None and kpods.phase(made) == "Running" and cond.get("status") == "False"

            await wait_until(settled, 60, "the Job's pod Running, the bare pod told why it waits")
            bare = await cluster.pod("default", "bare")
            assert bare is not None and not kpods.node_name(bare)
            message = str((scheduled_condition(bare) or {}).get("message"))
            assert "spec.containers[0].resources.limits.huawei.com/Ascend910B3" in message, message
            assert "add huawei.com/Ascend910B3: 1 to its limits" in message, message
            made = await cluster.pod("default", "infer-w-0")
            assert made is not None
            assert made["spec"]["containers"][0]["resources"]["limits"] == {**memory_only, "huawei.com/Ascend910B3": "1"}
            devices = made["metadata"]["annotations"]["hami.io/Ascend910B3-devices-allocated"]
            assert ",Ascend910B3,16384," in devices, devices  # the slice, on the card the kubelet's plugin is asked for
        finally:
            await asyncio.to_thread(cp.stop)
