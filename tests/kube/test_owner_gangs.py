"""A workload controller's pods as one gang (Volcano's PodGroup controller): a StatefulSet whose
`scheduling.volcano.sh/group-min-member` is 3 — a multi-node inference service — has its pods
named in the PodGroup `podgroup-<uid>` made for it, so none is placed before all three fit;
they were placed one by one before (two ran, the third waited, holding their cards). An owner
without the annotation keeps its pods jobs of their own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path, replicasets_path, statefulsets_path
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until

LABELS = {"app": "infer"}


def owner(kind: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    template = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    spec: dict[str, Any] = {"selector": {"matchLabels": LABELS}, "template": template, "replicas": 3}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default", "annotations": annotations}, "spec": spec}  # fmt: skip


def pod_of(made: dict[str, Any], name: str) -> dict[str, Any]:
    ref = {"apiVersion": "apps/v1", "kind": made["kind"], "name": made["metadata"]["name"],
           "uid": made["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": LABELS, "ownerReferences": [ref]},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]}}  # fmt: skip


async def test_a_statefulsets_pods_are_one_gang_and_a_plain_replicasets_are_not(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1", cpu="4")  # room for two of the three
    sts = await cluster.kube.create(statefulsets_path("default"),
                                    owner("StatefulSet", "infer", {"scheduling.volcano.sh/group-min-member": "3"}))
    rs = await cluster.kube.create(replicasets_path("default"), owner("ReplicaSet", "web", {}))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    names = [f"infer-{i}" for i in range(3)]
    group = f"podgroup-{sts['metadata']['uid']}"
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(pod_of(rs, "web-a"))  # no annotation on its owner: a job of its own

            async def web_runs() -> bool:
                return kpods.phase(await cluster.pod("default", "web-a") or {}) == "Running"

            await wait_until(web_runs, 60, "the ReplicaSet's pod Running on its own")
            web = await cluster.pod("default", "web-a") or {}
            assert "scheduling.k8s.io/group-name" not in (web["metadata"].get("annotations") or {})
            await cluster.kube.delete(pods_path("default", "web-a"))  # room again: n1 has 4 cpus
            await wait_until(lambda: _gone(cluster, "web-a"), 60, "web-a gone")
            for name in names:
                await cluster.create_pod(pod_of(sts, name))

            async def held_as_a_gang() -> bool:
                pg = await cluster.present(volcano.podgroups_path("default", group)) or {}
                conditions = [c.get("type") for c in (pg.get("status") or {}).get("conditions") or []]
                if "Unschedulable" not in conditions:
                    return False
                # (a session may judge the group before admission annotated its last pods)
                got = [await cluster.pod("default", name) or {} for name in names]
                return all(((p.get("metadata") or {}).get("annotations") or {}).get("scheduling.k8s.io/group-name")
                           for p in got)  # fmt: skip

            await wait_until(held_as_a_gang, 60, f"{group} made and found unschedulable as one gang")
            pg = await cluster.present(volcano.podgroups_path("default", group)) or {}
            assert pg["spec"]["minMember"] == 3
            assert [(r["kind"], r["uid"]) for r in pg["metadata"]["ownerReferences"]] == [("StatefulSet", sts["metadata"]["uid"])]
            for name in names:
                got = await cluster.pod("default", name) or {}
                assert got["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
                assert not kpods.node_name(got), f"{name} bound before its gang could be"
            await cluster.create_node("n2", cpu="4")

            async def all_run() -> bool:
                got = [await cluster.pod("default", n) or {} for n in names]
                return all(kpods.phase(p) == "Running" for p in got)

            await wait_until(all_run, 60, "the three pods Running together once a second node came")
        finally:
            await asyncio.to_thread(cp.stop)


async def _gone(cluster: Cluster, name: str) -> bool:
    return await cluster.pod("default", name) is None
