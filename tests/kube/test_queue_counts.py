"""A Queue's PodGroup counts on a cluster are the phases its PodGroups show, as Volcano's queue
controller counts them (`lifecycle.podgroup_phase_of`): the log's job phases were counted, so
`completed` stayed 0 (ended jobs leave the projection while a plain pod's group stays,
Completed, until it is deleted). A Volcano Job being ended or restarted has no group at all:
Volcano's `killJob` deletes it each time it runs (it was counted Running, or Pending)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.events import JobDeleted, JobPhaseChanged, JobSubmitted, QueueCreated
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.cli import kubeobjects
from services.kube import volcano
from services.kube.jobcontroller import JobController
from services.runtime.eventlog.memory import MemoryLog

COUNTS = ("pending", "inqueue", "running", "unknown", "completed")


class Server:
    """Takes the status patches (the only call a queue status pass makes)."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, dict[str, Any]]] = []

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patched.append((path, body))
        return {}


def job(name: str, kind: str) -> JobSpec:
    return JobSpec(namespace="default", name=name, kind=kind, queue="q", min_available=1,
                   tasks=(TaskSpec(name="w", replicas=1),))  # fmt: skip


async def counts(controller: JobController, server: Server) -> dict[str, int]:
    controller.dirty_queues.add("q")
    await controller.queue_statuses()
    status = server.patched[-1][1]["status"] if server.patched else {}
    controller.queues["q"]["status"] = {**controller.queues["q"].get("status", {}), **status}
    return {k: controller.queues["q"]["status"].get(k, 0) for k in COUNTS}


async def test_a_queue_counts_its_podgroups_by_the_phase_they_show() -> None:
    server = Server()
    controller = JobController(MemoryLog(), server)  # type: ignore[arg-type]
    seq = 0

    def fold(*events: object) -> None:
        nonlocal seq
        for event in events:
            seq += 1
            controller.fold(seq, event)  # type: ignore[arg-type]

    fold(QueueCreated(spec=QueueSpec(name="q")))
    controller.queues["q"] = {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": "q"}}
    fold(JobSubmitted(spec=job("solo", "Pod")), JobPhaseChanged(namespace="default", name="solo", phase="Running"),
         JobSubmitted(spec=job("group", "PodGroup")), JobPhaseChanged(namespace="default", name="group", phase="Running"),
         JobSubmitted(spec=job("ending", "Job")), JobPhaseChanged(namespace="default", name="ending", phase="Running"),
         JobSubmitted(spec=job("again", "Job")), JobPhaseChanged(namespace="default", name="again", phase="Running"))  # fmt: skip
    assert await counts(controller, server) == {"pending": 0, "inqueue": 0, "running": 4, "unknown": 0, "completed": 0}

    fold(JobPhaseChanged(namespace="default", name="ending", phase="Terminating"),  # killJob: its group deleted
         JobPhaseChanged(namespace="default", name="again", phase="Restarting"),  # killJob: deleted until Pending
         JobPhaseChanged(namespace="default", name="group", phase="Terminating"),  # its own group: pods still stop
         JobPhaseChanged(namespace="default", name="solo", phase="Completed", reason="pods finished"))  # fmt: skip
    assert await counts(controller, server) == {"pending": 0, "inqueue": 0, "running": 1, "unknown": 0, "completed": 1}

    fold(JobPhaseChanged(namespace="default", name="again", phase="Pending"),  # restarted: syncJob makes it again
         JobPhaseChanged(namespace="default", name="ending", phase="Terminated", reason="terminated"),
         JobDeleted(namespace="default", name="solo"))  # the pod deleted: its group with it  # fmt: skip
    assert await counts(controller, server) == {"pending": 1, "inqueue": 0, "running": 1, "unknown": 0, "completed": 0}


@pytest.mark.parametrize("phase", ["Aborting", "Terminating", "Completing", "Failing", "Restarting"])
def test_a_volcano_job_being_killed_has_no_podgroup_in_get_pg_or_the_counts(phase: str) -> None:
    """`tessera get pg` and a local Queue's counts (`kubeobjects`) agree with the cluster's: a
    Volcano Job that `killJob` is ending or restarting has no group; a plain pod's does."""
    records = [{"kind": "Job", "phase": phase, "queue": "q"}, {"kind": "Pod", "phase": phase, "queue": "q"}]
    assert [kubeobjects.podgroup_phase(r) for r in records] == ["", "Pending" if phase == "Restarting" else "Running"]
    counts = kubeobjects.queue_counts(records)["q"]
    assert sum(counts.values()) == 1
