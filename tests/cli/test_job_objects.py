"""`tessera get vcjob X -o yaml` prints the Job as Volcano's API server holds it: the admitted
spec's lifecycle (job and task policies, minSuccess) beside queue, minAvailable, maxRetry and
the tasks, and the status its job controller writes — pod counts by kind, taskStatusCount,
version, a condition per phase the Job showed, runningDuration once it was killed. The spec
had no policies; the status only state and two counts."""

from __future__ import annotations

import msgspec

from contracts.envelope import TYPE
from contracts.events import JobPhaseChanged, JobSubmitted, QueueCreated, TaskStarted
from contracts.subjects import Subjects
from services.cli.get import listing_of
from services.cli.kubeobjects import TIME_HEADER
from services.core.workload import admit, load_documents
from services.runtime.eventlog import StoredMessage

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 2
  maxRetry: 2
  policies: [{event: PodFailed, action: AbortJob}]
  minSuccess: 1
  tasks:
    - replicas: 2
      name: worker
      policies: [{event: TaskCompleted, action: CompleteJob}]
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


def _log() -> list[StoredMessage]:
    work = admit(load_documents(JOB))  # as the admission service appends it: no manifest kept
    assert not work.rejections, work.rejections
    spec = work.jobs[0]
    s = Subjects()
    job = s.job("default", "train")
    events: list[tuple[str, object, str]] = [
        (s.queue("default"), QueueCreated(spec=work.queues[0] if work.queues else _default()), "2026-12-01T00:00:00Z"),
        (job, JobSubmitted(spec=spec), "2026-12-01T00:00:01.5Z"),
        (job, JobPhaseChanged(namespace="default", name="train", phase="Inqueue"), "2026-12-01T00:00:02Z"),
        (job, TaskStarted(namespace="default", name="train", task="train-worker-0", node="n"), "2026-12-01T00:00:03Z"),
        (job, TaskStarted(namespace="default", name="train", task="train-worker-1", node="n"), "2026-12-01T00:00:04Z"),
        (job, JobPhaseChanged(namespace="default", name="train", phase="Aborting", reason="AbortJob on PodFailed"),
         "2026-12-01T01:00:04Z"),
        (job, JobPhaseChanged(namespace="default", name="train", phase="Aborted", reason="AbortJob on PodFailed"),
         "2026-12-01T01:00:09Z"),
    ]  # fmt: skip
    return [StoredMessage(i, subject, msgspec.json.encode(ev), {TYPE: type(ev).__name__, TIME_HEADER: at})
            for i, (subject, ev, at) in enumerate(events, 1)]  # fmt: skip


def _default() -> object:
    from services.core.scheduling.lifecycle import default_queues

    return next(q for q in default_queues(()) if q.name == "default")


def test_get_vcjob_prints_the_written_spec_and_volcanos_status() -> None:
    got, _ = listing_of(_log(), "jobs", None)
    (obj,) = got.objects
    spec, status = obj["spec"], obj["status"]
    assert spec["policies"] == [{"event": "PodFailed", "action": "AbortJob"}] and spec["minSuccess"] == 1
    (task,) = spec["tasks"]
    assert task["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert (spec["queue"], spec["minAvailable"], spec["maxRetry"], task["replicas"]) == ("default", 2, 2, 2)
    assert status["state"]["phase"] == "Aborted"
    assert [(c["status"], c["lastTransitionTime"]) for c in status["conditions"]] == [
        ("Pending", "2026-12-01T00:00:01Z"), ("Running", "2026-12-01T00:00:04Z"),
        ("Aborting", "2026-12-01T01:00:04Z"), ("Aborted", "2026-12-01T01:00:09Z")]  # fmt: skip
    assert status["version"] == 1  # the kill that ended it
    assert status["runningDuration"] == "1h0m3s"  # creation to the kill
    assert status["minAvailable"] == 2


def test_get_vcjob_counts_pods_as_the_job_controller() -> None:
    messages = _log()[:5]  # both pods started, the job running
    got, _ = listing_of(messages, "jobs", None)
    status = got.objects[0]["status"]
    pods = {p["name"]: p["phase"] for p in listing_of(messages, "pods", None)[0].records}
    want: dict[str, int] = {}
    for phase in pods.values():
        key = {"Running": "running", "Succeeded": "succeeded", "Failed": "failed"}.get(phase, "pending")
        want[key] = want.get(key, 0) + 1
    assert {k: status[k] for k in want} == want
    assert status["taskStatusCount"] == {"worker": {"phase": {k.capitalize(): v for k, v in want.items()}}}
    assert "version" not in status and "runningDuration" not in status  # never killed
