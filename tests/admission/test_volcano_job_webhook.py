"""Volcano's job webhook (`pkg/webhooks/admission/jobs/validate`) where Tessera judged a Job
differently: what it refuses, what it accepts, and its words beside Tessera's field paths."""

from __future__ import annotations

from typing import Any

import pytest

from services.core.workload.admission import PREEMPTABLE, admit


def vcjob(spec: dict[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-task Job (`w`, 2 replicas) with `spec` merged in and the task's pod `template` metadata."""
    task = {"name": "w", "replicas": 2, "template": {
        "metadata": template or {},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}  # fmt: skip
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"}, "spec": {"tasks": [task], **spec}}  # fmt: skip


def refusals(doc: dict[str, Any]) -> list[str]:
    got = admit([doc])
    assert not got.jobs or not got.rejections
    return [f"{r.path}: {r.rule}" for r in got.rejections]


def test_a_negative_ttl_seconds_after_finished_is_refused() -> None:
    """v/v2.yaml: `ttlSecondsAfterFinished: -5` was accepted (and the finished Job deleted at once)."""
    assert refusals(vcjob({"ttlSecondsAfterFinished": -5})) == [
        "spec.ttlSecondsAfterFinished: 'ttlSecondsAfterFinished' cannot be less than zero."]
    assert refusals(vcjob({"ttlSecondsAfterFinished": 0})) == []
    assert refusals(vcjob({"ttlSecondsAfterFinished": 30})) == []


def plain_pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip


@pytest.mark.parametrize(("value", "preemptable"), [
    ("false", False), ("False", False), ("FALSE", False), ("f", False), ("F", False), ("0", False),
    ("true", True), ("True", True), ("TRUE", True), ("t", True), ("T", True), ("1", True),
])  # fmt: skip
def test_preemptable_is_read_as_go_parses_a_bool(value: str, preemptable: bool) -> None:
    """`GetPodPreemptable` reads the value with `strconv.ParseBool`: /tmp/rev-queues pp-0 ("0")
    and pp-F ("F") were evicted by reclaim, only "false" (any case) kept a pod."""
    for where in ("labels", "annotations"):
        got = admit([plain_pod(**{where: {PREEMPTABLE: value}})])
        assert got.jobs[0].tasks[0].preemptable is preemptable, (where, value)
        assert not got.warnings
    (job,) = admit([vcjob({}, {"labels": {PREEMPTABLE: value}})]).jobs
    assert job.tasks[0].preemptable is preemptable


def test_an_unparsable_preemptable_keeps_the_pod_and_says_so() -> None:
    """An unparsable value (pp-no: "no") is not preemptable to Volcano, with a warning."""
    got = admit([plain_pod(labels={PREEMPTABLE: "no"})])
    assert got.jobs[0].tasks[0].preemptable is False
    assert [(w.path, w.value) for w in got.warnings] == [(f"metadata.labels[{PREEMPTABLE}]", "no")]
    assert "not preemptable" in got.warnings[0].rule
    assert admit([plain_pod()]).jobs[0].tasks[0].preemptable is True  # none: preemptable


def test_the_preemptable_annotation_comes_before_the_label() -> None:
    """Volcano reads the annotation first, then the label; Tessera read the label first."""
    both = plain_pod(labels={PREEMPTABLE: "true"}, annotations={PREEMPTABLE: "false"})
    assert admit([both]).jobs[0].tasks[0].preemptable is False
    both = plain_pod(labels={PREEMPTABLE: "false"}, annotations={PREEMPTABLE: "true"})
    assert admit([both]).jobs[0].tasks[0].preemptable is True


def test_a_live_job_read_preemptable_before_is_no_forbidden_edit_after_the_upgrade() -> None:
    """A Job admitted when "0" read as preemptable, judged again (as every live Job is when the
    edge restarts): the same object, taken with the new reading, not refused as a template edit."""
    from msgspec.structs import replace

    from services.core.workload.jobupdate import judge_update

    (new,) = admit([vcjob({}, {"labels": {PREEMPTABLE: "0"}})]).jobs
    old = replace(new, tasks=(replace(new.tasks[0], preemptable=True),))  # as the log recorded it
    change = judge_update(old, new)
    assert not change.refusals and change.spec is not None and change.spec.tasks[0].preemptable is False


@pytest.mark.parametrize("event", ["OutOfSync", "CommandIssued", "PodRunning"])
def test_the_controllers_own_events_are_refused(event: str) -> None:
    """Volcano's `policyEventMap` keeps them from users; they were accepted with a warning."""
    rule = (f'spec.policies[0].event: Invalid value: "{event}": invalid policy event; valid events are '
            "[* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated]")
    assert refusals(vcjob({"policies": [{"event": event, "action": "RestartJob"}]})) == [rule]
    task_level = vcjob({})
    task_level["spec"]["tasks"][0]["policies"] = [{"event": event, "action": "RestartJob"}]
    assert [r.split(":")[0] for r in refusals(task_level)] == ["spec.tasks[0].policies[0].event"]


@pytest.mark.parametrize("action", ["SyncJob", "RestartPartition", "CloseQueue", "EnqueueJob", "SyncQueue", "OpenQueue"])
def test_actions_a_user_may_not_name_are_refused_on_an_event(action: str) -> None:
    """Volcano's `policyActionMap`: accepted silently before, a policy that did nothing."""
    rule = (f'spec.policies[0].action: Invalid value: "{action}": invalid policy action; valid actions are '
            "[AbortJob RestartJob RestartTask RestartPod TerminateJob CompleteJob ResumeJob]")
    assert refusals(vcjob({"policies": [{"event": "PodFailed", "action": action}]})) == [rule]


def test_what_volcanos_webhook_accepts_is_accepted() -> None:
    """An event named in `event` and `events` of one policy is one event (`getEventList`); a
    PodPending policy without a timeout and an exit-code policy's unknown action pass the
    webhook — said as warnings, since neither does anything; a task's maxRetry is accepted
    and said not to be acted on."""
    body = vcjob({"policies": [
        {"event": "PodFailed", "events": ["PodFailed", "PodEvicted"], "action": "RestartJob"},
        {"event": "PodPending", "action": "AbortJob"},
        {"exitCode": 3, "action": "Bogus"}]})  # fmt: skip
    body["spec"]["tasks"][0]["maxRetry"] = 5
    got = admit([body])
    assert not got.rejections, got.rejections
    (job,) = got.jobs
    assert job.policies == (("PodFailed", "RestartJob"), ("PodEvicted", "RestartJob"),
                            ("PodPending", "AbortJob"), ("exitCode:3", "Bogus"))  # fmt: skip
    warned = {w.path: w.rule for w in got.warnings}
    assert set(warned) == {"spec.policies[1].timeout", "spec.policies[2].action", "spec.tasks[0].maxRetry"}
    assert "never runs" in warned["spec.policies[1].timeout"]
    assert "the job is synced" in warned["spec.policies[2].action"]
    assert "container restarts" in warned["spec.tasks[0].maxRetry"]


def queues(*docs: dict[str, Any]) -> list[dict[str, Any]]:
    """Queue `p` with a child `c`, and `qc` Closed."""
    def queue(name: str, parent: str = "", state: str = "Open") -> dict[str, Any]:
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                "spec": {"parent": parent} if parent else {}, "status": {"state": state}}  # fmt: skip
    return [queue("p"), queue("c", "p"), queue("qc", state="Closed"), *docs]


def test_refusals_say_the_webhooks_words_beside_the_field() -> None:
    """LOW 6: `must be >= 0`, `queue does not exist` were Tessera's alone; a user searching
    Volcano's messages found nothing."""
    assert refusals(vcjob({"maxRetry": -1})) == ["spec.maxRetry: 'maxRetry' cannot be less than zero."]
    assert refusals(vcjob({"minAvailable": -1})) == ["spec.minAvailable: job 'minAvailable' must be >= 0."]
    task = vcjob({})
    task["spec"]["tasks"][0]["minAvailable"] = -1
    assert refusals(task) == ["spec.tasks[0].minAvailable: 'minAvailable' < 0 in task: w, job: j"]
    assert refusals(vcjob({"queue": "gone"})) == [
        'spec.queue: queue does not exist (unable to find job queue: queues.scheduling.volcano.sh "gone" not found)']
    got = admit(queues(vcjob({"queue": "qc"}), vcjob({"queue": "p"})))
    assert [r.rule for r in got.rejections] == [
        "can only submit job to queue with state `Open`, queue `qc` status is `Closed`",
        "can only submit job to leaf queue, queue `p` has 1 child queues"]


def test_a_pod_or_podgroup_on_a_parent_queue_is_created_and_told_it_waits() -> None:
    """/tmp/rev-queues/jobs-live.yaml: `pod-parent` naming queue `p` (a parent) was refused with
    the Job webhook's leaf rule; Volcano's Pod and PodGroup webhooks ask only that the queue
    exists and is Open. A Closed queue still refuses them."""
    pod = plain_pod(annotations={"scheduling.volcano.sh/queue-name": "p"})
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 1, "queue": "p"}}  # fmt: skip
    got = admit(queues(pod, group))
    assert not got.rejections, got.rejections
    assert [(j.kind, j.queue) for j in got.jobs] == [("Pod", "p"), ("PodGroup", "p")]
    assert [(w.kind, w.path) for w in got.warnings] == [
        ("Pod", "metadata.annotations[scheduling.volcano.sh/queue-name]"), ("PodGroup", "spec.queue")]
    assert all("queue `p` has 1 child queues" in w.rule and "waits" in w.rule for w in got.warnings)
    closed = admit(queues(plain_pod(annotations={"scheduling.volcano.sh/queue-name": "qc"})))
    assert [r.rule for r in closed.rejections] == [
        "can only submit job to queue with state `Open`, queue `qc` status is `Closed`"]


def test_arrive_at_in_a_jobs_template_is_said_to_be_ignored() -> None:
    """MINOR 8: the README called `tessera.io/arrive-at` a pod annotation, and in a Job's
    template it was ignored in silence (the job arrived at 0)."""
    got = admit([vcjob({}, {"annotations": {"tessera.io/arrive-at": "90"}})])
    (job,) = got.jobs
    assert job.arrive_at == 0.0
    [warning] = got.warnings
    assert (warning.path, warning.value) == ("spec.tasks[0].template.metadata.annotations[tessera.io/arrive-at]", "90")
    assert "the Job's own metadata.annotations" in warning.rule
    own = vcjob({})
    own["metadata"]["annotations"] = {"tessera.io/arrive-at": "90"}
    got = admit([own])
    assert got.jobs[0].arrive_at == 90.0 and not got.warnings
