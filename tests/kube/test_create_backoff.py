"""A Volcano Job whose pods the API server refuses (PodSecurity admission, a ResourceQuota, a
webhook: 403; an invalid pod: 422). The job controller asked again for every refused pod at
every reconcile and once a second besides, for ever, and wrote nothing on the Job: one
misconfigured Job used up the process's client QPS, starving the other Jobs' pods and status
writes, while its own gang stayed booked with no pods and its user saw nothing. Now its Job gets
a `FailedCreate` Warning Event naming the pod and the server's message, and the job backs off
(doubling, reset when a create succeeds or the job's spec changes), asking with one pod first.
The job controller is driven here by the log's events on an in-memory log, with its own clock,
against the emulator (or a real API server, whose PodSecurity admission refuses the same pods)."""

from __future__ import annotations

from contracts.events import (
    BindingFailed,
    JobSubmitted,
    JobUpdated,
    PlacementCommitted,
    TaskPlacement,
)
from contracts.workloads import JobSpec, TaskSpec
from services.kube import volcano
from services.kube.client import RETRY_FIRST as CREATE_BACKOFF
from services.kube.client import TRANSIENT_BACKOFF_CAP, Kube
from services.kube.jobcontroller import JobController
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.test_judged_again import replayed
from tests.kube.test_status_counts import Clock
from tests.processes import wait_until

NS = "locked"
PODS = ("gang-w-0", "gang-w-1")


async def test_refused_pod_creates_back_off_and_leave_a_failed_create_event_on_the_job(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    await cluster.enforce_pod_security(NS)  # the template's pods set no securityContext
    body = one_pod_job("gang", None)
    body["metadata"]["namespace"] = NS
    body["spec"]["minAvailable"] = 2
    body["spec"]["tasks"][0]["replicas"] = 2
    made = await cluster.kube.create(volcano.jobs_path(NS), body)
    clock = Clock()
    controller = JobController(MemoryLog(), cluster.kube, clock=clock)
    key = f"{NS}/gang"
    controller.jobs[key] = volcano.typed(made, "Job")
    spec = JobSpec(namespace=NS, name="gang", kind="Job", min_available=2, queue="default",
                   annotations={volcano.OBJECT_UID: volcano.uid(made)},
                   tasks=(TaskSpec(name="w", replicas=2),))  # fmt: skip
    seq = 0

    async def then(*events: object) -> None:
        """The events folded, then one reconcile as the controller's loop runs it (an API error
        is logged and the job marked again shortly: the loop's own retry)."""
        nonlocal seq
        for event in events:
            seq += 1
            controller.fold(seq, event)  # type: ignore[arg-type]
        await controller._reconcile_one(key)

    posts = (cluster.kube.agent, "create", "pods")

    def asked() -> int:  # (counted by the emulator only)
        return cluster.requests[posts]

    async def failed_creates() -> list[dict[str, object]]:
        return [e for e in await cluster.events(NS) if e.get("reason") == "FailedCreate"]

    await then(JobSubmitted(spec=spec), PlacementCommitted(
        namespace=NS, name="gang", placements=tuple(TaskPlacement(task=p, node="n1") for p in PODS)))  # fmt: skip

    async def said() -> bool:
        return bool(await failed_creates())

    await wait_until(said, 10, "a FailedCreate Event on the Job")
    (event,) = await failed_creates()
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {"apiVersion": volcano.BATCH, "kind": "Job", "name": "gang",  # type: ignore[comparison-overlap]
                                       "namespace": NS, "uid": volcano.uid(made)}  # fmt: skip
    assert "gang-w-0" in str(event["message"]) and 'violates PodSecurity "restricted:latest"' in str(event["message"])
    if cluster.kind == "kmock":
        assert asked() == len(PODS)

    # whatever marks the job meanwhile (its pods' and PodGroup's changes, status writes) asks
    # nothing of the API server until the backoff is over
    for _ in range(10):
        await then()
    if cluster.kind == "kmock":
        assert asked() == len(PODS), "asked again while backing off"
    clock.now += CREATE_BACKOFF
    await then()  # over: one pod is asked first, and it is refused again
    if cluster.kind == "kmock":
        assert asked() == len(PODS) + 1
    clock.now += CREATE_BACKOFF
    await then()  # the backoff doubled: not yet
    if cluster.kind == "kmock":
        assert asked() == len(PODS) + 1
    clock.now += CREATE_BACKOFF
    await then()
    if cluster.kind == "kmock":
        assert asked() == len(PODS) + 2
    assert len(await failed_creates()) == 1, "the same refusal said twice"

    # the job's spec changed (kubectl edit → JobUpdated): asked again at once, every pod
    await then(JobUpdated(namespace=NS, name="gang", spec=spec))
    if cluster.kind == "kmock":
        assert asked() == 2 * len(PODS) + 2

    # the namespace lets them in: once the backoff is over, the pods are made
    await cluster.enforce_pod_security(NS, None)
    clock.now += CREATE_BACKOFF
    await then()
    for pod in PODS:
        assert await cluster.pod(NS, pod) is not None, pod
    if cluster.kind == "kmock":
        assert asked() == 3 * len(PODS) + 2


async def test_a_partly_refused_gang_gives_back_only_the_pods_not_made(cluster: Cluster) -> None:
    """A quota with room for one pod of two: the pod made is bound by the binder as soon as its
    watch shows it, so only the refused one's cards go back (a made pod given back ran on cards
    the ledger had freed)."""
    await cluster.volcano_crds()
    await cluster.limit_count(NS, "count/pods", 1)
    body = one_pod_job("part", None)
    body["metadata"]["namespace"] = NS
    body["spec"]["tasks"][0]["replicas"] = 2
    made = await cluster.kube.create(volcano.jobs_path(NS), body)
    controller = JobController(MemoryLog(), cluster.kube, clock=Clock())
    key = f"{NS}/part"
    controller.jobs[key] = volcano.typed(made, "Job")
    spec = JobSpec(namespace=NS, name="part", kind="Job", min_available=1, queue="default",
                   annotations={volcano.OBJECT_UID: volcano.uid(made)}, tasks=(TaskSpec(name="w", replicas=2),))  # fmt: skip
    controller.fold(1, JobSubmitted(spec=spec))
    controller.fold(2, PlacementCommitted(namespace=NS, name="part", placements=tuple(
        TaskPlacement(task=f"part-w-{i}", node="n1") for i in range(2))))  # fmt: skip
    await controller._reconcile_one(key)
    made_pods = [p for p in ("part-w-0", "part-w-1") if await cluster.pod(NS, p) is not None]
    assert len(made_pods) == 1, made_pods
    back = [e.task for _m, e in await replayed(controller.log) if isinstance(e, BindingFailed)]
    assert back and made_pods[0] not in back, (made_pods, back)


async def test_pod_creates_the_server_cannot_answer_keep_the_cards_and_are_asked_again_within_seconds(
        cluster: Cluster) -> None:  # fmt: skip
    """A failing-closed validating webhook whose service is down answers every pod create 500
    (no refusal of the pod: it passes once the webhook's pods are up). Counted as a refusal, the
    job backed off to five minutes and gave its cards back, so every job placed during an
    admission controller's upgrade left its node and waited minutes after the webhook was
    back. Now it keeps its cards while the backoff grows, and its creates are asked again at
    most TRANSIENT_BACKOFF_CAP apart; failing that long, its cards go back for that long."""
    await cluster.volcano_crds()
    await cluster.webhook_down(NS, "", "pods")
    body = one_pod_job("late", None)
    body["metadata"]["namespace"] = NS
    made = await cluster.kube.create(volcano.jobs_path(NS), body)
    kube = await Kube.connect(str(cluster.kubeconfig), agent="tessera-test-controller")
    kube.retries = 0  # (the client's own 5xx retries cost seconds each; what follows is the controller's)
    try:
        clock = Clock()
        controller = JobController(MemoryLog(), kube, clock=clock)
        key = f"{NS}/late"
        controller.jobs[key] = volcano.typed(made, "Job")
        spec = JobSpec(namespace=NS, name="late", kind="Job", min_available=1, queue="default",
                       annotations={volcano.OBJECT_UID: volcano.uid(made)}, tasks=(TaskSpec(name="w", replicas=1),))  # fmt: skip
        controller.fold(1, JobSubmitted(spec=spec))
        controller.fold(2, PlacementCommitted(namespace=NS, name="late",
                                              placements=(TaskPlacement(task="late-w-0", node="n1"),)))  # fmt: skip
        posts = (kube.agent, "create", "pods")
        waits = []

        async def given_back() -> list[BindingFailed]:
            return [e for _m, e in await replayed(controller.log) if isinstance(e, BindingFailed)]

        for i in range(8):  # 1, 2, 4, 8, then the cap
            before = cluster.requests[posts]
            await controller._reconcile_one(key)
            if cluster.kind == "kmock":
                assert cluster.requests[posts] == before + 1
            waits.append(controller.refused[key].delay)
            if i < 4:
                assert not await given_back(), f"cards given back after {i + 1} unanswered creates"
            clock.now = controller.refused[key].until
        assert waits == [min(2.0**i, TRANSIENT_BACKOFF_CAP) for i in range(8)], waits
        (said,) = [e for e in await cluster.events(NS) if e.get("reason") == "FailedCreate"]
        assert "Error creating pod late-w-0: Internal error occurred: failed calling webhook" in str(said["message"]), said
        back = await given_back()  # unanswered for ~15 s: given back, held the cap at a time
        assert back and back[0].retry_at - clock.now <= TRANSIENT_BACKOFF_CAP, back

        await cluster.webhook_down(NS, "", "pods", down=False)
        await controller._reconcile_one(key)
        assert await cluster.pod(NS, "late-w-0") is not None
        assert key not in controller.refused
    finally:
        await kube.close()
