"""Nodes of the vendor's own device plugin (NVIDIA's k8s-device-plugin, Huawei's
ascend-device-plugin): allocatable `nvidia.com/gpu: 2` or `huawei.com/Ascend910: 2` and no HAMi
registration. Tessera places whole-card pods there up to the count, as Volcano does, counting
other schedulers' pods too; it writes none of HAMi's binding annotations and takes no node lock
(no HAMi plugin would answer them); a slice waits, saying it needs HAMi's registration."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from contracts import hami
from contracts.devices import CardSpec, SliceSpec
from contracts.events import SliceAssignment, TaskPlacement
from contracts.workloads import DeviceRequest, TaskSpec
from services.cli.up import ControlPlane
from services.core.devices import default_catalogue
from services.core.devices import registration as reg
from services.kube import pods
from services.kube.client import nodes_path, pods_path
from services.kube.status import scheduled_condition
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until


def card_pod(name: str, limits: dict[str, str], *, scheduler: str = "volcano", node: str = "",
             annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
                           "spec": {"schedulerName": scheduler, "containers": [
                               {"name": "c", "image": "busybox", "resources": {"limits": limits}}]}}  # fmt: skip
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


async def _state(cluster: Cluster, names: list[str]) -> dict[str, tuple[str, str, str]]:
    """name → (node, phase, PodScheduled=False message)."""
    out = {}
    for n in names:
        p = await cluster.pod("default", n) or {}
        cond = scheduled_condition(p) or {}
        waiting = cond.get("message", "") if cond.get("status") == "False" else ""
        out[n] = ((p.get("spec") or {}).get("nodeName", ""), (p.get("status") or {}).get("phase", ""), waiting)
    return out


async def _one_runs_the_other_says(cluster: Cluster, names: list[str], words: str) -> None:
    """Wait until one of two pods runs on gpu-1 and the other waits saying `words`. A waiting
    pod's words are those of the last session that judged it: one that ran before the first pod
    was placed truly found a card free, so the words to wait for are a later session's."""

    async def so() -> bool:
        got = await _state(cluster, names)
        return sorted(at for at, _, _ in got.values()) == ["", "gpu-1"] and any(words in why for _, _, why in got.values())

    try:
        await wait_until(so, 90, f"one pod on gpu-1, the other waiting saying {words!r}")
    except TimeoutError as e:
        raise AssertionError(f"{e}: {await _state(cluster, names)}") from None


@pytest.mark.parametrize(("resource", "node"), [("nvidia.com/gpu", "gpu-1"), ("huawei.com/Ascend910", "npu-1")])
async def test_whole_cards_of_the_vendors_plugin_run_up_to_the_count_and_slices_wait(
    cluster: Cluster, tmp_path: Path, resource: str, node: str
) -> None:
    await cluster.create_node(node, allocatable={resource: "2"})
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            whole = ["whole-0", "whole-1", "whole-2"]
            for n in whole:
                await cluster.create_pod(card_pod(n, {resource: "1"}))
            if resource.startswith("nvidia"):
                await cluster.create_pod(card_pod("slice", {resource: "1", "nvidia.com/gpumem": "4000"}))
            else:
                await cluster.create_pod(card_pod("slice", {resource: "1", f"{resource}-memory": "8192"}))

            async def two_run_two_wait() -> bool:
                got = await _state(cluster, [*whole, "slice"])
                running = [n for n, (at, phase, _) in got.items() if at == node and phase == "Running"]
                waiting = [n for n, (at, _, why) in got.items() if not at and why]
                # the third's words once a session saw both cards taken (an earlier one found one free)
                full = [n for n in waiting if "in use (2 of 2)" in got[n][2]]
                return len(running) == 2 and len(waiting) == 2 and len(full) == 1

            await wait_until(two_run_two_wait, 90, f"two whole-card pods Running on {node}, the third and the slice waiting")
            got = await _state(cluster, [*whole, "slice"])
            assert not got["slice"][0], got
            third = next(n for n in whole if not got[n][0])
            assert f"every {resource} card the node's device plugin serves is in use (2 of 2)" in got[third][2], got[third]
            assert "install" not in got[third][2], got[third]
            slice_words = got["slice"][2]
            assert f"node {node} serves {resource} from a device plugin without HAMi's registration" in slice_words, slice_words
            assert "whole cards only" in slice_words and "needs HAMi's registration" in slice_words, slice_words
            for n in whole:
                if got[n][0]:
                    annotations = (await cluster.pod("default", n) or {})["metadata"].get("annotations") or {}
                    assert not [k for k in annotations if k.startswith("hami.io/") or k.startswith("huawei.com/")], annotations
            node_annotations = (await cluster.kube.get(nodes_path(node)))["metadata"].get("annotations") or {}
            assert hami.NODE_LOCK not in node_annotations, node_annotations
            assert kubelet.violations == []

            await cluster.kube.delete(pods_path("default", next(n for n in whole if got[n][0])))

            async def third_runs() -> bool:
                return (await _state(cluster, [third]))[third][:2] == (node, "Running")

            await wait_until(third_runs, 90, "the third whole-card pod Running once a card is free")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_another_schedulers_pod_holding_a_card_leaves_the_rest(cluster: Cluster, tmp_path: Path) -> None:
    """default-scheduler's pod runs on gpu-1 with nvidia.com/gpu: 1 of 2: one of Tessera's two
    whole-card pods runs, the other waits saying who holds the card, and runs once it is gone."""
    await cluster.create_node("gpu-1", allocatable={"nvidia.com/gpu": "2"})
    await cluster.create_pod(card_pod("theirs", {"nvidia.com/gpu": "1"}, scheduler="default-scheduler", node="gpu-1"))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            mine = ["mine-0", "mine-1"]
            for n in mine:
                await cluster.create_pod(card_pod(n, {"nvidia.com/gpu": "1"}))

            await _one_runs_the_other_says(cluster, mine, "in use (2 of 2; 1 by other schedulers' pods)")

            await cluster.kube.delete(pods_path("default", "theirs"))

            async def both_run() -> bool:
                return all(at == "gpu-1" for at, _, _ in (await _state(cluster, mine)).values())

            await wait_until(both_run, 90, "the second pod on gpu-1 once their pod is gone")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_pod_of_tesseras_running_there_before_it_started_is_booked_on_a_card(cluster: Cluster, tmp_path: Path) -> None:
    """A `schedulerName: volcano` pod found Running on gpu-1 (2 served) when Tessera starts is
    booked on one of its cards (no HAMi annotation to read it from: fitted from its request), so
    one new whole-card pod runs and the next waits."""
    await cluster.create_node("gpu-1", allocatable={"nvidia.com/gpu": "2"})
    await cluster.create_pod(card_pod("before", {"nvidia.com/gpu": "1"}, node="gpu-1"))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            new = ["new-0", "new-1"]
            for n in new:
                await cluster.create_pod(card_pod(n, {"nvidia.com/gpu": "1"}))

            await _one_runs_the_other_says(
                cluster, new, "every nvidia.com/gpu card the node's device plugin serves is in use (2 of 2)"
            )
            assert (await _state(cluster, ["before"]))["before"][:2] == ("gpu-1", "Running")
        finally:
            await asyncio.to_thread(cp.stop)


def test_a_binding_carries_hamis_annotations_only_for_the_cards_hami_registers() -> None:
    """A node whose Ascend cards HAMi registers and whose GPUs only NVIDIA's plugin serves: a pod
    taking one of each gets HAMi's Ascend annotations (and so the lock), none for the GPU; a pod
    taking the GPU alone gets none at all."""
    gpu = reg.plugin_cards("mixed", {"nvidia.com/gpu": 1}, {}, {"huawei"}, default_catalogue())[0]
    npu = CardSpec(uuid="npu-0", node="mixed", index=0, type="Ascend910B3", vendor="huawei", memory=65536,
                   cores=20, split_count=4, mode="template")  # fmt: skip
    cards = {c.uuid: c for c in (gpu, npu)}
    whole = SliceSpec(kind="whole", memory=0, cores=100, exclusive=True)
    both = TaskPlacement(task="t", node="mixed", slices=(
        SliceAssignment(card=gpu.uuid, node="mixed", slice=whole),
        SliceAssignment(card="npu-0", node="mixed", slice=SliceSpec(kind="whole", memory=65536, cores=20, exclusive=True))))  # fmt: skip
    spec = TaskSpec(name="t", devices=(DeviceRequest(vendor="nvidia", type="NVIDIA", count=1, exclusive=True, resource="nvidia.com/gpu"),
                                       DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, exclusive=True,
                                                     resource="huawei.com/Ascend910B3")))  # fmt: skip
    annotations = pods.binding_annotations(both, spec, cards, 0.0)
    assert pods.hami_slices(both, cards)
    assert hami.NVIDIA_TO_ALLOCATE not in annotations and hami.ascend_to_allocate_key("Ascend910B3") in annotations
    assert gpu.uuid not in "".join(annotations.values()) and "npu-0" in annotations[hami.ascend_to_allocate_key("Ascend910B3")]
    alone = TaskPlacement(task="t", node="mixed", slices=both.slices[:1])
    assert not pods.hami_slices(alone, cards) and pods.binding_annotations(alone, spec, cards, 0.0) == {}
