"""The binder's part of VolumeBinding (issue 22), on the emulator with an in-memory log: a pod
whose claim was selected for another node is never bound (BindingFailed names the claim and the
node), and one whose claim stays unbound past the timeout is given back (BindingFailed) after the
claim was given the chosen node — bound nowhere in either case."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts.events import BindingFailed, JobSubmitted, PlacementCommitted, TaskPlacement
from contracts.registry import default_registry
from contracts.subjects import subject_of
from contracts.workloads import JobSpec, TaskSpec
from services.kube.binder import Binder
from services.kube.client import Kube, Limits, claims_path
from services.kube.storagesource import StorageSource
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Entry
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster
from tests.processes import wait_until

SELECTED = "volume.kubernetes.io/selected-node"


def append(log: MemoryLog, *events: Any) -> None:
    reg = default_registry()
    for e in events:
        log.append_now(
            Entry(subject_of(log.subjects, e), reg.encode(e), reg.envelope(e).to_headers())
        )


async def failures(log: MemoryLog) -> list[BindingFailed]:
    reg = default_registry()
    out = []
    async for msg in log.replay(1, log.subjects.all_jobs()):
        event = reg.decode(msg.headers["Tessera-Type"], msg.data)
        if isinstance(event, BindingFailed):
            out.append(event)
    return out


async def placed(
    cluster: Cluster, annotations: dict[str, str], timeout: float = 600.0
) -> tuple[MemoryLog, list[BindingFailed]]:
    """A claim `data` (unbound, WaitForFirstConsumer) with `annotations`; pod `app` committed to
    n1; the binder run until it gave the pod back."""
    ns = cluster.namespace
    await cluster.create_node("n1")
    await cluster.kube.create(claims_path(ns), {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                "metadata": {"name": "data", "annotations": annotations},
                                                "spec": {"storageClassName": "topo"}})  # fmt: skip
    await cluster.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"}, "spec": {
        "schedulerName": "volcano", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        "containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip
    log = MemoryLog()
    spec = JobSpec(
        namespace=ns,
        name="app",
        tasks=(TaskSpec(name="app", pod_names=("app",), claims=("data",)),),
    )
    append(
        log,
        JobSubmitted(spec=spec),
        PlacementCommitted(
            namespace=ns, name="app", placements=(TaskPlacement(task="app", node="n1"),)
        ),
    )
    binder = Binder(log, cluster.kube, node_lock=False, storage=StorageSource(log, cluster.kube),
                    claim_timeout=timeout)  # fmt: skip
    await binder.recover()
    stopping = asyncio.Event()
    running = asyncio.create_task(binder.run(stopping))
    try:

        async def given_back() -> bool:
            return bool(await failures(log))

        await wait_until(given_back, 30, "the pod given back (BindingFailed)")
    finally:
        stopping.set()
        await cancel_all([running])
    return log, await failures(log)


async def test_a_claim_selected_for_another_node_keeps_the_pod_from_being_bound(
    cluster: Cluster,
) -> None:
    _log, failed = await placed(cluster, {SELECTED: "n2"})
    assert [(f.task, f.node) for f in failed] == [("app", "n1")]
    assert "PersistentVolumeClaim default/data is selected for node n2, not n1" in failed[0].reason
    pvc = await cluster.kube.get(claims_path(cluster.namespace, "data"))
    assert pvc["metadata"]["annotations"][SELECTED] == "n2", "the claim's selected node was changed"
    if cluster.kind == "kmock":
        assert not cluster.bindings, "bound away from the claim's selected node"


async def test_a_claim_not_bound_in_time_gives_the_pod_back_after_selecting_the_node(
    cluster: Cluster,
) -> None:
    _log, failed = await placed(cluster, {}, timeout=0.5)
    assert [(f.task, f.node) for f in failed] == [("app", "n1")]
    assert "not bound within 0.5s" in failed[0].reason, failed[0].reason
    pvc = await cluster.kube.get(claims_path(cluster.namespace, "data"))
    assert (
        pvc["metadata"]["annotations"][SELECTED] == "n1"
    )  # for the provisioner, as kube-scheduler writes it
    if cluster.kind == "kmock":
        assert not cluster.bindings, "bound before its claim was"


async def test_a_claim_bound_while_the_selected_node_patch_is_out_wakes_the_pod(
    cluster: Cluster,
) -> None:
    """The binder gives an unbound claim the chosen node by a patch at the version it read; the
    PV controller may bind the claim while that patch is on the wire (it then meets 409). The
    watch's word of the binding came while the binder had not yet noted the pod as waiting on
    the claim, so nothing woke it: the pod waited out the claim timeout (600 s) on a claim bound
    long before (a Volcano Job's `volumeClaim` pods not Running within a minute, once in a CI
    run). Here the binder's patch is held until the binding has reached the binder's watch."""
    if cluster.kind != "kmock":
        pytest.skip("holds one client's request: the emulator's doing")
    agent = "tessera-test-binder"
    ns = cluster.namespace
    await cluster.create_node("n1")
    path = claims_path(ns, "data")
    await cluster.kube.create(claims_path(ns), {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                "metadata": {"name": "data"}, "spec": {}})  # fmt: skip
    await cluster.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"}, "spec": {
        "schedulerName": "volcano", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        "containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip
    log = MemoryLog()
    spec = JobSpec(namespace=ns, name="app", tasks=(TaskSpec(name="app", pod_names=("app",), claims=("data",)),))
    append(log, JobSubmitted(spec=spec),
           PlacementCommitted(namespace=ns, name="app", placements=(TaskPlacement(task="app", node="n1"),)))  # fmt: skip
    held = cluster.held_requests[(agent, "update", "persistentvolumeclaims")] = asyncio.Event()
    kube = await Kube.connect(str(cluster.kubeconfig), Limits(qps=0), agent=agent)
    storage = StorageSource(log, kube)
    binder = Binder(log, kube, node_lock=False, storage=storage)
    told = asyncio.Event()
    wake = storage.on_claim

    def changed(namespace: str, name: str) -> None:
        wake(namespace, name)
        if (storage.claim(namespace, name) or {}).get("status", {}).get("phase") == "Bound":
            told.set()

    storage.on_claim = changed
    await binder.recover()
    stopping = asyncio.Event()
    running = asyncio.create_task(binder.run(stopping))
    try:

        async def patch_out() -> bool:
            return cluster.requests[(agent, "update", "persistentvolumeclaims")] > 0

        await wait_until(patch_out, 30, "the binder's selected-node patch sent")
        await cluster.kube.patch(path, {"spec": {"volumeName": "pv-data"}})
        await cluster.kube.patch(claims_path(ns, "data", "status"), {"status": {"phase": "Bound"}})
        await asyncio.wait_for(told.wait(), 30)  # the binding has reached the binder's watch
        held.set()

        async def bound() -> bool:
            return bool((await cluster.pod(ns, "app") or {}).get("spec", {}).get("nodeName"))

        await wait_until(bound, 30, "the pod bound on its bound claim")
        assert not await failures(log)
        assert (await cluster.pod(ns, "app") or {})["spec"]["nodeName"] == "n1"
    finally:
        held.set()
        stopping.set()
        await cancel_all([running])
        await kube.close()
