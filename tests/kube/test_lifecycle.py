"""What happens to bound pods on a cluster: a pod that finishes frees its card for the next
one, a deleted pod ends its job and frees its card, a binding the API server refuses releases
the slices and the pod is placed again, and the log's task events follow the pods' phases."""

from __future__ import annotations

import asyncio
from pathlib import Path

from contracts import hami
from contracts.events import (
    BindingFailed,
    EvictionRequested,
    JobDeleted,
    SliceReleased,
    TaskFinished,
)
from contracts.registry import default_registry
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import Entry
from tests.allocator.scenario import decoded
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod, hami_nodes
from tests.processes import wait_until


def whole(name: str) -> dict:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "resources": {"limits": {"huawei.com/Ascend910B3": "1"}}}]}})  # fmt: skip


def cpu_pod(name: str, priority_class: str) -> dict:
    """Half a node's cpu (192 on the harness's nodes), no devices."""
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "priorityClassName": priority_class,
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "96", "memory": "1Gi"},
                                                   "requests": {"cpu": "96", "memory": "1Gi"}}}]}})  # fmt: skip


def cards_of(pod: dict) -> set[str]:
    return {d.uuid for d in hami.allocated_devices(pod["metadata"].get("annotations") or {})}


async def test_finish_delete_and_refused_binding(cluster: Cluster, tmp_path: Path) -> None:
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    cluster.refuse_once.add("p-3")  # its first binding is refused (kmock harness)
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            for i in range(18):  # 16 whole cards on the schedulable nodes
                await cluster.create_pod(whole(f"p-{i}"))

            async def running(n: int) -> bool:
                return sum(kpods.phase(p) == "Running" for p in await cluster.pods()) == n

            await wait_until(lambda: running(16), 60, "16 pods on 16 cards")
            objs = {p["metadata"]["name"]: p for p in await cluster.pods()}
            waiting = sorted(n for n, p in objs.items() if not kpods.node_name(p))
            assert len(waiting) == 2
            done, gone = sorted(n for n in objs if n not in waiting)[:2]
            await kubelet.finish("default", done, 0)  # Succeeded: its card is free again
            await cluster.kube.delete(pods_path("default", gone))  # deleted: its card too

            async def both_placed() -> bool:
                ps = {p["metadata"]["name"]: p for p in await cluster.pods()}
                return all(kpods.phase(ps[n]) == "Running" for n in waiting)

            await wait_until(both_placed, 60, "the waiting pods take the freed cards")
            after = {p["metadata"]["name"]: p for p in await cluster.pods()}
            freed = cards_of(objs[done]) | cards_of(objs[gone])
            assert set().union(*(cards_of(after[n]) for n in waiting)) == freed
            log = await JetStreamLog.connect(cp.url)
            events: list = []

            async def recorded() -> bool:  # admission appends the deletion when it sees it
                nonlocal events
                events = decoded([m async for m in log.replay()])
                return any(isinstance(e, JobDeleted) for e in events) and sum(
                    isinstance(e, SliceReleased) for e in events) >= 3

            try:
                await wait_until(recorded, 60, "the deleted pod's job deleted, three releases")
            finally:
                await log.close()
        finally:
            await asyncio.to_thread(cp.stop)
    finished = [e for e in events if isinstance(e, TaskFinished)]
    # deleted while running: admission ends its job; the node agent may first report it ended
    assert (done, 0) in [(e.task, e.exit_code) for e in finished]
    assert {e.task for e in finished} <= {done, gone} and all(e.exit_code == -1 for e in finished if e.task == gone)
    assert [e.name for e in events if isinstance(e, JobDeleted)] == [gone]
    refused = [e for e in events if isinstance(e, BindingFailed)]
    # (the harness's refusal says the uid precondition failed: admission reads the pod again,
    # finds this very pod there and keeps its job, which is placed again once held back)
    assert [(e.task, e.reason) for e in refused] == [("p-3", kpods.POD_REPLACED)], [(e.task, e.reason) for e in refused]
    released = {e.owner.split("/")[-1] for e in events if isinstance(e, SliceReleased)}
    assert released == {done, gone, "p-3"}
    assert kpods.phase(after["p-3"]) == "Running"
    if cluster.kind == "kmock":
        assert cluster.bound[("default", "p-3")] == [kpods.node_name(after["p-3"])]  # bound once



async def test_eviction_is_a_graceful_deletion_with_an_event(cluster: Cluster, tmp_path: Path) -> None:
    """The scheduler's `EvictionRequested` (preempt, reclaim) becomes a deletion through the
    API — the pod's grace period applies — with a `Preempted` Event, and the card is freed
    once the pod is gone. The eviction is appended here as the scheduler appends it.

    A pod the job controller made after reading an eviction (a restarted gang's next run
    under the same name) is not the one the eviction is about, however late it is handled."""
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(whole("victim"))
            reborn = whole("reborn")
            reborn["metadata"]["annotations"] = {volcano.MADE_AFTER: str(10**9)}  # made after any stop
            await cluster.create_pod(reborn)

            async def runs() -> bool:
                pods = [await cluster.pod("default", n) for n in ("victim", "reborn")]
                return all(p is not None and kpods.phase(p) == "Running" for p in pods)

            await wait_until(runs, 60, "the victim and the next run run")
            log = await JetStreamLog.connect(cp.url)
            try:
                for name in ("reborn", "victim"):  # handled in this order: reborn's is judged first
                    event = EvictionRequested(namespace="default", name=name, task=name,
                                              reason="preempted by default/urgent")  # fmt: skip
                    entry = Entry(log.subjects.job("default", name), default_registry().encode(event),
                                  default_registry().envelope(event, msg_id=f"test-evict-{name}").to_headers())  # fmt: skip
                    await log.append(entry)

                async def gone() -> bool:
                    return await cluster.pod("default", "victim") is None

                await wait_until(gone, 60, "the victim deleted")
                events = await cluster.events()
                survivor = await cluster.pod("default", "reborn")
                assert survivor is not None, "the next run was deleted by the eviction of the one before"

                async def released() -> bool:
                    evs = decoded([m async for m in log.replay()])
                    return any(isinstance(e, SliceReleased) and e.owner.endswith("/victim") for e in evs)

                await wait_until(released, 60, "its card released")
            finally:
                await log.close()
        finally:
            await asyncio.to_thread(cp.stop)
    preempted = [e for e in events if e["reason"] == "Preempted"]
    assert [e["involvedObject"]["name"] for e in preempted] == ["victim"]
    assert kpods.phase(survivor) == "Running"
    assert preempted[0]["type"] == "Normal" and "preempted by default/urgent" in preempted[0]["message"]
