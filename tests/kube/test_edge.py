"""Tessera schedules a Kubernetes cluster: the five service processes on a real NATS, with
`--kubeconfig`, against an API server (kmock's emulator, or a real one). Nodes carry HAMi's
register annotations (template and hami-core 910B3 nodes, NVIDIA in the legacy CSV form, one
cordoned node); the article's pods are created as Pods with `schedulerName: volcano`.
"""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path

from contracts import hami
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import article_pods, as_pod, gpu_pod, hami_nodes, running_pod
from tests.processes import wait_until

PRE_A_CARD = "node-a-npu-0"


async def _phases(cluster: Cluster) -> dict[str, str]:
    return {p["metadata"]["name"]: kpods.phase(p) for p in await cluster.pods()}


async def _start(cp: ControlPlane) -> None:
    await asyncio.to_thread(cp.start, lambda _line: None)


async def test_pods_and_nodes_in_bindings_with_hami_annotations_out(cluster: Cluster, tmp_path: Path) -> None:
    await hami_nodes(cluster)
    whole = {hami.ascend_allocated_key("Ascend910B3"): f"{PRE_A_CARD},Ascend910B3,65536,20:;"}
    await cluster.create_pod(running_pod("pre-a", "node-a", whole))  # placed by HAMi before us
    await cluster.create_pod(running_pod("pre-b", "node-b", memory=32768))  # no annotations
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await _start(cp)
        try:
            wanted = [*article_pods(), gpu_pod("gpu-0")]
            for pod in wanted:
                await cluster.create_pod(pod)
            names = {p["metadata"]["name"] for p in wanted} - {"bad-typo"}

            async def all_running() -> bool:
                ph = await _phases(cluster)
                return all(ph.get(n) == "Running" for n in names)

            await wait_until(all_running, 90, "every valid pod Running")

            async def refused() -> bool:
                pod = await cluster.pod("default", "bad-typo")
                cond = kpods_condition(pod)
                if not (cond and cond["status"] == "False"):
                    return False
                # (its Warning is written after the condition, by a request of its own)
                return any(e["involvedObject"]["name"] == "bad-typo" for e in await cluster.events())

            await wait_until(refused, 30, "bad-typo refused on the API, its condition and its Event")

            async def announced() -> dict[str, dict]:  # written after each binding, apart from it
                said = {e["involvedObject"]["name"]: e for e in await cluster.events() if e["reason"] == "Scheduled"}
                return said if set(said) >= names else {}

            await wait_until(announced, 30, "a Scheduled Event for every bound pod")
            scheduled = await announced()
        finally:
            await asyncio.to_thread(cp.stop)
    objs = {p["metadata"]["name"]: p for p in await cluster.pods()}
    # each bound once, by one binding request, with HAMi's annotations for its cards
    if cluster.kind == "kmock":
        per_pod = collections.Counter(b["pod"] for b in cluster.bindings)
        assert {n: c for n, c in per_pod.items() if c != 1} == {}
        assert set(per_pod) == names
        # each service names itself to the API server (its audit log and request logs)
        agents = {agent for agent, _verb, _what in cluster.requests if agent.startswith("tessera")}
        assert {f"tessera-{s}" for s in ("admission", "allocator", "queue", "nodeagent")} <= agents, agents
        binders = {agent for agent, verb, what in cluster.requests if what == "pods/binding"}
        assert binders == {"tessera-allocator"}, binders
    for name in names:
        ann = objs[name]["metadata"].get("annotations") or {}
        node = kpods.node_name(objs[name])
        if name == "router":  # asks no card: bound as kube-scheduler binds, no HAMi annotations
            assert node and not [k for k in ann if k.startswith("hami.io/")], (node, ann)
            continue
        assert ann[hami.VGPU_NODE] == node and ann[hami.BIND_PHASE] == "success", name
        assert node != "node-c", "a cordoned node got a pod"
        allocated = hami.allocated_devices(ann)
        assert allocated and all(d.uuid.startswith(node) or d.uuid.startswith(f"GPU-{node}")
                                 for d in allocated), (name, allocated)  # fmt: skip
        if node.startswith("node-"):
            info = json.loads(ann["huawei.com/Ascend910B3"])
            assert [i["UUID"] for i in info] == [d.uuid for d in allocated]
        assert PRE_A_CARD not in {d.uuid for d in allocated}, f"{name} got the card pre-a holds"
    assert kubelet.violations == []
    # `kubectl describe pod` says who placed it where, as for kube-scheduler's pods
    assert set(scheduled) == names, set(scheduled) ^ names  # not pre-a: Tessera did not bind it
    for name, ev in scheduled.items():
        assert ev["type"] == "Normal", ev
        assert ev["message"] == f"Successfully assigned default/{name} to {kpods.node_name(objs[name])}", ev
        assert ev["involvedObject"].get("uid") == objs[name]["metadata"]["uid"], ev
    # the running pods were booked, not bound again
    assert "pre-a" not in {b["pod"] for b in cluster.bindings}
    # the invalid pod: a Warning Event and the condition, naming the field and the rule
    cond = kpods_condition(objs["bad-typo"])
    assert cond is not None and "Ascend910B3-memroy: unknown device resource" in cond["message"]
    events = [e for e in await cluster.events() if e["involvedObject"]["name"] == "bad-typo"]
    assert [e["type"] for e in events] == ["Warning"] and "huawei.com/Ascend910B3-memory" in events[0]["message"]
    assert not kpods.node_name(objs["bad-typo"])


def kpods_condition(pod: dict | None) -> dict | None:
    from services.kube.status import scheduled_condition

    return scheduled_condition(pod) if pod else None


def small_pod(i: int) -> dict:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"w-{i}"}, "spec": {
        "containers": [{"name": "c", "resources": {"limits": {
            "huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"}}}]}})  # fmt: skip


async def test_kill_any_service_mid_wave_binds_nothing_twice(cluster: Cluster, tmp_path: Path) -> None:
    """70 pods of 16 GB on 2 × 8 910B3 (64 such slices): one service after another is killed
    with SIGKILL while pods are being bound, and restarted. Afterwards every pod is bound at
    most once, no card holds more than it has, and the 6 that cannot fit say why."""
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    total, fits = 70, 64
    async with Kubelet(cluster):
        await _start(cp)
        try:
            for i in range(total):
                await cluster.create_pod(small_pod(i))
            for victim in ("allocator", "admission", "nodeagent", "queue", "scheduler", "allocator"):
                cp.kill(victim)  # SIGKILL, wherever it is
                await asyncio.to_thread(cp.restart, victim)

            async def settled() -> bool:
                objs = await cluster.pods()
                running = [p for p in objs if kpods.phase(p) == "Running"]
                waiting = [p for p in objs if not kpods.node_name(p)]
                reasons = [kpods_condition(p) for p in waiting]
                return len(running) == fits and len(waiting) == total - fits and all(
                    r and r["status"] == "False" and "nodes are available" in r["message"] for r in reasons)

            try:
                await wait_until(settled, 120, "64 running, 6 waiting with a reason")
            except TimeoutError:
                objs = await cluster.pods()
                seen = collections.Counter((kpods.phase(p), bool(kpods.node_name(p)),
                                            bool(kpods_condition(p))) for p in objs)  # fmt: skip
                raise AssertionError(f"not settled: (phase, bound, condition) counts {seen}") from None
        finally:
            await asyncio.to_thread(cp.stop)
    objs = await cluster.pods()
    if cluster.kind == "kmock":
        assert {k: v for k, v in cluster.bound.items() if len(v) != 1} == {}
    per_card: dict[str, list[int]] = collections.defaultdict(list)
    for p in objs:
        for d in hami.allocated_devices(p["metadata"].get("annotations") or {}):
            per_card[d.uuid].append(d.memory)
    assert per_card and all(sum(m) <= 65536 and len(m) <= 4 for m in per_card.values()), per_card
    waiting = [kpods_condition(p)["message"] for p in objs if not kpods.node_name(p)]
    assert all("have no Ascend910B3 card with 16384 MB free" in m or "free slice" in m
               or "cordoned" in m for m in waiting), waiting  # fmt: skip
