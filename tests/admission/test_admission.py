"""The admission service: per-object replies, nothing written for what it refuses, and hostile
input answered with an error while the service carries on."""

from __future__ import annotations

import pytest

from contracts.api import ACCEPTED, REJECTED, UNCHANGED, ApplyReply, ApplyRequest, decode, encode
from contracts.events import JobSubmitted, QueueCreated, QueueDeleted, QueueStateChanged
from contracts.workloads import QueueSpec
from services.admission.guard import Limits
from services.admission.service import AdmissionService
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import decoded, put

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-a}
spec: {weight: 2}
"""

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  queue: {queue}
  minAvailable: 2
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: c
              image: busybox
              resources:
                limits: {huawei.com/Ascend910B3: "1"}
"""



def job(queue: str) -> str:
    return JOB.replace("{queue}", queue)


BAD_POD = """
apiVersion: v1
kind: Pod
metadata: {name: bad-typo}
spec:
  containers:
    - name: c
      image: busybox
      resourcs: {}
      resources:
        limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "70000"}
"""


async def events_of(log: EventLog) -> list:
    return decoded([m async for m in log.replay()])


async def started(log: EventLog) -> AdmissionService:
    svc = AdmissionService(log)
    await svc.recover()
    return svc


async def test_accepts_writes_once_and_reapply_is_unchanged(event_log: EventLog) -> None:
    svc = await started(event_log)
    reply = await svc.apply(QUEUE + "---" + job("team-a"))
    assert [(r.kind, r.name, r.outcome) for r in reply.results] == [
        ("Queue", "team-a", ACCEPTED), ("Job", "train", ACCEPTED)]  # fmt: skip
    written = await events_of(event_log)
    assert [type(e) for e in written] == [QueueCreated, JobSubmitted]
    assert written[1].spec.queue == "team-a" and written[1].spec.min_available == 2
    again = await svc.apply(QUEUE + "---" + job("team-a"))
    assert [r.outcome for r in again.results] == [UNCHANGED, UNCHANGED]
    # a fresh service instance (a restart) knows the same from the log
    restarted = await started(event_log)
    assert [r.outcome for r in (await restarted.apply(job("team-a"))).results] == [UNCHANGED]
    changed = job("team-a").replace("minAvailable: 2", "minAvailable: 2\n  maxRetry: 5")
    refused = await restarted.apply(changed)
    assert refused.results[0].outcome == REJECTED
    assert refused.results[0].reasons[0].startswith("spec.maxRetry: Forbidden: job updates may not change")
    assert len(await events_of(event_log)) == 2


async def test_rejections_name_field_and_rule_and_write_nothing(event_log: EventLog) -> None:
    svc = await started(event_log)
    reply = await svc.apply(BAD_POD + "---" + job("nowhere"))
    by_name = {r.name: r for r in reply.results}
    assert by_name["bad-typo"].outcome == REJECTED
    assert any("resourcs" in r and "unknown field" in r for r in by_name["bad-typo"].reasons)
    assert by_name["train"].outcome == REJECTED
    assert any("spec.queue" in r and "does not exist" in r for r in by_name["train"].reasons)
    assert reply.rejected
    assert await events_of(event_log) == []


async def test_device_rule_names_resource_value_and_capacity(event_log: EventLog) -> None:
    svc = await started(event_log)
    pod = BAD_POD.replace("      resourcs: {}\n", "")
    reply = await svc.apply(pod)
    (result,) = reply.results
    assert result.outcome == REJECTED
    assert any("huawei.com/Ascend910B3-memory" in r and "70000" in r for r in result.reasons)
    assert await events_of(event_log) == []


async def test_queue_state_in_the_log_decides(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(QUEUE)
    s = event_log.subjects
    await put(event_log, s.queue("team-a"), QueueStateChanged(queue="team-a", state="Closed"))
    fresh = await started(event_log)
    reply = await fresh.apply(job("team-a"))
    assert reply.results[0].outcome == REJECTED
    assert "state `Open`" in reply.results[0].reasons[0]


HOSTILE = {
    "not yaml": "kind: [unclosed\n  - :",
    "deep nesting": "a: " + "[" * 5000 + "]" * 5000,
    "deep json": "[" * 100_000 + "]" * 100_000,
    "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
              for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    "too large": "# " + "x" * 2_000_000,
    "scalar document": "just a string",
    "no objects": "---\n---\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_input_is_an_error_and_the_service_goes_on(event_log: EventLog, name: str) -> None:
    svc = await started(event_log)
    reply = await svc.apply(HOSTILE[name])
    assert reply.error.startswith("manifest not accepted"), reply
    assert reply.results == ()
    assert await events_of(event_log) == []
    assert (await svc.apply(QUEUE)).results[0].outcome == ACCEPTED


WRONG_TYPES = [
    "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec: [1, 2]",
    "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec: {tasks: 7}",
    "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec: {minAvailable: many, tasks: [{replicas: x}]}",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{resources: {limits: {cpu: [1]}}}]}",
    "apiVersion: v1\nkind: Pod\nmetadata: [1]\nspec: {}",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: [x]}\nspec: {containers: 3}",
]


@pytest.mark.parametrize("text", WRONG_TYPES)
async def test_wrong_types_are_answered_never_raised(event_log: EventLog, text: str) -> None:
    svc = await started(event_log)
    reply = await svc.apply(text)
    assert reply.error or all(r.outcome == REJECTED and r.reasons for r in reply.results)
    assert reply.rejected
    assert await events_of(event_log) == []


async def test_api_bytes_round_trip_and_garbage(event_log: EventLog) -> None:
    svc = AdmissionService(event_log, limits=Limits(max_bytes=10_000))
    await svc.recover()
    ok = decode(await svc.api_apply(encode(ApplyRequest(manifest=QUEUE, dry_run=True))), ApplyReply)
    assert ok.results[0].outcome == ACCEPTED and await events_of(event_log) == []
    bad = decode(await svc.api_apply(b"\xff\x00 not json"), ApplyReply)
    assert bad.error.startswith("request not understood")


PRIORITY = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"""

HIGH_POD = """
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priorityClassName: high
  containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: "1"}}}]
"""


async def test_priority_classes_are_kept_for_later_submissions(event_log: EventLog) -> None:
    svc = await started(event_log)
    refused = await svc.apply(HIGH_POD)  # not known yet
    assert refused.results[0].outcome == REJECTED
    assert "no PriorityClass with this name" in refused.results[0].reasons[0]
    assert [r.outcome for r in (await svc.apply(PRIORITY)).results] == [ACCEPTED]
    restarted = await started(event_log)  # known from the log, not from memory
    assert [r.outcome for r in (await restarted.apply(PRIORITY)).results] == [UNCHANGED]
    reply = await restarted.apply(HIGH_POD)
    assert [r.outcome for r in reply.results] == [ACCEPTED]
    submitted = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert submitted[0].spec.tasks[0].priority == 1000
    changed = await restarted.apply(PRIORITY.replace("1000", "5"))
    assert changed.results[0].outcome == REJECTED


async def test_two_admission_instances_racing_write_one_job(event_log: EventLog) -> None:
    """Two admission processes (here: instances) apply the same new job at once: the expected
    last subject sequence lets exactly one write; the other answers without writing."""
    import asyncio

    a, b = await started(event_log), await started(event_log)
    text = QUEUE + "---" + job("team-a")
    first, second = await asyncio.gather(a.apply(text), b.apply(text))
    outcomes = sorted(r.outcome for reply in (first, second) for r in reply.results if r.kind == "Job")
    assert outcomes in (["accepted", "rejected"], ["accepted", "unchanged"])
    loser = next(r for reply in (first, second) for r in reply.results
                 if r.kind == "Job" and r.outcome != "accepted")  # fmt: skip
    if loser.outcome == "rejected":
        assert "concurrently" in loser.reasons[0]
    written = await events_of(event_log)
    assert sum(isinstance(e, JobSubmitted) for e in written) == 1
    assert sum(isinstance(e, QueueCreated) for e in written) == 1


async def test_a_conflict_with_the_very_same_fact_is_unchanged_not_refused(event_log: EventLog) -> None:
    """Another writer (on a cluster: the queue service's default `root`, which the job
    controller also makes as a Queue object) writes a queue, and the same spec reaches this
    admission before it has read that write back: the log already holds what it meant to
    write, so it is unchanged — no FailedAdmission Warning. Another spec under the name in that
    moment is still refused as concurrent."""
    behind, other = await started(event_log), await started(event_log)  # neither folds the other
    assert [r.outcome for r in (await other.apply(QUEUE)).results] == [ACCEPTED]
    same = await behind.apply(QUEUE)
    assert [r.outcome for r in same.results] == [UNCHANGED], same
    team_b = QUEUE.replace("team-a", "team-b")
    behind, other = await started(event_log), await started(event_log)
    assert [r.outcome for r in (await other.apply(team_b.replace("weight: 2", "weight: 5"))).results] == [ACCEPTED]
    refused = await behind.apply(team_b)
    assert [r.outcome for r in refused.results] == [REJECTED] and "concurrently" in refused.results[0].reasons[0]
    assert sum(isinstance(e, QueueCreated) for e in await events_of(event_log)) == 2


async def test_racing_different_specs_under_one_name_write_one(event_log: EventLog) -> None:
    import asyncio

    a, b = await started(event_log), await started(event_log)
    await a.apply(QUEUE)
    await b.recover()  # b knows the queue from the log
    other = job("team-a").replace("replicas: 2", "replicas: 3").replace("minAvailable: 2", "minAvailable: 3")
    first, second = await asyncio.gather(a.apply(job("team-a")), b.apply(other))
    outcomes = sorted(reply.results[0].outcome for reply in (first, second))
    assert outcomes == ["accepted", "rejected"]
    loser = next(reply.results[0] for reply in (first, second) if reply.results[0].outcome == "rejected")
    assert "concurrently" in loser.reasons[0]
    assert sum(isinstance(e, JobSubmitted) for e in await events_of(event_log)) == 1


async def test_a_changed_queue_is_configured_and_a_deleted_one_can_come_back(event_log: EventLog) -> None:
    """kubectl apply of a Queue with another weight/capability updates it in Volcano (issue 13,
    item 13: `tessera queue update`); root is protected; a deleted queue may be created again."""
    from contracts.api import CONFIGURED
    from contracts.events import QueueUpdated

    svc = await started(event_log)
    await svc.apply(QUEUE)
    changed = QUEUE.replace("{weight: 2}", "{weight: 5, capability: {cpu: '8'}}")
    reply = await svc.apply(changed)
    assert [(r.name, r.outcome) for r in reply.results] == [("team-a", CONFIGURED)]
    updated = (await events_of(event_log))[-1]
    assert isinstance(updated, QueueUpdated) and updated.spec.weight == 5
    assert updated.spec.capability == {"cpu": 8000}
    restarted = await started(event_log)  # the update is known from the log alone
    assert [r.outcome for r in (await restarted.apply(changed)).results] == [UNCHANGED]
    root = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: root}\nspec: {weight: 3}\n"
    await put(event_log, event_log.subjects.queue("root"), QueueCreated(spec=QueueSpec(name="root")))
    refused = await (await started(event_log)).apply(root)
    assert refused.results[0].outcome == REJECTED and "root queue" in refused.results[0].reasons[0]
    await put(event_log, event_log.subjects.queue("team-a"), QueueDeleted(queue="team-a"))
    again = await (await started(event_log)).apply(QUEUE)
    assert [r.outcome for r in again.results] == [ACCEPTED]  # its subject's sequence was known
    assert isinstance((await events_of(event_log))[-1], QueueCreated)


async def test_create_refuses_a_queue_that_exists_and_writes_nothing(event_log: EventLog) -> None:
    """`tessera queue create` of an existing queue answered "configured" and replaced its spec
    (capability and reclaimable gone): create is the API server's POST, 409 AlreadyExists."""
    svc = await started(event_log)
    capped = QUEUE.replace("{weight: 2}", "{weight: 2, capability: {cpu: '8'}, reclaimable: false}")
    assert [r.outcome for r in (await svc.apply(capped, create=True)).results] == [ACCEPTED]
    before = await events_of(event_log)
    for again in (QUEUE, capped):  # another spec, or the very same one: both exist already
        reply = await svc.apply(again, create=True)
        assert [r.outcome for r in reply.results] == [REJECTED]
        assert reply.results[0].reasons == (
            'metadata.name: AlreadyExists: queues.scheduling.volcano.sh "team-a" already exists (apply or update changes it)',)
    assert await events_of(event_log) == before
    await put(event_log, event_log.subjects.queue("team-a"), QueueDeleted(queue="team-a"))
    assert [r.outcome for r in (await (await started(event_log)).apply(QUEUE, create=True)).results] == [ACCEPTED]


async def test_two_creates_of_one_queue_at_once_make_one_and_refuse_the_other(event_log: EventLog) -> None:
    """Both plans saw no queue; the second write meets the first's (the same object: its
    append is answered as a duplicate or a conflict with the same content) and was answered
    `unchanged` — the API server answers the second POST 409 AlreadyExists (review)."""
    first, second = await started(event_log), await started(event_log)
    replies = [await first.apply(QUEUE, create=True), await second.apply(QUEUE, create=True)]
    assert [r.results[0].outcome for r in replies] == [ACCEPTED, REJECTED]
    assert "AlreadyExists" in replies[1].results[0].reasons[0]
    assert sum(isinstance(e, QueueCreated) for e in await events_of(event_log)) == 1


GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers:
    - {name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "MEM"}}}
"""


async def test_memory_no_registered_card_holds_is_refused_naming_the_largest(event_log: EventLog) -> None:
    """Issue 26 item 3 through the service: the cards it knows are the nodes' registrations in
    the log (A100-40G and H100-80G): 90000 MB is refused, 81920 accepted."""
    from contracts.devices import CardSpec
    from contracts.events import NodeRegistered

    s = event_log.subjects
    for i, (kind, memory) in enumerate((("NVIDIA-A100-40G", 40960), ("NVIDIA-H100-80G", 81920))):
        card = CardSpec(uuid=f"g{i}", node=f"gpu-{i}", index=0, type=kind, vendor="nvidia", memory=memory, cores=100)
        await put(event_log, s.node(f"gpu-{i}"), NodeRegistered(node=f"gpu-{i}", cpu_milli=16000, memory_mib=65536,
                                                                 cards=(card,)))  # fmt: skip
    svc = await started(event_log)
    (refused,) = (await svc.apply(GPU_POD.replace("MEM", "90000"))).results
    assert refused.outcome == REJECTED
    assert any("nvidia.com/gpumem" in r and "NVIDIA-H100-80G" in r and "81920 MB" in r for r in refused.reasons)
    (accepted,) = (await svc.apply(GPU_POD.replace("MEM", "81920"))).results
    assert accepted.outcome == ACCEPTED
