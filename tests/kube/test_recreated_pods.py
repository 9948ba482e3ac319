"""A pod is one object by its uid: a plain pod deleted and made again under its name (a
StatefulSet's replica) while admission was away, or while its watch relisted (the relist's
difference is by name: one change, no deletion), was never admitted — its name matched the old
pod's live job — and stayed Pending for good; the old job, its binding refused 409 (the binding's
uid precondition), was placed and refused every 10 s for ever."""

from __future__ import annotations

import asyncio

from contracts.events import BindingFailed, PlacementCommitted, TaskPlacement
from services.admission.service import AdmissionService
from services.kube import pods
from services.kube.binder import Binder
from services.kube.client import pods_path
from services.kube.listwatch import Change, scheduler_pods
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster
from tests.kube.test_claim_binding import append
from tests.kube.test_ghost_pods import cpu_pod, deleted, logged, submitted, take, watched
from tests.processes import wait_until

SYNCED = Change("synced", "", {})


def pod_uid(admission: AdmissionService, ns: str, name: str) -> str:
    """The uid of the pod the live job of that name was admitted from."""
    job = admission.known.jobs[(ns, name)]
    return next(t.annotations.get(pods.POD_UID, "") for t in job.spec.tasks)


async def test_a_pod_made_again_while_admission_was_away_ends_the_old_job_and_is_admitted(cluster: Cluster) -> None:
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    first = await cluster.create_pod(cpu_pod("web-0"))
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=source._ours)) as changes:
        await source.process([("pod", c) for c in await take(changes, 2)])
    assert admission.known.jobs[(ns, "web-0")].live
    await cluster.kube.delete(pods_path(ns, "web-0"))  # while admission is away: deleted, made again
    second = await cluster.create_pod(cpu_pod("web-0"))
    assert first["metadata"]["uid"] != second["metadata"]["uid"]

    again = AdmissionService(log)
    await again.recover()
    restarted = PodSource(again, cluster.kube)
    async with watched(scheduler_pods(cluster.kube, {"tessera"}, keep=restarted._ours)) as changes:
        listed = await take(changes, 2)
        assert [c.kind for c in listed] == ["upsert", "synced"]  # one batch: the pod, then the sweep
        await restarted.process([("pod", c) for c in listed])
    assert await deleted(log, "web-0") == 1, "the old pod's job ended"
    assert await submitted(log, "web-0") == 2
    assert again.known.jobs[(ns, "web-0")].live, "the pod there now was never admitted: Pending for good"
    assert pod_uid(again, ns, "web-0") == second["metadata"]["uid"]


async def test_a_pod_made_again_across_a_relist_ends_the_old_job_and_is_admitted(cluster: Cluster) -> None:
    """The watch fell out of the window (410) while the pod was deleted and made again: the
    relist's difference by ns/name shows one upsert (the new uid) and no delete."""
    ns = cluster.namespace
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    first = await cluster.create_pod(cpu_pod("web-0"))
    await source.process([("pod", Change("upsert", f"{ns}/web-0", first)), ("pod", SYNCED)])
    assert pod_uid(admission, ns, "web-0") == first["metadata"]["uid"]
    await cluster.kube.delete(pods_path(ns, "web-0"))
    second = await cluster.create_pod(cpu_pod("web-0"))
    await source.process([("pod", Change("upsert", f"{ns}/web-0", second)), ("pod", SYNCED)])
    assert await deleted(log, "web-0") == 1
    assert admission.known.jobs[(ns, "web-0")].live
    assert pod_uid(admission, ns, "web-0") == second["metadata"]["uid"]
    assert first["metadata"]["uid"] not in source.pods_present
    # the same pod again (a status write, the next relist): nothing more
    await source.process([("pod", Change("upsert", f"{ns}/web-0", second)), ("pod", SYNCED)])
    assert await deleted(log, "web-0") == 1 and await submitted(log, "web-0") == 2


async def test_a_binding_refused_for_another_pod_of_its_name_ends_the_job_and_admits_that_pod(
        cluster: Cluster) -> None:  # fmt: skip
    """No event said the pod was made again: the binder's 409 (uid precondition) has admission
    read the pod, end the old pod's job, and judge the pod there as a new job."""
    ns = cluster.namespace
    await cluster.create_node("n1")
    log = MemoryLog()
    admission = AdmissionService(log)
    await admission.recover()
    source = PodSource(admission, cluster.kube)
    first = await cluster.create_pod(cpu_pod("web-0"))
    await source.process([("pod", Change("upsert", f"{ns}/web-0", first)), ("pod", SYNCED)])
    await cluster.kube.delete(pods_path(ns, "web-0"))  # neither event is fed to admission
    second = await cluster.create_pod(cpu_pod("web-0"))

    stopping = asyncio.Event()
    tasks = [asyncio.create_task(admission.service.run(stopping)), asyncio.create_task(source.run(stopping))]
    source._feed_all = asyncio.Event().wait  # type: ignore[method-assign,assignment]  # no watches here
    binder = Binder(log, cluster.kube, node_lock=False)
    await binder.recover()
    tasks.append(asyncio.create_task(binder.run(stopping)))
    try:
        append(log, PlacementCommitted(namespace=ns, name="web-0", placements=(TaskPlacement(task="web-0", node="n1"),)))

        async def admitted_again() -> bool:
            return await submitted(log, "web-0") == 2

        await wait_until(admitted_again, 30, "the pod made again admitted as a new job")
        refused = [e for e in await logged(log) if isinstance(e, BindingFailed)]
        assert [(e.name, e.reason) for e in refused] == [("web-0", pods.POD_REPLACED)]
        assert await deleted(log, "web-0") == 1
        assert pod_uid(admission, ns, "web-0") == second["metadata"]["uid"]
        assert not cluster.bound.get((ns, "web-0")), "nothing bound the new pod for the old job"
    finally:
        stopping.set()
        await cancel_all(tasks)
