"""`tessera apply` of a changed Volcano Job: the changes Volcano's update webhook allows are
`configured` (one `JobUpdated`, once), any other is refused naming the field, nothing written."""

from __future__ import annotations

from contracts.api import CONFIGURED, REJECTED, UNCHANGED
from contracts.events import JobSubmitted, JobUpdated
from services.runtime.eventlog import EventLog
from tests.admission.test_admission import JOB, QUEUE, events_of, started


def job(replicas: int = 2, min_available: int = 2, extra: str = "") -> str:
    return JOB.replace("{queue}", "team-a").replace("replicas: 2", f"replicas: {replicas}") \
        .replace("minAvailable: 2", f"minAvailable: {min_available}{extra}")  # fmt: skip


async def test_scaling_a_live_job_is_configured_once_and_survives_a_restart(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(QUEUE + "---" + job())
    reply = await svc.apply(job(replicas=3, min_available=3))
    assert [(r.name, r.outcome, r.reasons) for r in reply.results] == [("train", CONFIGURED, ())]
    written = await events_of(event_log)
    assert [type(e) for e in written][1:] == [JobSubmitted, JobUpdated]
    update = written[-1]
    assert (update.namespace, update.name) == ("ml", "train")
    assert update.spec.tasks[0].replicas == 3 and update.spec.min_available == 3
    assert update.reason == "tasks[worker].replicas 2 → 3; minAvailable 2 → 3"
    assert (await svc.apply(job(replicas=3, min_available=3))).results[0].outcome == UNCHANGED
    restarted = await started(event_log)  # knows the updated spec from the log
    assert (await restarted.apply(job(replicas=3, min_available=3))).results[0].outcome == UNCHANGED
    assert (await restarted.apply(job())).results[0].outcome == CONFIGURED  # and back to 2
    assert len(await events_of(event_log)) == 4


async def test_a_forbidden_change_is_refused_naming_the_field_and_writes_nothing(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(QUEUE + "---" + job())
    before = len(await events_of(event_log))
    reply = await svc.apply(job(replicas=3, min_available=3, extra="\n  maxRetry: 7"))
    [result] = reply.results
    assert result.outcome == REJECTED
    assert result.reasons == ("spec.maxRetry: Forbidden: job updates may not change fields other than "
                              "`minAvailable`, `tasks[*].replicas` and `priorityClassName` under spec",)  # fmt: skip
    assert len(await events_of(event_log)) == before
    bad = await svc.apply(job(replicas=1, min_available=2))  # the create rules hold on update too
    assert bad.results[0].outcome == REJECTED and "spec.minAvailable" in bad.results[0].reasons[0]
    assert len(await events_of(event_log)) == before


async def test_a_live_job_in_a_queue_closed_since_is_judged_again_unchanged(event_log: EventLog) -> None:
    """Volcano's webhook asks an Open queue of a create only: a Job or PodGroup that runs in a
    queue closed since it was admitted is unchanged when judged again (an admission restart
    judges every live object once more; each in a closed queue was told it was refused), a new
    one is refused, and a change the update rules allow is still taken."""
    from contracts.events import QueueStateChanged
    from tests.admission.test_admission import put

    group = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: ml}
spec: {minMember: 1, queue: team-a}
---
apiVersion: v1
kind: Pod
metadata: {name: pair-0, namespace: ml, annotations: {scheduling.k8s.io/group-name: pair}}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""
    svc = await started(event_log)
    await svc.apply(QUEUE + "---" + job() + "---" + group)
    await put(event_log, event_log.subjects.queue("team-a"), QueueStateChanged(queue="team-a", state="Closed"))
    restarted = await started(event_log)
    reply = await restarted.apply(job() + "---" + group)
    assert [(r.kind, r.outcome) for r in reply.results] == [("Job", UNCHANGED), ("PodGroup", UNCHANGED)]
    assert (await restarted.apply(job(replicas=3, min_available=3))).results[0].outcome == CONFIGURED
    other = await restarted.apply(job().replace("name: train", "name: other"))
    assert other.results[0].outcome == REJECTED and "state `Open`" in other.results[0].reasons[0]


CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
preemptionPolicy: Never
"""


async def test_the_jobs_priority_class_reaches_pods_whose_template_names_none(event_log: EventLog) -> None:
    """Volcano's `createJobPod` writes `spec.priorityClassName` into a pod whose template names
    no class, so its tasks take the class's value and preemptionPolicy; a change of the Job's
    class (an edit Volcano's update webhook allows) moves them along, not refused as an edit of
    the template; a template's own class is left alone."""
    import msgspec

    from tests.admission.test_admission import put

    svc = await started(event_log)
    await svc.apply(CLASSES + "---" + QUEUE + "---" + job(extra="\n  priorityClassName: low"))
    [submitted] = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    task = submitted.spec.tasks[0]
    assert (task.priority_class, task.priority, task.preemption_policy) == ("low", 10, "PreemptLowerPriority")
    reply = await svc.apply(job(extra="\n  priorityClassName: urgent"))
    assert [(r.outcome, r.reasons) for r in reply.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated)
    task = update.spec.tasks[0]
    assert (task.priority_class, task.priority, task.preemption_policy) == ("urgent", 1000, "Never")
    # a job admitted before its tasks took the Job's class, judged again: not refused as an
    # edit of its template; its tasks take the class its pods carry
    old = msgspec.structs.replace(update.spec, name="legacy", tasks=(msgspec.structs.replace(
        task, priority_class="", priority=0, preemption_policy="PreemptLowerPriority"),))  # fmt: skip
    await put(event_log, event_log.subjects.job("ml", "legacy"), JobSubmitted(spec=old))
    restarted = await started(event_log)
    legacy = job(extra="\n  priorityClassName: urgent").replace("name: train", "name: legacy")
    assert (await restarted.apply(legacy)).results[0].outcome == CONFIGURED
    fixed = (await events_of(event_log))[-1]
    assert isinstance(fixed, JobUpdated) and fixed.spec.tasks[0].preemption_policy == "Never"
    assert fixed.reason == "tasks[worker] take the Job's priorityClassName urgent"
    assert (await restarted.apply(legacy)).results[0].outcome == UNCHANGED
    own = job(extra="\n  priorityClassName: urgent").replace("name: train", "name: own").replace(
        "      containers:", "      priorityClassName: low\n          containers:")
    await restarted.apply(own)
    mine = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted) and e.spec.name == "own"]
    assert (mine[0].spec.tasks[0].priority_class, mine[0].spec.tasks[0].priority) == ("low", 10)


def unset_min(replicas: int, min_available: str = "") -> str:
    """The job of `job()` with no minAvailable of its own (or `min_available`, a spec line)."""
    body = job(replicas=replicas).replace("  minAvailable: 2\n", min_available)
    assert "minAvailable" not in body or min_available
    return body


async def test_a_reapplied_job_keeps_the_min_available_the_webhook_wrote_at_creation(event_log: EventLog) -> None:
    """Volcano's mutating webhook runs on create only and writes minAvailable (the tasks' sum,
    a task's its replicas) into the Job: applied again with other replicas and still no
    minAvailable, the job keeps the gang it was created with. Scaled up before, the gang grew
    with the replicas; scaled below it, the edit was taken (minAvailable 3 → 1) where
    `validateJobUpdate` refuses it."""
    svc = await started(event_log)
    await svc.apply(QUEUE + "---" + unset_min(2))
    [created] = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert created.spec.min_available == 2 and created.spec.tasks[0].min_available == 2
    up = await svc.apply(unset_min(3))
    assert [(r.outcome, r.reasons) for r in up.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and update.reason == "tasks[worker].replicas 2 → 3"
    assert (update.spec.min_available, update.spec.tasks[0].min_available) == (2, 2)
    assert update.spec.min_resources == created.spec.min_resources  # the first 2 pods' requests
    assert (await svc.apply(unset_min(3))).results[0].outcome == UNCHANGED
    restarted = await started(event_log)  # the same object judged again after a restart
    assert (await restarted.apply(unset_min(3))).results[0].outcome == UNCHANGED
    before = len(await events_of(event_log))
    [down] = (await restarted.apply(unset_min(1))).results
    assert down.outcome == REJECTED
    assert down.reasons == ("spec.tasks[0].minAvailable: 'minAvailable' must be <= 'replicas' in task: worker",
                            "spec.minAvailable: job 'minAvailable' must not be greater than total replicas")  # fmt: skip
    assert len(await events_of(event_log)) == before
    # saying the gang explicitly scales it down, as on Volcano
    explicit = unset_min(1, "  minAvailable: 1\n").replace("replicas: 1", "replicas: 1\n      minAvailable: 1")
    [ok] = (await restarted.apply(explicit)).results
    assert (ok.outcome, ok.reasons) == (CONFIGURED, ())
    last = (await events_of(event_log))[-1]
    assert (last.spec.min_available, last.spec.tasks[0].min_available, last.spec.tasks[0].replicas) == (1, 1, 1)
    assert isinstance(last, JobUpdated)
    assert last.reason == "tasks[worker].replicas 3 → 1; tasks[worker].minAvailable 2 → 1; minAvailable 2 → 1"


async def test_a_live_job_admitted_before_the_policy_and_ttl_rules_is_kept_when_judged_again(
    event_log: EventLog,
) -> None:
    """Policies on the job controller's own events (OutOfSync…) or the bus's other actions
    (SyncJob…) and a negative ttlSecondsAfterFinished were accepted once; a Job admitted then is
    judged again at each admission restart and cluster relist. It was refused — told the
    cluster it was refused, and every later edit of it with it — now it is kept with a warning
    naming the field and the rule; a new Job with the same spec is still refused."""
    import msgspec

    from tests.admission.test_admission import put

    policies = "\n  policies: [{event: OutOfSync, action: RestartJob}, {event: PodFailed, action: SyncJob}]"
    old_rules = job(extra=policies + "\n  ttlSecondsAfterFinished: -1")
    svc = await started(event_log)
    await svc.apply(QUEUE + "---" + job())
    [submitted] = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    admitted = msgspec.structs.replace(submitted.spec, name="legacy",
                                       policies=(("OutOfSync", "RestartJob"), ("PodFailed", "SyncJob")))  # fmt: skip
    await put(event_log, event_log.subjects.job("ml", "legacy"), JobSubmitted(spec=admitted))
    restarted = await started(event_log)
    legacy = old_rules.replace("name: train", "name: legacy")
    [result] = (await restarted.apply(legacy)).results
    assert result.outcome == UNCHANGED, result.reasons
    kept = sorted(w for w in result.warnings if "admitted before this rule" in w)
    assert [w.split(":")[0] for w in kept] == [
        "spec.policies[0].event", "spec.policies[1].action", "spec.ttlSecondsAfterFinished"], kept  # fmt: skip
    assert "invalid policy event" in kept[0] and "cannot be less than zero" in kept[2]
    scaled = (await restarted.apply(legacy.replace("replicas: 2", "replicas: 3"))).results[0]
    assert scaled.outcome == CONFIGURED, scaled.reasons  # its edits are taken as before
    new = (await restarted.apply(old_rules.replace("name: train", "name: fresh"))).results[0]
    assert new.outcome == REJECTED
    assert sorted(r.split(":")[0] for r in new.reasons) == [
        "spec.policies[0].event", "spec.policies[1].action", "spec.ttlSecondsAfterFinished"], new.reasons  # fmt: skip
