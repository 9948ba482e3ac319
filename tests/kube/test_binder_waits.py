"""The binder and a Volcano Job's pods, which the job controller makes after the commit (under
a client's QPS budget, seconds after): the binding is asked for once the binder's watch shows
the pod — not tried (a node lock, a refused binding, the lock's release) while it is not made —
and a pod bound before the binder started is found bound by one read, not bound again. On the
emulator with an in-memory log; the binder's requests are counted by its User-Agent."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contracts import hami
from contracts.devices import CardSpec, SliceSpec
from contracts.events import (
    JobSubmitted,
    NodeRegistered,
    PlacementCommitted,
    SliceAssignment,
    TaskPlacement,
)
from contracts.workloads import DeviceRequest, JobSpec, TaskSpec
from services.kube import binder as binder_module
from services.kube import pods, volcano
from services.kube.binder import Binder
from services.kube.client import Kube, nodes_path, pods_path
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster
from tests.kube.test_claim_binding import append
from tests.processes import wait_until

AGENT = "binder-under-test"
POD = "train-worker-0"
CARD = CardSpec(uuid="n1-card-0", node="n1", index=0, type="Ascend910B3", vendor="huawei", memory=65536, cores=20)
ASK = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory=16384)


def job_events(ns: str) -> tuple[Any, ...]:
    spec = JobSpec(namespace=ns, name="train", kind="Job", queue="default",
                   tasks=(TaskSpec(name="worker", pod_names=(POD,), devices=(ASK,)),))  # fmt: skip
    return (NodeRegistered(node="n1", cpu_milli=192_000, memory_mib=1_572_864, cards=(CARD,)), JobSubmitted(spec=spec))


def commit(ns: str) -> PlacementCommitted:
    grant = SliceAssignment(card=CARD.uuid, node="n1", slice=SliceSpec(kind="soft", memory=16384, cores=25))
    return PlacementCommitted(namespace=ns, name="train", placements=(TaskPlacement(task=POD, node="n1", slices=(grant,)),))


def job_pod() -> dict[str, Any]:
    """The pod as the job controller makes it (its labels name the Job)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "labels": {volcano.JOB_NAME: "train"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip


def asked(cluster: Cluster) -> dict[str, int]:
    """The binder's writes so far: bindings, and node writes (HAMi's lock taken and released)."""
    out = {"bindings": 0, "node writes": 0, "pod reads": 0}
    for (agent, verb, what), n in cluster.requests.items():
        if agent != AGENT:
            continue
        if what == "pods/binding":
            out["bindings"] += n
        elif what == "nodes" and verb not in ("list", "watch", "get", "fetch"):
            out["node writes"] += n
        elif what == "pods" and verb in ("get", "fetch"):
            out["pod reads"] += n
    return out


@contextlib.asynccontextmanager
async def running(cluster: Cluster, log: MemoryLog, node_lock: bool = True) -> AsyncIterator[Binder]:
    kube = await Kube.connect(str(cluster.kubeconfig), agent=AGENT)
    binder = Binder(log, kube, node_lock=node_lock)
    await binder.recover()
    stopping = asyncio.Event()
    task = asyncio.create_task(binder.run(stopping))
    try:
        yield binder
    finally:
        stopping.set()
        await cancel_all([task])
        await kube.close()


async def bound_to(cluster: Cluster, node: str, binder: Binder | None = None) -> None:
    """The pod bound there — and, given the binder, its answer read by it (the pod can be read
    bound before the binder has read the server's answer to its binding)."""

    async def there() -> bool:
        if binder is not None and binder.stats.bound < 1:
            return False
        return pods.node_name(await cluster.pod(cluster.namespace, POD) or {}) == node

    await wait_until(there, 30, f"{POD} bound to {node}")


async def test_a_job_pod_made_after_its_commit_is_bound_once_made_and_not_tried_before(cluster: Cluster) -> None:
    ns = cluster.namespace
    await cluster.create_node("n1")
    log = MemoryLog()
    append(log, *job_events(ns))
    async with running(cluster, log) as binder:
        await binder.unbound_listed.wait()
        append(log, commit(ns))  # committed after the start: nothing was bound before

        async def waiting() -> bool:
            return binder.stats.pod_waits >= 1

        await wait_until(waiting, 30, "the binding waiting for its pod")
        if cluster.kind == "kmock":
            assert asked(cluster) == {"bindings": 0, "node writes": 0, "pod reads": 0}
        await cluster.create_pod(job_pod())
        await bound_to(cluster, "n1", binder)
        pod = await cluster.pod(ns, POD) or {}
        assert pod["metadata"]["annotations"][volcano.PLACEMENT] == str(await log.last_sequence())
        if cluster.kind == "kmock":  # one binding, the lock taken once (the plugin releases it)
            assert asked(cluster) == {"bindings": 1, "node writes": 1, "pod reads": 0}, cluster.requests
        assert binder.stats.bound == 1 and binder.stats.failed == 0


async def test_a_job_pod_bound_before_the_binder_started_is_read_once_and_not_bound_again(cluster: Cluster) -> None:
    ns = cluster.namespace
    await cluster.create_node("n1")
    log = MemoryLog()
    append(log, *job_events(ns), commit(ns))
    seq = await log.last_sequence()
    made = await cluster.create_pod(job_pod())  # bound by the binder's previous process
    await cluster.kube.create(pods_path(ns, POD, "binding"),
                              pods.binding(ns, POD, volcano.uid(made), "n1", {volcano.PLACEMENT: str(seq)}))  # fmt: skip
    async with running(cluster, log) as binder:

        async def found() -> bool:
            return binder.stats.already == 1

        await wait_until(found, 30, "the owed binding found done by a read")
        assert (ns, "train", POD) in binder.done
        if cluster.kind == "kmock":
            assert asked(cluster) == {"bindings": 0, "node writes": 0, "pod reads": 1}, cluster.requests
        assert binder.stats.bound == 0 and binder.stats.failed == 0


async def test_a_binder_whose_pod_list_does_not_answer_binds_as_before_it_watched(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The list may be refused (a ClusterRole from before the binder watched pods) or slow:
    past `UNBOUND_LIST_WAIT` a Volcano Job's binding is tried as it was before the watch."""
    if cluster.kind != "kmock":
        pytest.skip("the emulator holds the binder's list")
    monkeypatch.setattr(binder_module, "UNBOUND_LIST_WAIT", 0.5)
    cluster.held_lists[(AGENT, "pods")] = asyncio.Event()  # never set: the list never answers
    ns = cluster.namespace
    await cluster.create_node("n1")
    await cluster.create_pod(job_pod())
    log = MemoryLog()
    append(log, *job_events(ns))
    async with running(cluster, log) as binder:
        append(log, commit(ns))
        await bound_to(cluster, "n1", binder)
        assert not binder.unbound_listed.is_set() and binder.stats.bound == 1


@contextlib.asynccontextmanager
async def holding(cluster: Cluster, request: tuple[str, str, str], answer: tuple[str, str, str],
                  node_lock: bool = True) -> AsyncIterator[tuple[Binder, MemoryLog, asyncio.Event, asyncio.Event]]:  # fmt: skip
    """A running binder (the job known, its pod list read) whose `request` waits before the
    emulator looks at it and whose `answer` waits once made, until each Event is set."""
    if cluster.kind != "kmock":
        pytest.skip("holds the emulator's request and answer")
    await cluster.create_node("n1")
    log = MemoryLog()
    append(log, *job_events(cluster.namespace))
    sent = cluster.held_requests[request] = asyncio.Event()
    answered = cluster.held_answers[answer] = asyncio.Event()
    try:
        async with running(cluster, log, node_lock=node_lock) as binder:
            await binder.unbound_listed.wait()
            yield binder, log, sent, answered
    finally:
        sent.set()
        answered.set()


async def test_a_pod_made_again_while_its_refused_binding_was_answered_is_bound_at_once(cluster: Cluster) -> None:
    """The pod the binding was asked for is deleted (by hand, say) and its job controller makes
    it again while the 404 is on its way back: the binder's watch already shows the new pod
    when the answer comes. Before, it waited for that watch's next word on the pod — none comes
    to an unbound pod that nothing changes — until its minute's recheck."""
    ns = cluster.namespace
    binding = (AGENT, "post", "pods/binding")
    async with holding(cluster, binding, binding, node_lock=False) as (binder, log, sent, answered):
        first = await cluster.create_pod(job_pod())

        async def stored(uid: str) -> bool:
            return volcano.uid((binder.unbound or {}).get(f"{ns}/{POD}") or {}) == uid

        await wait_until(lambda: stored(volcano.uid(first)), 30, "the pod on the binder's watch")
        append(log, commit(ns))

        async def asking() -> bool:
            return cluster.requests[(AGENT, "post", "pods/binding")] == 1

        await wait_until(asking, 30, "the binding asked")
        await cluster.kube.delete(pods_path(ns, POD))  # unbound: gone at once
        sent.set()  # answered 404: no such pod now

        async def refused() -> bool:
            return cluster.rules.answers_held[(AGENT, "post", "pods/binding")] == 1

        await wait_until(refused, 30, "the 404 made")
        again = await cluster.create_pod(job_pod())
        await wait_until(lambda: stored(volcano.uid(again)), 30, "the pod made again on the binder's watch")
        answered.set()
        await bound_to(cluster, "n1")
        assert (await cluster.pod(ns, POD) or {})["metadata"]["uid"] == volcano.uid(again)


async def test_a_node_read_after_a_lock_conflict_does_not_hide_the_release_its_watch_told(cluster: Cluster) -> None:
    """The binder's lock write is refused (409: the node changed — another pod took the HAMi
    lock); it reads the node again, and while that answer is on the wire the lock is released
    and the binder's watch says so. The older answer, put over the watch's copy, showed the lock
    held: the binding waited for the node's next change (or the lock's expiry, 5 minutes)."""
    ns = cluster.namespace
    async with holding(cluster, (AGENT, "update", "nodes"), (AGENT, "fetch", "nodes")) as (binder, log, locking, reading):
        await cluster.create_pod(job_pod())
        append(log, commit(ns))

        async def lock_asked() -> bool:
            return cluster.requests[(AGENT, "update", "nodes")] >= 1

        await wait_until(lock_asked, 30, "the binder's lock write sent")
        taken = hami.lock_value(time.time(), ns, "other")
        await cluster.kube.patch(nodes_path("n1"), {"metadata": {"annotations": {hami.NODE_LOCK: taken}}})
        del cluster.held_requests[(AGENT, "update", "nodes")]  # (its release write goes freely)
        locking.set()  # 409: refused at the version it read

        async def read_made() -> bool:
            return cluster.rules.answers_held[(AGENT, "fetch", "nodes")] == 1

        await wait_until(read_made, 30, "the node read again, its answer (lock held) made")
        await cluster.kube.patch(nodes_path("n1"), {"metadata": {"annotations": {hami.NODE_LOCK: None}}})

        async def release_seen() -> bool:
            obj = binder.nodes.get("n1")
            return obj is not None and hami.NODE_LOCK not in (obj["metadata"].get("annotations") or {})

        await wait_until(release_seen, 30, "the release on the binder's watch")
        reading.set()
        await bound_to(cluster, "n1")
