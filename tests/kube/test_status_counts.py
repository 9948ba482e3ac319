"""A Volcano Job's and its PodGroup's status on the API server: a change of the pod counts alone
(a gang's pods starting or ending one by one) is written at most once per `COUNTS_PERIOD` per
object, the latest counts once the period is over; a change of phase is written at once. Each
pod's start and end was a write of both (5.4 status writes per pod in a churn of Volcano Jobs
at 1000 QPS). The job controller is driven here by the log's events on an in-memory log, with
its own clock, against the emulator (or a real API server)."""

from __future__ import annotations

from typing import Any

from contracts.events import (
    JobPhaseChanged,
    JobSubmitted,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.kube import volcano
from services.kube.jobcontroller import COUNTS_PERIOD, JobController
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.test_job_ttl import one_pod_job
from tests.processes import wait_until

PODS = [f"gang-w-{i}" for i in range(3)]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def shown(cluster: Cluster) -> dict[str, Any]:
    job = await cluster.kube.get(volcano.jobs_path("default", "gang"))
    return job.get("status") or {}


async def test_pod_counts_alone_are_written_once_per_period_and_a_phase_at_once(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    body = one_pod_job("gang", None)
    body["spec"]["minAvailable"] = 3
    body["spec"]["tasks"][0]["replicas"] = 3
    made = await cluster.kube.create(volcano.jobs_path("default"), body)
    clock = Clock()
    controller = JobController(MemoryLog(), cluster.kube, clock=clock)
    controller.jobs["default/gang"] = volcano.typed(made, "Job")
    spec = JobSpec(namespace="default", name="gang", kind="Job", min_available=3, queue="default",
                   annotations={volcano.OBJECT_UID: volcano.uid(made)},
                   tasks=(TaskSpec(name="w", replicas=3),))  # fmt: skip
    seq = 0

    async def then(*events: object) -> dict[str, Any]:
        nonlocal seq
        for event in events:
            seq += 1
            controller.fold(seq, event)  # type: ignore[arg-type]
        await controller.reconcile("default/gang")
        return await shown(cluster)

    status = await then(JobSubmitted(spec=spec), PlacementCommitted(
        namespace="default", name="gang", placements=tuple(TaskPlacement(task=p, node="n1") for p in PODS)))  # fmt: skip
    assert status["state"]["phase"] == "Pending" and status["pending"] == 3
    status = await then(*(TaskStarted(namespace="default", name="gang", task=p, node="n1") for p in PODS),
                        JobPhaseChanged(namespace="default", name="gang", phase="Running"))  # (the queue's)
    assert (status["state"]["phase"], status["running"]) == ("Running", 3)  # a phase: at once
    writes = controller.writes

    # one pod ends: only the counts change, within the period of the last write — not written
    status = await then(TaskFinished(namespace="default", name="gang", task=PODS[0], node="n1", exit_code=0))
    assert (status["running"], status["succeeded"]) == (3, 0)
    assert controller.writes == writes
    # the period over: the job was marked for then, and its latest counts are written
    clock.now += COUNTS_PERIOD

    async def marked() -> bool:
        return "default/gang" in controller.dirty

    await wait_until(marked, 10, "the job marked again once its counts' period is over")
    status = await then()
    assert (status["running"], status["succeeded"]) == (2, 1)
    # the last pods end within the period: the Job's end is a phase, written at once
    status = await then(*(TaskFinished(namespace="default", name="gang", task=p, node="n1", exit_code=0)
                          for p in PODS[1:]),
                        JobPhaseChanged(namespace="default", name="gang", phase="Completed", reason="all pods finished"))  # fmt: skip
    assert status["state"]["phase"] == "Completed" and (status["running"], status["succeeded"]) == (0, 3), status
