"""A live job's task set changes (`JobUpdated`): what Volcano's update webhook allows, how the
projection keeps the pods' state across it, how the gang and the queue service act on it, and
that a stored projection restores to the same state."""

from __future__ import annotations

import msgspec

from contracts.events import (
    EvictionRequested,
    JobPhaseChanged,
    JobSubmitted,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    QueueCreated,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import snapshot as st
from services.core.scheduling.decide import decide
from services.core.scheduling.projection_state import projection_of, state_of
from services.core.workload.jobupdate import JOB_RULE, OBJECT_UID, JobChange, Unset, judge_update
from services.queue import flow as fl

NS, NAME, KEY = "ml", "train", "ml/train"


def spec(replicas: int, min_available: int | None = None, **job: object) -> JobSpec:
    task = TaskSpec(name="worker", replicas=replicas, cpu_milli=1000, min_available=replicas)
    return JobSpec(namespace=NS, name=NAME, kind="Job", min_available=min_available or replicas,
                   tasks=(task,), annotations={OBJECT_UID: "u1"}, **job)  # type: ignore[arg-type]  # fmt: skip


def pod(i: int) -> str:
    return f"{NAME}-worker-{i}"


class Log:
    """Events in order, folded into the queue service's `Flow` (which holds the projection)."""

    def __init__(self, nodes: int = 4) -> None:
        self.flow = fl.Flow()
        self.seq = 0
        self.add(QueueCreated(spec=QueueSpec(name="default")))
        for n in range(nodes):  # one 1-cpu pod per node
            self.add(NodeRegistered(node=f"n{n}", cpu_milli=1000, memory_mib=1024))

    def add(self, *events: object) -> None:
        for e in events:
            self.seq += 1
            self.flow.apply(self.seq, e)  # type: ignore[arg-type]

    def run(self, *pods: int) -> None:
        for i in pods:
            placed = TaskPlacement(task=pod(i), node=f"n{i}")
            self.add(PlacementCommitted(namespace=NS, name=NAME, placements=(placed,)),
                     TaskStarted(namespace=NS, name=NAME, task=pod(i), node=f"n{i}"))

    @property
    def tasks(self) -> dict[str, str]:
        return {p: t.status for p, t in self.flow.projection.tasks[KEY].items()}

    def placed(self) -> list[str]:
        d = decide(self.flow.projection.snapshot())
        return sorted(p.task for jp in d.placements if not jp.pipelined for p in jp.placements)


# --- what may change ------------------------------------------------------------------------------


def test_replicas_min_available_and_priority_class_may_change() -> None:
    change = judge_update(spec(2), spec(4, priority_class="high", priority=100))
    assert change.spec == spec(4, priority_class="high", priority=100) and not change.refusals
    assert change.what == "tasks[worker].replicas 2 → 4; minAvailable 2 → 4; priorityClassName (none) → high"
    assert judge_update(spec(2), spec(2)).spec is None  # the same again: nothing to record


def test_any_other_change_is_refused_naming_the_field_and_the_rule() -> None:
    assert judge_update(spec(2), spec(2, max_retry=5)).refusals == (f"spec.maxRetry: {JOB_RULE}",)
    assert judge_update(spec(2), spec(2, queue="other")).refusals == (f"spec.queue: {JOB_RULE}",)
    bigger = msgspec.structs.replace(spec(2), tasks=(msgspec.structs.replace(spec(2).tasks[0], cpu_milli=2000),))
    assert judge_update(spec(2), bigger).refusals == (f"spec.tasks[0].template: {JOB_RULE}",)
    renamed = msgspec.structs.replace(spec(2), tasks=(msgspec.structs.replace(spec(2).tasks[0], name="w"),))
    [why] = judge_update(spec(2), renamed).refusals
    assert why.startswith("spec.tasks: Forbidden") and "cannot be added, removed or renamed" in why
    recreated = msgspec.structs.replace(spec(3), annotations={OBJECT_UID: "u2"})
    assert "delete it first" in judge_update(spec(2), recreated).refusals[0]


def test_a_podgroup_takes_new_member_pods_and_a_new_queue() -> None:
    """Volcano's scheduler cache re-reads a PodGroup's `spec.queue` at every update (no webhook
    judges one): the edit moves the job; a queue its object leaves unset is the one it has."""
    def group(*pods: str, queue: str = "default", min_member: int = 2, **extra: str) -> JobSpec:
        tasks = tuple(TaskSpec(name="", pod_names=(p,), cpu_milli=1000,
                               annotations={"uid": p, **extra}) for p in pods)  # fmt: skip
        return JobSpec(namespace=NS, name="pg", kind="PodGroup", queue=queue, min_available=min_member, tasks=tasks)

    old = group("a", "b")
    joined = judge_update(old, group("a", "b", "c", **{"hami.io/bound": "x"}))  # the binder annotated a, b
    assert [t.pod_names for t in joined.spec.tasks] == [("a",), ("b",), ("c",)]  # type: ignore[union-attr]
    assert joined.spec.tasks[0] == old.tasks[0] and joined.what == "pods added: c"  # type: ignore[union-attr]
    assert judge_update(old, group("a", min_member=1)).what == "pods removed: b; minAvailable 2 → 1"
    moved = judge_update(old, group("a", "b", queue="q"))
    assert moved.spec is not None and moved.spec.queue == "q" and moved.what == "queue default → q"
    assert judge_update(old, group("a", "b", queue="q"), Unset(queue=True)) == JobChange()


# --- how the log's state follows ----------------------------------------------------------------------


def test_scale_up_adds_pending_pods_the_scheduler_places() -> None:
    log = Log()
    log.add(JobSubmitted(spec=spec(2)), JobPhaseChanged(namespace=NS, name=NAME, phase="Running"))
    log.run(0, 1)
    log.add(JobUpdated(namespace=NS, name=NAME, spec=spec(4)))
    assert log.tasks == {pod(0): st.RUNNING, pod(1): st.RUNNING, pod(2): st.PENDING, pod(3): st.PENDING}
    assert log.flow.projection.jobs[KEY].spec.min_available == 4
    assert log.placed() == [pod(2), pod(3)]  # the gang of 4: two run, two more fit
    assert fl.job_events(log.flow, KEY) == []  # nothing to stop


def test_scale_down_stops_the_removed_running_pods_once_and_they_leave_when_finished() -> None:
    log = Log()
    log.add(JobSubmitted(spec=spec(4)), JobPhaseChanged(namespace=NS, name=NAME, phase="Running"))
    log.run(0, 1, 2, 3)
    log.add(JobUpdated(namespace=NS, name=NAME, spec=spec(2)))
    owed = fl.job_events(log.flow, KEY)
    assert owed == [EvictionRequested(namespace=NS, name=NAME, task=pod(i), reason="scaled down") for i in (2, 3)]
    log.add(*owed)
    assert log.tasks[pod(2)] == st.RELEASING and fl.job_events(log.flow, KEY) == []  # asked once
    # a restart restores the same state from a stored projection (leaving is derived, not stored)
    restored = projection_of(msgspec.msgpack.decode(msgspec.msgpack.encode(state_of(log.flow.projection)),
                                                    type=type(state_of(log.flow.projection))))  # fmt: skip
    assert restored.leaving == log.flow.projection.leaving == {KEY: {pod(2), pod(3)}}
    log.add(TaskFinished(namespace=NS, name=NAME, task=pod(2), node="n2", reason="evicted"),
            TaskFinished(namespace=NS, name=NAME, task=pod(3), node="n3", reason="evicted"))
    assert log.tasks == {pod(0): st.RUNNING, pod(1): st.RUNNING}  # gone, not back to Pending
    assert log.flow.projection.leaving == {} and log.placed() == []


def test_removed_pods_that_never_ran_go_at_once() -> None:
    log = Log(nodes=2)
    log.add(JobSubmitted(spec=spec(4, min_available=2)), JobPhaseChanged(namespace=NS, name=NAME, phase="Running"))
    log.run(0, 1)
    log.add(JobUpdated(namespace=NS, name=NAME, spec=spec(2)))
    assert log.tasks == {pod(0): st.RUNNING, pod(1): st.RUNNING} and fl.job_events(log.flow, KEY) == []


def test_a_lower_min_available_lets_the_gang_run_on_what_fits() -> None:
    log = Log(nodes=3)
    log.add(JobSubmitted(spec=spec(4)), JobPhaseChanged(namespace=NS, name=NAME, phase="Inqueue"))
    assert log.placed() == []  # 4 of 4 needed, 3 fit: all or nothing
    log.add(JobUpdated(namespace=NS, name=NAME, spec=spec(4, min_available=3)))
    assert len(log.placed()) == 3
