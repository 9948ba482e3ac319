"""The pure node runtime: start, finish after the duration, eviction, deletion, redelivery."""

from __future__ import annotations

from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobSubmitted,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.nodeagent.runtime import (
    Emission,
    NodeRuntime,
    decide,
    evolve,
    next_deadline,
    running,
)

HOSTED = NodeRuntime(nodes=frozenset({"n1", "n2"}))


def submitted(duration: float | None = 5.0, exit_code: int = 0) -> JobSubmitted:
    task = TaskSpec(name="w", replicas=3, duration=duration, exit_code=exit_code)
    return JobSubmitted(spec=JobSpec(namespace="ns", name="train", tasks=(task,)))


def commit(*placements: tuple[str, str]) -> PlacementCommitted:
    return PlacementCommitted(
        namespace="ns",
        name="train",
        placements=tuple(TaskPlacement(task=t, node=n) for t, n in placements),
    )


def step(state: NodeRuntime, now: float) -> tuple[NodeRuntime, list[Emission]]:
    """decide, then fold what was decided: what the shell does after every event and timer."""
    out = decide(state, now)
    for e in out:
        state = evolve(state, e.event)
    return state, out


def kinds(out: list[Emission]) -> list[tuple[str, str, int, str, float]]:
    return [
        (type(e.event).__name__, e.event.task, getattr(e.event, "exit_code", 0),
         getattr(e.event, "reason", ""), e.event.at)
        for e in out
    ]  # fmt: skip


def test_committed_tasks_on_hosted_nodes_start_and_finish_at_their_duration() -> None:
    s = evolve(HOSTED, submitted(duration=5.0))
    s = evolve(s, commit(("train-w-0", "n1"), ("train-w-1", "n2"), ("train-w-2", "other")), "c1")
    s, out = step(s, 100.0)
    assert kinds(out) == [
        ("TaskStarted", "train-w-0", 0, "", 100.0),
        ("TaskStarted", "train-w-1", 0, "", 100.0),
    ]
    assert [e.msg_id for e in out] == ["c1/train-w-0/started", "c1/train-w-1/started"]
    assert out[1].event.node == "n2"
    assert next_deadline(s) == 105.0
    s, out = step(s, 104.9)
    assert out == []
    s, out = step(s, 107.0)  # a late check: the run still ends at started + duration
    assert kinds(out) == [
        ("TaskFinished", "train-w-0", 0, "", 105.0),
        ("TaskFinished", "train-w-1", 0, "", 105.0),
    ]
    assert out[0].msg_id == "c1/train-w-0/finished"
    assert next_deadline(s) is None and running(s) == []
    assert step(s, 200.0)[1] == []


def test_exit_code_from_the_spec_and_no_duration_runs_forever() -> None:
    s = evolve(HOSTED, submitted(duration=1.0, exit_code=3))
    s = evolve(s, commit(("train-w-0", "n1")), "c1")
    s, _ = step(s, 0.0)
    assert kinds(step(s, 1.0)[1]) == [("TaskFinished", "train-w-0", 3, "", 1.0)]
    forever = evolve(evolve(HOSTED, submitted(duration=None)), commit(("train-w-0", "n1")), "c1")
    forever, out = step(forever, 0.0)
    assert len(out) == 1 and next_deadline(forever) is None
    assert step(forever, 1e9)[1] == []
    unknown_job = evolve(HOSTED, commit(("train-w-0", "n1")), "c1")  # no JobSubmitted seen
    assert next_deadline(step(unknown_job, 0.0)[0]) is None


def test_eviction_kills_one_run_and_a_later_commit_is_a_new_run() -> None:
    s = evolve(HOSTED, submitted())
    s = evolve(s, commit(("train-w-0", "n1"), ("train-w-1", "n1")), "c1")
    s, _ = step(s, 0.0)
    s = evolve(s, EvictionRequested(namespace="ns", name="train", task="train-w-1", reason="x"))
    s, out = step(s, 2.0)
    assert kinds(out) == [("TaskFinished", "train-w-1", 137, "evicted", 2.0)]
    assert step(s, 2.5)[1] == []
    # evicting a finished run, or a task not on our nodes, says nothing
    s = evolve(s, EvictionRequested(namespace="ns", name="train", task="train-w-1", reason="x"))
    s = evolve(s, EvictionRequested(namespace="ns", name="train", task="nope", reason="x"))
    assert step(s, 3.0)[1] == []
    s = evolve(s, commit(("train-w-1", "n2")), "c2")  # placed again
    s, out = step(s, 3.0)
    assert [e.msg_id for e in out] == ["c2/train-w-1/started"]
    assert out[0].event.node == "n2"


def test_job_deletion_kills_every_unfinished_run_including_unstarted_ones() -> None:
    s = evolve(HOSTED, submitted())
    s = evolve(s, commit(("train-w-0", "n1")), "c1")
    s, _ = step(s, 0.0)
    s = evolve(s, commit(("train-w-1", "n1")), "c2")  # committed, not yet started
    s = evolve(s, JobDeleted(namespace="ns", name="train"))
    s, out = step(s, 1.0)
    assert kinds(out) == [
        ("TaskFinished", "train-w-0", 137, "deleted", 1.0),
        ("TaskFinished", "train-w-1", 137, "deleted", 1.0),
    ]


def test_redelivered_commit_and_echoed_reports_change_nothing() -> None:
    s = evolve(HOSTED, submitted())
    s = evolve(s, commit(("train-w-0", "n1")), "c1")
    s, out = step(s, 0.0)
    again = evolve(s, commit(("train-w-0", "n1")), "c1")  # redelivered
    assert again == s and decide(again, 1.0) == []
    echoed = evolve(s, out[0].event)  # our own TaskStarted read back from the log
    assert echoed == s
    s, fin = step(s, 5.0)
    assert evolve(s, fin[0].event) == s
    # A report written by someone else (the monitor's "node lost") ends the run here too.
    t = evolve(evolve(HOSTED, submitted()), commit(("train-w-0", "n1")), "c1")
    t, _ = step(t, 0.0)
    lost = TaskFinished(namespace="ns", name="train", task="train-w-0", node="n1", exit_code=-1)
    t = evolve(t, lost)
    assert decide(t, 10.0) == [] and next_deadline(t) is None


def test_replaying_the_log_rebuilds_the_state_and_resumes_timers() -> None:
    started = TaskStarted(namespace="ns", name="train", task="train-w-0", node="n1", at=50.0)
    s = evolve(HOSTED, submitted(duration=5.0))
    s = evolve(s, commit(("train-w-0", "n1"), ("train-w-1", "n1")), "c1")
    s = evolve(s, started)  # the agent crashed after starting w-0 only
    assert next_deadline(s) == 55.0
    s, out = step(s, 53.0)
    assert kinds(out) == [("TaskStarted", "train-w-1", 0, "", 53.0)]
    s, out = step(s, 60.0)
    assert kinds(out) == [
        ("TaskFinished", "train-w-0", 0, "", 55.0),
        ("TaskFinished", "train-w-1", 0, "", 58.0),
    ]


def test_a_second_commit_of_the_same_proposal_after_the_run_finished_is_no_new_run() -> None:
    """Older allocators committed a proposal again once the duplicate window had passed; the
    node must not start the pod a second time when it meets such a commit (live or replaying)."""
    from msgspec.structs import replace

    first = replace(commit(("train-w-0", "n1")), proposal_seq=7)
    state = evolve(evolve(HOSTED, submitted(duration=1.0)), first, "commit-1")
    state, out = step(state, 100.0)
    state, out2 = step(state, 200.0)
    assert [k[0] for k in kinds(out + out2)] == ["TaskStarted", "TaskFinished"]
    state = evolve(state, first, "commit-2")  # same proposal, another commit message
    assert decide(state, 300.0) == []
    again = replace(first, proposal_seq=9)  # a new proposal (the task placed anew) is a new run
    state, out = step(evolve(state, again, "commit-3"), 400.0)
    assert [k[0] for k in kinds(out)] == ["TaskStarted"]


def test_a_pod_deleted_by_a_user_is_reported_as_a_deleted_pod() -> None:
    """`tessera delete pod` of a Volcano Job's pod asks its stop with reason `pod deleted`: the
    node reports it as the node agent on a cluster reports a deleted pod, so the job's
    PodEvicted policies answer it (an ordinary eviction stays `evicted`, which answers none)."""
    s = evolve(HOSTED, submitted())
    s = evolve(s, commit(("train-w-0", "n1")), "c1")
    s, _ = step(s, 0.0)
    s = evolve(s, EvictionRequested(namespace="ns", name="train", task="train-w-0", reason="pod deleted"))
    s, out = step(s, 1.0)
    assert kinds(out) == [("TaskFinished", "train-w-0", 137, "pod deleted", 1.0)]
