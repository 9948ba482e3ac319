"""What the kube edge's job controller and pod status writer hold of a job is dropped once the
job is deleted (the status writer at once; the controller once `keep` more were deleted after
it, for a late reconcile): they run for months, and before, each grew by every job the cluster
ever ran — its spec, a sequence per pod, its tasks — though the log itself forgets them."""

from __future__ import annotations

from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.kube.jobcontroller import JobController
from services.kube.status import PodStatusWriter
from services.runtime.eventlog.memory import MemoryLog

JOBS = DEFAULT_KEEP_FINISHED + 50


def run_jobs(fold: object, jobs: int, *, seq: int = 0) -> int:
    """`jobs` two-pod Volcano Jobs through submission, a placement, an eviction, their end and
    their deletion, folded as the log would bring them; the last sequence used."""
    for j in range(jobs):
        spec = JobSpec(namespace="ns", name=f"job-{j}", kind="Job", min_available=2,
                       tasks=(TaskSpec(name="worker", replicas=2),))  # fmt: skip
        pods = [f"job-{j}-worker-{i}" for i in range(2)]
        for event in (JobSubmitted(spec=spec), PlacementCommitted(namespace="ns", name=spec.name, placements=tuple(
                          TaskPlacement(task=p, node="n") for p in pods)),
                      EvictionRequested(namespace="ns", name=spec.name, task=pods[0], reason="preempted"),
                      *(TaskFinished(namespace="ns", name=spec.name, task=p, node="n", exit_code=0,
                                     reason="evicted") for p in pods),
                      JobDeleted(namespace="ns", name=spec.name)):  # fmt: skip
            seq += 1
            fold(seq, event)  # type: ignore[operator]
    return seq


def test_the_job_controller_holds_only_the_last_deleted_jobs() -> None:
    controller = JobController(MemoryLog(), kube=None)  # type: ignore[arg-type]
    seq = run_jobs(controller.fold, JOBS)
    held = {f"ns/job-{j}" for j in range(JOBS - DEFAULT_KEEP_FINISHED, JOBS)}
    for name, store in (("specs", controller.specs), ("reset", controller.reset)):
        assert set(store) == held, name  # the newest deleted ones, for a late reconcile
    assert controller.placed <= held and set(controller.last_tasks) <= held
    # a name used again after it was forgotten starts afresh, and is held while live
    run_jobs(controller.fold, 1, seq=seq)
    assert "ns/job-0" in controller.specs and set(controller.reset["ns/job-0"]) == {"job-0-worker-0", "job-0-worker-1"}


def test_the_status_writer_holds_nothing_of_a_deleted_job() -> None:
    writer = PodStatusWriter(MemoryLog(), kube=None)  # type: ignore[arg-type]
    run_jobs(lambda _seq, event: writer.fold(event), JOBS)
    assert not writer.specs and not writer.placed and not writer.verdict


async def test_a_job_ended_long_before_its_status_is_written_still_shows_how_it_ended() -> None:
    """The flow forgets an ended job once `keep` more ended after it; a job controller behind
    the log (an API server busy with a churn of Jobs) reconciled a Completed Job only after
    that, and wrote it Pending — for good: its user never saw it end (benchmarks.kube_churn,
    7 of 400 Jobs). Its phase, retries and tasks are held as the log last had them."""
    from services.core.workload.jobupdate import OBJECT_UID
    from services.kube import volcano

    patched: list[dict] = []

    class Server:
        async def patch(self, path: str, body: dict) -> dict:
            patched.append(body)
            return {}

    controller = JobController(MemoryLog(), Server())  # type: ignore[arg-type]
    seq = 0
    for j in range(JOBS):
        spec = JobSpec(namespace="ns", name=f"job-{j}", kind="Job", min_available=2, queue="q",
                       annotations={OBJECT_UID: f"uid-{j}"}, tasks=(TaskSpec(name="worker", replicas=2),))  # fmt: skip
        pods = [f"job-{j}-worker-{i}" for i in range(2)]
        for event in (JobSubmitted(spec=spec),
                      PlacementCommitted(namespace="ns", name=spec.name, placements=tuple(
                          TaskPlacement(task=p, node="n") for p in pods)),
                      *(TaskStarted(namespace="ns", name=spec.name, task=p, node="n") for p in pods),
                      *(TaskFinished(namespace="ns", name=spec.name, task=p, node="n") for p in pods),
                      JobPhaseChanged(namespace="ns", name=spec.name, phase="Completed", reason="all pods finished")):  # fmt: skip
            seq += 1
            controller.fold(seq, event)
    assert "ns/job-0" not in controller.flow.shown  # forgotten by the flow: 150 ended after it
    controller.jobs["ns/job-0"] = {"apiVersion": volcano.BATCH, "kind": "Job", "spec": {},
                                   "metadata": {"name": "job-0", "namespace": "ns", "uid": "uid-0"}}  # fmt: skip
    await controller.reconcile("ns/job-0")
    [status] = [b["status"] for b in patched]
    assert status["state"]["phase"] == "Completed" and status["succeeded"] == 2, status
