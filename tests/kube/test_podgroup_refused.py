"""A Volcano Job whose PodGroup the API server refuses: an object-count ResourceQuota on
PodGroups (`count/podgroups.scheduling.volcano.sh`, a namespace's cap on its Jobs) or a webhook.
The job controller raised, and its loop asked again every second for as long as the Job lived,
writing nothing on it: the user saw a Pending Job and nothing else, and the API server one
refused create a second. Now the Job gets Volcano's `PodGroupError` Warning Event ("Failed to
create PodGroup, err: ..."), once per refusal, and the retries back off (doubling to a cap, as
a controller's rate-limited requeue); the job's pods wait for their PodGroup, as under Volcano,
and come once the quota has room. Driven by the log's events on an in-memory log with its own
clock, against the emulator (or a real API server, whose quota admission refuses the same)."""

from __future__ import annotations

from contracts.events import BindingFailed, JobSubmitted, PlacementCommitted, TaskPlacement
from contracts.workloads import JobSpec, TaskSpec
from services.admission.service import AdmissionService
from services.kube import volcano
from services.kube.client import RETRY_CAP as CREATE_BACKOFF_CAP
from services.kube.client import RETRY_FIRST as CREATE_BACKOFF
from services.kube.client import TRANSIENT_BACKOFF_CAP, pods_path, statefulsets_path
from services.kube.jobcontroller import JobController
from services.kube.podsource import GROUP_MIN_MEMBER, PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.test_judged_again import replayed
from tests.kube.test_owner_gangs import owner as owner_body
from tests.kube.test_owner_gangs import pod_of as member_body
from tests.kube.test_status_counts import Clock

NS = "counted"
KEY = "count/podgroups.scheduling.volcano.sh"


async def test_a_refused_podgroup_is_said_on_the_job_and_retried_with_backoff(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    await cluster.limit_count(NS, KEY, 0)
    body = one_pod_job("capped", None)
    body["metadata"]["namespace"] = NS
    made = await cluster.kube.create(volcano.jobs_path(NS), body)
    clock = Clock()
    controller = JobController(MemoryLog(), cluster.kube, clock=clock)
    key = f"{NS}/capped"
    controller.jobs[key] = volcano.typed(made, "Job")
    spec = JobSpec(namespace=NS, name="capped", kind="Job", min_available=1, queue="default",
                   annotations={volcano.OBJECT_UID: volcano.uid(made)}, tasks=(TaskSpec(name="w", replicas=1),))  # fmt: skip
    controller.fold(1, JobSubmitted(spec=spec))
    controller.fold(2, PlacementCommitted(namespace=NS, name="capped",
                                          placements=(TaskPlacement(task="capped-w-0", node="n1"),)))  # fmt: skip

    async def errors() -> list[dict[str, object]]:
        return [e for e in await cluster.events(NS) if e.get("reason") == "PodGroupError"]

    await controller._reconcile_one(key)
    (event,) = await errors()
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {"apiVersion": volcano.BATCH, "kind": "Job", "name": "capped",  # type: ignore[comparison-overlap]
                                       "namespace": NS, "uid": volcano.uid(made)}  # fmt: skip
    message = str(event["message"])
    assert message.startswith("Failed to create PodGroup, err: ") and "forbidden" in message, message
    if cluster.kind == "kmock":
        assert "exceeded quota: objects" in message and f"{KEY}=0" in message, message
    assert await cluster.pod(NS, "capped-w-0") is None, "a pod made before its PodGroup"
    # its placed task's cards go back, held until the PodGroup is asked again
    back = [e for _m, e in await replayed(controller.log) if isinstance(e, BindingFailed)]
    assert [(e.task, e.retry_at) for e in back] == [("capped-w-0", clock.now + CREATE_BACKOFF)], back
    # the retry is timed, and each failure in a row doubles it
    assert controller._due[key] == clock.now + CREATE_BACKOFF
    delays = [controller.failing[key]]
    creates = (cluster.kube.agent, "create", "scheduling.volcano.sh/podgroups")
    asked = cluster.requests[creates]
    for _ in range(3):
        await controller._reconcile_one(key)  # marked by one of its events before its time: not asked
        if cluster.kind == "kmock":
            assert cluster.requests[creates] == asked, "asked again while backing off"
        clock.now += controller.failing[key]
        await controller._reconcile_one(key)
        asked += 1
        delays.append(controller.failing[key])
    assert delays == [CREATE_BACKOFF * 2**i for i in range(4)]
    if cluster.kind == "kmock":
        assert cluster.requests[creates] == asked
    assert len(await errors()) == 1, "the same refusal said twice"

    # room in the quota: the PodGroup is made, then the pod, and the backoff is over
    await cluster.limit_count(NS, KEY, None)
    clock.now += controller.failing[key]
    await controller._reconcile_one(key)
    assert await cluster.present(volcano.podgroups_path(NS, volcano.podgroup_name(made))) is not None
    assert key not in controller.failing
    await controller._reconcile_one(key)
    assert await cluster.present(pods_path(NS, "capped-w-0")) is not None


async def test_retries_of_a_server_that_did_not_answer_stay_within_seconds(cluster: Cluster) -> None:
    """Failures the server did not refuse (no answer, a 5xx, a 429: an API server restarting)
    back off too, but to `TRANSIENT_BACKOFF_CAP`: after an outage of minutes a job is
    reconciled within seconds of the server's return, not up to five minutes later."""
    clock = Clock()
    controller = JobController(MemoryLog(), cluster.kube, clock=clock)
    transient = [controller._retry_later("a/job", TRANSIENT_BACKOFF_CAP) for _ in range(8)]
    refused = [controller._retry_later("a/other", CREATE_BACKOFF_CAP) for _ in range(12)]
    assert transient[:4] == [CREATE_BACKOFF * 2**i for i in range(4)] and max(transient) == TRANSIENT_BACKOFF_CAP
    assert transient[-1] == TRANSIENT_BACKOFF_CAP < CREATE_BACKOFF_CAP == refused[-1]


async def test_an_owners_refused_podgroup_is_said_on_its_pod_and_asked_once_per_backoff(cluster: Cluster) -> None:
    """Admission makes `podgroup-<owner uid>` for a StatefulSet whose pods are one gang
    (`scheduling.volcano.sh/group-min-member`). Refused, every pod of the owner asked for it
    again every second, and nothing said why the pods stayed Pending. Now the refusal is a
    `PodGroupError` Warning on the pod, the owner's pods ask once per backoff between them
    (doubling), and the PodGroup is made once the quota has room."""
    await cluster.volcano_crds()
    await cluster.limit_count(NS, KEY, 0)
    body = owner_body("StatefulSet", "infer", {GROUP_MIN_MEMBER: "2"})
    body["metadata"]["namespace"] = NS
    sts = await cluster.kube.create(statefulsets_path(NS), body)
    members = []
    for i in range(2):
        pod = member_body(sts, f"infer-{i}")
        pod["metadata"]["namespace"] = NS
        members.append(await cluster.kube.create(pods_path(NS), pod))
    clock = Clock()
    source = PodSource(AdmissionService(MemoryLog()), cluster.kube, clock=clock)
    posts = (cluster.kube.agent, "create", "scheduling.volcano.sh/podgroups")

    async def looked_at(i: int) -> bool:
        return await source._owner_gang(members[i])

    async def errors() -> list[dict[str, object]]:
        return [e for e in await cluster.events(NS) if e.get("reason") == "PodGroupError"]

    assert await looked_at(0) and await looked_at(1)  # both held as members of a gang
    (event,) = await errors()
    assert event["type"] == "Warning" and (event["involvedObject"] or {})["name"] == "infer-0"  # type: ignore[index]
    group = f"podgroup-{sts['metadata']['uid']}"
    assert str(event["message"]).startswith(f"Failed to create PodGroup {group}, err: "), event["message"]
    if cluster.kind == "kmock":
        assert cluster.requests[posts] == 1, "the second pod asked while the first's refusal backs off"
    asked = 1
    for step in (1, 2, 4):  # each refusal doubles the wait; nothing is asked before it is over
        clock.now += step - 0.5
        assert await looked_at(1) and await looked_at(0)
        if cluster.kind == "kmock":
            assert cluster.requests[posts] == asked, f"asked {step - 0.5} s into a {step} s backoff"
        clock.now += 0.5
        assert await looked_at(1)
        asked += 1
        if cluster.kind == "kmock":
            assert cluster.requests[posts] == asked
    assert len(await errors()) == 1, "the same refusal said twice"

    await cluster.limit_count(NS, KEY, None)
    clock.now += 8
    for i in range(2):
        assert await looked_at(i)
    assert await cluster.present(volcano.podgroups_path(NS, group)) is not None
    for i in range(2):
        got = await cluster.pod(NS, f"infer-{i}") or {}
        assert got["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
