"""Issue 22, schedulingGates: a gated pod waits as kube-scheduler leaves it (PodScheduled=False,
reason `SchedulingGated`), no binding is ever tried for it (the API server would refuse it),
a gated member keeps its PodGroup's gang incomplete, and removing the gates (a merge patch of
`spec.schedulingGates`, the only change the API server allows to them) lets each be bound."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from services.kube.status import scheduled_condition
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_cli_verbs import tessera
from tests.kube.test_volcano import volcano_served
from tests.kube.workload import hami_nodes
from tests.processes import wait_until

GATES = [{"name": "example.com/quota"}, {"name": "example.com/data"}]


def card_pod(name: str, *, gated: bool = False, group: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [
        {"name": "c", "image": "busybox", "resources": {"limits": {"huawei.com/Ascend910B3": "1"}}}]}  # fmt: skip
    if gated:
        spec["schedulingGates"] = GATES
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def test_a_gated_pod_waits_as_scheduling_gated_and_is_bound_once_ungated(
    cluster: Cluster, tmp_path: Path
) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pair", "namespace": "default"}, "spec": {"minMember": 2, "queue": "default"}}  # fmt: skip
    gated_names = ("gated", "pair-1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.podgroups_path("default"), pg)
            await cluster.create_pod(card_pod("pair-0", group="pair"))
            await cluster.create_pod(card_pod("pair-1", gated=True, group="pair"))
            await cluster.create_pod(card_pod("gated", gated=True))
            await cluster.create_pod(card_pod("free"))  # the same path, no gates: bound

            async def pods() -> dict[str, dict[str, Any]]:
                return {p["metadata"]["name"]: p for p in await cluster.pods()}

            async def held_and_free_bound() -> bool:
                ps = await pods()
                conds = [scheduled_condition(ps.get(n, {})) or {} for n in gated_names]
                return bool(kpods.node_name(ps.get("free", {}))) and all(
                    c.get("status") == "False" and c.get("reason") == "SchedulingGated" for c in conds)

            await wait_until(held_and_free_bound, 90, "free bound, the gated pods SchedulingGated")
            ps = await pods()
            for name in gated_names:
                cond = scheduled_condition(ps[name]) or {}
                assert cond.get("message") == "Scheduling is blocked due to non-empty scheduling gates"
                assert not kpods.node_name(ps[name]), f"{name} bound while gated"
            assert not kpods.node_name(ps["pair-0"]), "a gang of 2 bound with its second member gated"
            if cluster.kind == "kmock":  # never even tried: the API server would refuse it (409)
                assert {b["pod"] for b in cluster.bindings} == {"free"}
            got = await tessera(cluster, "get", "po", "gated", "-o", "records")  # kubectl's STATUS
            assert got.code == 0, got.err
            (row,) = json.loads(got.out)
            assert row["phase"] == "SchedulingGated" and "non-empty scheduling gates" in row["reason"], row

            for name in gated_names:  # whoever owns the gates removes them
                await cluster.kube.patch(pods_path("default", name), {"spec": {"schedulingGates": None}})

            async def all_running() -> bool:
                ps = await pods()
                return all(kpods.phase(ps.get(n, {})) == "Running" for n in ("gated", "pair-0", "pair-1", "free"))

            await wait_until(all_running, 90, "the ungated pod and the whole gang Running")
        finally:
            await asyncio.to_thread(cp.stop)
    ps = await pods()
    assert kpods.node_name(ps["pair-0"]) and kpods.node_name(ps["pair-1"])
    if cluster.kind == "kmock":  # each bound once, none refused
        names = [b["pod"] for b in cluster.bindings]
        assert sorted(names) == ["free", "gated", "pair-0", "pair-1"], names
