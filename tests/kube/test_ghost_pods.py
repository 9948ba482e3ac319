"""A job whose pod no longer exists on the API server ends, whatever the order in which admission
heard of the pod's create, its deletion and its binding's refusal.

Seen on the emulator (a 30-replica scale-up while another ReplicaSet's pods were created and
deleted at once: an HPA flapping): a pod created and deleted within one admission batch was
admitted after its deletion — a job no event would ever end, placed, its binding refused 404 and
placed again every 0.4 s for good, its cards booked for no pod, and with `preempt` on it evicted a
training gang's pods again and again. Here the watch's changes are read by the test and handed to
admission in the batches each case needs, so every interleaving is played as it is, every run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from contracts.events import (
    BindingFailed,
    JobDeleted,
    JobSubmitted,
    PlacementCommitted,
    TaskPlacement,
)
from contracts.registry import default_registry
from services.admission.service import AdmissionService
from services.kube import pods, volcano
from services.kube.binder import BIND_BACKOFF, BIND_BACKOFF_MAX, Binder
from services.kube.client import pods_path
from services.kube.listwatch import Change, Reflector, scheduler_pods
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.tasks import cancel_all
from services.runtime.waits import within
from tests.kube.cluster import Cluster
from tests.kube.test_claim_binding import append
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.workload import as_pod
from tests.processes import wait_until

SYNCED = Change("synced", "", {})


def cpu_pod(name: str) -> dict[str, Any]:
    """A replica as a ReplicaSet makes it, for Tessera."""
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                  "tessera")  # fmt: skip


async def logged(log: MemoryLog) -> list[Any]:
    reg = default_registry()
    return [reg.decode(m.headers["Tessera-Type"], m.data) async for m in log.replay()
            if m.headers.get("Tessera-Type") in reg]  # fmt: skip


async def submitted(log: MemoryLog, name: str) -> int:
    return sum(isinstance(e, JobSubmitted) and e.spec.name == name for e in await logged(log))


async def deleted(log: MemoryLog, name: str) -> int:
    return sum(isinstance(e, JobDeleted) and e.name == name for e in await logged(log))


@contextlib.asynccontextmanager
async def watched(reflector: Reflector | Any) -> AsyncIterator[Any]:
    """The reflector's changes, read by the test one at a time (`take`)."""
    changes = reflector.changes()
    try:
        yield changes
    finally:
        await changes.aclose()


async def take(changes: Any, n: int) -> list[Change]:
    return [await within(anext(changes), 30) for _ in range(n)]


async def test_a_pod_created_and_deleted_within_one_batch_is_not_admitted(cluster: Cluster) -> None:
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    await cluster.create_pod(cpu_pod("web-0"))  # (listed: the watch goes on from its version)
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=source._ours)) as changes:
        await source.process([("pod", c) for c in await take(changes, 2)])
        await cluster.create_pod(cpu_pod("web-1"))  # stays
        await cluster.create_pod(cpu_pod("flap-0"))
        await cluster.kube.delete(pods_path(ns, "flap-0"))  # scaled away at once
        batch = await take(changes, 3)
        assert [(c.kind, c.key) for c in batch] == [
            ("upsert", f"{ns}/web-1"), ("upsert", f"{ns}/flap-0"), ("delete", f"{ns}/flap-0")]
        await source.process([("pod", c) for c in batch])  # one batch: admission was busy
    assert admission.known.jobs[(ns, "web-1")].live
    assert admission.known.jobs[(ns, "web-0")].live
    assert (ns, "flap-0") not in admission.known.jobs, "a pod gone from the API server was admitted"
    assert await submitted(log, "flap-0") == 0


async def test_a_pod_deleted_after_its_job_was_written_ends_it(cluster: Cluster) -> None:
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    await cluster.create_pod(cpu_pod("web-0"))  # (listed: the watch goes on from its version)
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=source._ours)) as changes:
        await source.process([("pod", c) for c in await take(changes, 2)])
        await cluster.create_pod(cpu_pod("flap-1"))
        await source.process([("pod", c) for c in await take(changes, 1)])
        assert admission.known.jobs[(ns, "flap-1")].live
        await cluster.kube.delete(pods_path(ns, "flap-1"))
        await source.process([("pod", c) for c in await take(changes, 1)])
    assert not admission.known.jobs[(ns, "flap-1")].live
    assert await deleted(log, "flap-1") == 1


async def test_a_pod_deleted_while_admission_was_away_ends_its_job_with_no_volcano_crds(cluster: Cluster) -> None:
    """After a restart the pods' list alone says which pods are gone: it waited for the Volcano
    Jobs' list too, which a cluster without Volcano's CRDs never answers — such a job lived on."""
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    await cluster.create_pod(cpu_pod("flap-2"))
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=source._ours)) as changes:
        await source.process([("pod", c) for c in await take(changes, 2)])
    assert admission.known.jobs[(ns, "flap-2")].live
    await cluster.kube.delete(pods_path(ns, "flap-2"))  # admission is away

    again = AdmissionService(log)
    await again.recover()
    restarted = PodSource(again, cluster.kube)
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=restarted._ours)) as changes:
        listed = await take(changes, 1)
        assert listed == [SYNCED]
        await restarted.process([("pod", c) for c in listed])  # (the Jobs' list never comes)
    assert not again.known.jobs[(ns, "flap-2")].live
    assert await deleted(log, "flap-2") == 1


async def test_a_volcano_job_created_and_deleted_within_one_batch_is_not_admitted(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    await cluster.kube.create(volcano.jobs_path(ns), one_pod_job("other", None))  # (listed, as above)
    async with watched(Reflector(cluster.kube, volcano.jobs_path())) as changes:
        assert [c.kind for c in await take(changes, 2)] == ["upsert", "synced"]
        await cluster.kube.create(volcano.jobs_path(ns), one_pod_job("brief", None))
        await cluster.kube.delete(volcano.jobs_path(ns, "brief"))
        batch = await take(changes, 2)
        assert [c.kind for c in batch] == ["upsert", "delete"]
    await source.process([("pod", SYNCED), ("job", SYNCED), *(("job", c) for c in batch)])
    assert (ns, "brief") not in admission.known.jobs
    assert await submitted(log, "brief") == 0


async def test_a_batch_that_failed_is_taken_again_before_what_came_since(cluster: Cluster) -> None:
    """A pod's create in a batch that failed (the log did not answer), its deletion arriving
    meanwhile: put back behind the deletion, the create was admitted after it — a ghost."""
    source = PodSource(AdmissionService(MemoryLog()), cluster.kube)
    up = Change("upsert", "default/p", cpu_pod("p"))
    gone = Change("delete", "default/p", cpu_pod("p"))
    batches: list[list[tuple[str, Change]]] = []
    stopping = asyncio.Event()

    async def process(batch: list[tuple[str, Change]]) -> None:
        batches.append(list(batch))
        if len(batches) == 1:
            source.changes.put_nowait(("pod", gone))  # arrives while the batch fails
            raise RuntimeError("the log did not answer")
        stopping.set()

    source.process = process  # type: ignore[method-assign]
    source._feed_all = asyncio.Event().wait  # type: ignore[method-assign,assignment]  # no watches here
    source.changes.put_nowait(("pod", up))
    runner = asyncio.create_task(source.run(stopping))
    try:
        await within(stopping.wait(), 30)
    finally:
        await cancel_all([runner])
    assert batches == [[("pod", up)], [("pod", up), ("pod", gone)]]


async def test_a_binding_that_meets_no_pod_ends_the_job_of_a_pod_gone_unseen(cluster: Cluster) -> None:
    """The pod's deletion never reached admission (a missed watch event, any interleaving not
    foreseen): the binder's 404 has admission read the pod, and a pod that is not there ends its
    job, as kube-scheduler drops a pod whose binding failed once its informer no longer has it.
    One still there (this very uid) keeps its job."""
    ns = cluster.namespace
    await cluster.create_node("n1")
    log = MemoryLog()
    admission = AdmissionService(log)
    await admission.recover()
    source = PodSource(admission, cluster.kube)
    await cluster.create_pod(cpu_pod("lost-0"))
    await cluster.create_pod(cpu_pod("kept-0"))
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=source._ours)) as changes:
        await source.process([("pod", c) for c in await take(changes, 3)])
    assert admission.known.jobs[(ns, "lost-0")].live
    await cluster.kube.delete(pods_path(ns, "lost-0"))  # its DELETE is never fed to admission

    stopping = asyncio.Event()
    tasks = [asyncio.create_task(admission.service.run(stopping)), asyncio.create_task(source.run(stopping))]
    binder = Binder(log, cluster.kube, node_lock=False)
    await binder.recover()
    tasks.append(asyncio.create_task(binder.run(stopping)))
    try:
        append(log, PlacementCommitted(namespace=ns, name="lost-0", placements=(TaskPlacement(task="lost-0", node="n1"),)))

        async def ended() -> bool:
            return await deleted(log, "lost-0") == 1

        await wait_until(ended, 30, "the job of the pod its binding met no more ended")
        refused = [e for e in await logged(log) if isinstance(e, BindingFailed)]
        assert [(e.name, e.reason) for e in refused] == [("lost-0", pods.POD_NOT_FOUND)]
        assert refused[0].retry_at > 0  # and held back meanwhile

        # a 404 said of a pod that is there (this uid): its job is kept
        source.binding_refused(BindingFailed(namespace=ns, name="kept-0", task="kept-0", node="n1",
                                             reason=pods.POD_NOT_FOUND))  # fmt: skip

        async def looked_at() -> bool:
            return source.changes.empty() and source.batches >= 2

        await wait_until(looked_at, 30, "the kept pod looked at")
        assert admission.known.jobs[(ns, "kept-0")].live and await deleted(log, "kept-0") == 0
    finally:
        stopping.set()
        await cancel_all(tasks)


async def test_a_refused_binding_is_held_back_one_second_doubling_to_ten(cluster: Cluster) -> None:
    """kube-scheduler's backoff for a pod whose binding failed (1 s, doubling, 10 s at most), as
    the `retry_at` the scheduler honours: given back at once, the refused pod was placed, booked
    and refused again every session, four events each time, for as long as it lasted."""
    ns = cluster.namespace
    await cluster.create_node("n1")
    now = 1_000.0
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    pod = await cluster.create_pod(cpu_pod("refused-0"))
    await source.process([("pod", SYNCED), ("pod", Change("upsert", f"{ns}/refused-0", pod))])
    await cluster.kube.delete(pods_path(ns, "refused-0"))
    binder = Binder(log, cluster.kube, node_lock=False, clock=lambda: now)
    await binder.recover()
    stopping = asyncio.Event()
    task = asyncio.create_task(binder.run(stopping))
    try:
        for n in range(1, 7):
            append(log, PlacementCommitted(namespace=ns, name="refused-0",
                                           placements=(TaskPlacement(task="refused-0", node="n1"),)))  # fmt: skip

            async def refused(n: int = n) -> bool:
                return binder.stats.failed >= n

            await wait_until(refused, 30, f"binding #{n} refused")
        held = [e.retry_at - now for e in await logged(log) if isinstance(e, BindingFailed)]
        assert held == [BIND_BACKOFF * 2**i for i in range(4)] + [BIND_BACKOFF_MAX] * 2
    finally:
        stopping.set()
        await cancel_all([task])
