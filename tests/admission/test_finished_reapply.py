"""A finished job is still an object of its name (rev-newcomer finding 1): applying its manifest
again is `unchanged` and runs nothing, as `kubectl apply` of a Completed vcjob or a Succeeded
Pod; an edit is refused in the webhook's or the API server's words, with how to run it again
(delete, then apply); once deleted, the same manifest runs anew."""

from __future__ import annotations

from contracts.api import ACCEPTED, REJECTED, UNCHANGED
from contracts.events import JobDeleted, JobPhaseChanged, JobSubmitted
from services.admission.service import AdmissionService
from services.core.workload.jobupdate import JOB_RULE, POD_SPEC_RULE
from services.runtime.eventlog import EventLog
from services.runtime.service import Outgoing
from tests.admission.test_admission import events_of, started

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: short-job, annotations: {tessera.io/duration: "3"}}
spec:
  minAvailable: 1
  tasks:
    - name: worker
      replicas: 1
      template:
        spec:
          containers: [{name: c, image: busybox}]
          restartPolicy: Never
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: short-pod, labels: {app: a}, annotations: {tessera.io/duration: "3"}}
spec:
  restartPolicy: Never
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


async def end(svc: AdmissionService, name: str, phase: str) -> AdmissionService:
    """What the queue service writes when a job ends (Completed, Terminated, Failed…); the
    admission service that then judges, having folded it from the log."""
    ended = JobPhaseChanged(namespace="default", name=name, phase=phase, reason="test")
    await svc.service.publish(Outgoing(svc.subjects.job("default", name), ended))
    return await started(svc.log)


async def submitted(log: EventLog) -> list[str]:
    return [e.spec.name for e in await events_of(log) if isinstance(e, JobSubmitted)]


async def test_the_same_manifest_of_a_finished_job_and_pod_is_unchanged_and_runs_nothing(event_log: EventLog) -> None:
    svc = await started(event_log)
    first = await svc.apply(JOB + "---" + POD)
    assert [r.outcome for r in first.results] == [ACCEPTED, ACCEPTED]
    svc = await end(svc, "short-job", "Completed")
    svc = await end(svc, "short-pod", "Completed")
    for _ in range(2):  # and once more: still nothing runs
        again = await svc.apply(JOB + "---" + POD)
        assert [(r.name, r.outcome) for r in again.results] == [("short-job", UNCHANGED), ("short-pod", UNCHANGED)]
        job, pod = again.results
        assert job.warnings == ("Job default/short-job is Completed: applying it again does not run it; to "
                                "run it again, `tessera delete vcjob short-job -n default`, then apply it",)  # fmt: skip
        assert any(w.startswith("Pod default/short-pod is Succeeded: applying it again does not run it")
                   for w in pod.warnings)  # (beside the schedulerName warning the pod's manifest earns)
    assert await submitted(event_log) == ["short-job", "short-pod"]


async def test_a_terminated_job_applied_again_stays_terminated(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(JOB)
    svc = await end(svc, "short-job", "Terminated")
    reply = await svc.apply(JOB)
    assert [r.outcome for r in reply.results] == [UNCHANGED]
    assert "is Terminated" in reply.results[0].warnings[0]
    assert await submitted(event_log) == ["short-job"]


async def test_an_edit_of_a_finished_job_is_refused_in_the_webhooks_words_and_says_how_to_rerun(
    event_log: EventLog,
) -> None:
    svc = await started(event_log)
    await svc.apply(JOB)
    svc = await end(svc, "short-job", "Failed")
    how = ("metadata.name: Job default/short-job is Failed: a finished Job does not run again and keeps "
           "no edit; to run it again, `tessera delete vcjob short-job -n default`, then apply it")  # fmt: skip
    scaled = await svc.apply(JOB.replace("replicas: 1", "replicas: 2"))  # an edit the webhook allows
    assert [r.outcome for r in scaled.results] == [REJECTED]
    assert scaled.results[0].reasons == (how,)
    retried = await svc.apply(JOB.replace("minAvailable: 1", "minAvailable: 1\n  maxRetry: 5"))
    assert retried.results[0].reasons == (f"spec.maxRetry: {JOB_RULE}", how)
    assert await submitted(event_log) == ["short-job"]


async def test_an_edit_of_a_finished_pod_is_refused_as_the_api_server_refuses_a_pod_update(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(POD)
    svc = await end(svc, "short-pod", "Failed")
    bigger = await svc.apply(POD.replace('cpu: "1"', 'cpu: "2"'))
    assert [r.outcome for r in bigger.results] == [REJECTED]
    assert bigger.results[0].reasons[0] == POD_SPEC_RULE
    assert "is Failed: a finished Pod does not run again" in bigger.results[0].reasons[1]
    relabelled = await svc.apply(POD.replace("app: a", "app: b"))  # metadata: no spec rule broken
    assert [len(r.reasons) for r in relabelled.results] == [1]
    assert "`tessera delete pod short-pod -n default`" in relabelled.results[0].reasons[0]
    assert await submitted(event_log) == ["short-pod"]


async def test_deleted_it_runs_again(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(JOB)
    svc = await end(svc, "short-job", "Completed")
    gone = JobDeleted(namespace="default", name="short-job")
    await svc.service.publish(Outgoing(svc.subjects.job("default", "short-job"), gone))
    svc = await started(event_log)
    assert [r.outcome for r in (await svc.apply(JOB)).results] == [ACCEPTED]
    assert await submitted(event_log) == ["short-job", "short-job"]


async def test_another_object_under_a_finished_name_is_a_new_job(event_log: EventLog) -> None:
    """On a cluster a Job deleted and made again while admission was away comes with a new uid:
    a new object, submitted anew (the same uid met again is the ended job)."""
    svc = await started(event_log)
    first = JOB.replace("tessera.io/duration: \"3\"", "tessera.io/duration: \"3\", tessera.io/object-uid: u1")
    await svc.apply(first)
    svc = await end(svc, "short-job", "Completed")
    assert [r.outcome for r in (await svc.apply(first)).results] == [UNCHANGED]
    assert [r.outcome for r in (await svc.apply(first.replace("u1", "u2"))).results] == [ACCEPTED]
    assert await submitted(event_log) == ["short-job", "short-job"]


async def test_a_suspended_job_applied_again_is_unchanged_and_told_to_resume(event_log: EventLog) -> None:
    svc = await started(event_log)
    await svc.apply(JOB)
    svc = await end(svc, "short-job", "Aborted")
    reply = await svc.apply(JOB)
    assert [r.outcome for r in reply.results] == [UNCHANGED]
    assert reply.results[0].warnings == ("Job default/short-job is Aborted: applying it again does not run "
                                         "it; `tessera job resume short-job -n default` runs it again",)  # fmt: skip
