"""Issue 22, volumes on a cluster: the services on the API server bind pods as kube-scheduler's
VolumeBinding would. A pod whose claim does not exist waits with kube-scheduler's words and is
bound once the claim appears; a claim bound to a local volume keeps its pod on that volume's
node; a WaitForFirstConsumer claim is given the node Tessera chose (`selected-node`), and the
pod is bound — to that node — only after the provisioner (played here by the test, as the PV
controller and an external provisioner would) has bound the claim."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube.client import STORAGE_CLASSES, KubeError, claims_path, volumes_path
from services.kube.listwatch import Reflector
from services.kube.status import scheduled_condition
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until

SELECTED = "volume.kubernetes.io/selected-node"


def pod(name: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "schedulerName": "volcano", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}  # fmt: skip


def on_node(node: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}  # fmt: skip


async def volume(cluster: Cluster, name: str, node: str = "", claim: str = "") -> None:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                            "hostPath": {"path": f"/mnt/{name}"}}  # fmt: skip
    if node:
        spec["nodeAffinity"] = on_node(node)
    if claim:
        spec["claimRef"] = {"namespace": cluster.namespace, "name": claim}
    await cluster.kube.create(volumes_path(), {"apiVersion": "v1", "kind": "PersistentVolume",
                                               "metadata": {"name": name}, "spec": spec})  # fmt: skip


async def claim(
    cluster: Cluster, name: str, *, volume_name: str = "", storage_class: str | None = None
) -> None:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    ns = cluster.namespace
    await cluster.kube.create(claims_path(ns), {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                "metadata": {"name": name}, "spec": spec})  # fmt: skip
    if volume_name:
        await bound(cluster, name)


async def bound(cluster: Cluster, name: str) -> None:
    """The PV controller's part: the claim's phase, through its status subresource."""
    await cluster.kube.patch(
        claims_path(cluster.namespace, name, "status"), {"status": {"phase": "Bound"}}
    )


async def pods(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in await cluster.pods()}


async def test_a_missing_claim_waits_until_it_appears_and_a_local_volume_keeps_its_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.create_node("n1")  # the roomier node: where the pods would go without volumes
    await cluster.create_node("n2", cpu="8", memory="32Gi")
    await volume(cluster, "local-n2", node="n2", claim="local")
    await claim(cluster, "local", volume_name="local-n2")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(pod("waits", "later"))
            await cluster.create_pod(pod("local", "local"))

            async def local_bound_and_waits_said_why() -> bool:
                ps = await pods(cluster)
                cond = scheduled_condition(ps.get("waits", {})) or {}
                return bool(kpods.node_name(ps.get("local", {}))) and cond.get("status") == "False" \
                    and 'persistentvolumeclaim "later" not found' in str(cond.get("message"))  # fmt: skip

            await wait_until(
                local_bound_and_waits_said_why, 90, "local bound, waits PodScheduled=False"
            )
            ps = await pods(cluster)
            assert kpods.node_name(ps["local"]) == "n2", "a pod bound away from its local volume"
            assert not kpods.node_name(ps["waits"]), "bound without its claim"

            await volume(cluster, "any", claim="later")  # the claim appears, bound
            await claim(cluster, "later", volume_name="any")

            async def waits_bound() -> bool:
                return bool(kpods.node_name((await pods(cluster)).get("waits", {})))

            await wait_until(waits_bound, 90, "the pod bound once its claim exists")
        finally:
            await asyncio.to_thread(cp.stop)
    if cluster.kind == "kmock":
        assert [b["target"]["name"] for b in cluster.bindings if b["pod"] == "local"] == ["n2"]


async def test_a_wait_for_first_consumer_claim_gets_the_chosen_node_and_the_pod_binds_after_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    await cluster.create_node("n1", cpu="8", memory="32Gi")
    await cluster.create_node("n2")
    await cluster.kube.create(STORAGE_CLASSES, {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "topo"},
        "provisioner": "example.com/topo", "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    await claim(cluster, "data", storage_class="topo")
    provisioned: list[tuple[str, int]] = []  # (node, bindings of the pod asked by then)

    async def provisioner() -> None:
        """Seeing the selected node: a volume there, the claim bound to it (spec, then status)."""
        async for ch in Reflector(cluster.kube, claims_path(cluster.namespace)).changes():
            meta, spec = ch.obj.get("metadata") or {}, ch.obj.get("spec") or {}
            node = (meta.get("annotations") or {}).get(SELECTED)
            if (
                ch.kind != "upsert"
                or meta.get("name") != "data"
                or not node
                or spec.get("volumeName")
            ):
                continue
            provisioned.append((node, sum(1 for b in cluster.bindings if b["pod"] == "app")))
            await volume(cluster, "pv-data", node=node, claim="data")
            try:
                await cluster.kube.patch(
                    claims_path(cluster.namespace, "data"), {"spec": {"volumeName": "pv-data"}}
                )
            except KubeError as exc:  # the spec of a real claim is immutable but for volumeName
                raise AssertionError(exc.body) from exc
            await bound(cluster, "data")

    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    making = asyncio.create_task(provisioner())
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(pod("app", "data"))

            async def running() -> bool:
                return kpods.phase((await pods(cluster)).get("app", {})) == "Running"

            await wait_until(running, 90, "the pod bound and Running once its claim is bound")
        finally:
            await asyncio.to_thread(cp.stop)
            await cancel_all([making])
    ps = await pods(cluster)
    pvc = await cluster.kube.get(claims_path(cluster.namespace, "data"))
    node = pvc["metadata"]["annotations"][SELECTED]
    assert node == "n2", "Tessera's choice: the roomier node, as for a pod without volumes"
    assert kpods.node_name(ps["app"]) == node, (
        "the pod bound elsewhere than its claim's selected node"
    )
    assert [n for n, _ in provisioned] == [node]
    if cluster.kind == "kmock":  # nothing bound before the claim was
        assert provisioned[0][1] == 0, "a binding asked before the claim was bound"
        assert [b["target"]["name"] for b in cluster.bindings if b["pod"] == "app"] == [node]


async def test_a_zone_labelled_volume_keeps_its_pods_in_its_zone(cluster: Cluster, tmp_path: Path) -> None:
    """rev-shared finding 5, kube-scheduler's VolumeZone: the PersistentVolume says its zone by
    its labels only (no nodeAffinity, as in-tree and many static volumes do). Its pods go to zA
    in that zone, not to the roomier zB, where the volume cannot attach."""
    zone, region = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
    await cluster.create_node("zA", cpu="8", memory="32Gi", labels={zone: "z1", region: "r1"})
    await cluster.create_node("zB", labels={zone: "z2", region: "r1"})
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "nfs": {"server": "nfs", "path": "/z1"},
            "claimRef": {"namespace": cluster.namespace, "name": "data"}}  # fmt: skip
    await cluster.kube.create(volumes_path(), {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {
        "name": "pv-z1", "labels": {zone: "z1", region: "r1"}}, "spec": spec})  # fmt: skip
    await claim(cluster, "data", volume_name="pv-z1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            for i in range(3):
                await cluster.create_pod(pod(f"zoned-{i}", "data"))

            async def all_bound() -> bool:
                ps = await pods(cluster)
                return all(kpods.node_name(ps.get(f"zoned-{i}", {})) for i in range(3))

            await wait_until(all_bound, 90, "the three pods bound")
            ps = await pods(cluster)
            assert {kpods.node_name(ps[f"zoned-{i}"]) for i in range(3)} == {"zA"}
        finally:
            await asyncio.to_thread(cp.stop)
