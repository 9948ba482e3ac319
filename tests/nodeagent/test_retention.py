"""The node runtime forgets ended jobs beyond its `keep` (issue 12 item 7): their profiles and
finished runs go; a run still stopping when its job is forgotten goes once it finished; a job
submitted again is live and stays; nothing live is touched."""

from __future__ import annotations

from dataclasses import replace

from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    PlacementCommitted,
    TaskPlacement,
)
from contracts.workloads import JobSpec, TaskSpec
from services.nodeagent.runtime import NodeRuntime, decide, evolve

HOSTED = replace(NodeRuntime(nodes=frozenset({"n1"})), keep=1)


def run_job(state: NodeRuntime, name: str, now: float = 0.0) -> NodeRuntime:
    """Submit a one-pod job of 1 s, commit it to n1, start it and let it finish."""
    spec = JobSpec(namespace="ns", name=name, tasks=(TaskSpec(name="w", replicas=1, duration=1.0),))
    state = evolve(state, JobSubmitted(spec=spec))
    commit = PlacementCommitted(namespace="ns", name=name, placements=(TaskPlacement(task=f"{name}-w-0", node="n1"),))
    state = evolve(state, commit, f"commit-{name}")
    for at in (now, now + 1.0):
        for e in decide(state, at):
            state = evolve(state, e.event)
    return state


def completed(name: str) -> JobPhaseChanged:
    return JobPhaseChanged(namespace="ns", name=name, phase="Completed", reason="all pods finished")


def test_ended_jobs_beyond_keep_are_forgotten_live_ones_are_not() -> None:
    state = run_job(HOSTED, "a")
    state = run_job(state, "b")
    state = run_job(state, "live")  # finished its pod, but the job has not ended
    state = evolve(state, completed("a"))
    assert set(state.profiles) == {("ns", "a"), ("ns", "b"), ("ns", "live")}
    state = evolve(state, completed("b"))  # a falls out
    assert state.ended == (("ns", "b"),)
    assert set(state.profiles) == {("ns", "b"), ("ns", "live")}
    assert {k[1] for k in state.runs} == {"b", "live"}

    state = run_job(state, "b")  # submitted again: live, leaves the order
    assert state.ended == ()
    state = evolve(state, JobDeleted(namespace="ns", name="live"))
    state = evolve(state, completed("c"))  # "live" falls out; "b" (running again) stays
    assert set(state.profiles) == {("ns", "b")}
    assert {k[1] for k in state.runs} == {"b"}


def test_a_run_still_stopping_when_its_job_is_forgotten_goes_once_finished() -> None:
    spec = JobSpec(namespace="ns", name="slow", tasks=(TaskSpec(name="w", replicas=1),))  # runs forever
    state = evolve(HOSTED, JobSubmitted(spec=spec))
    commit = PlacementCommitted(namespace="ns", name="slow", placements=(TaskPlacement(task="slow-w-0", node="n1"),))
    state = evolve(state, commit, "commit-slow")
    for e in decide(state, 0.0):
        state = evolve(state, e.event)  # started
    state = evolve(state, EvictionRequested(namespace="ns", name="slow", task="slow-w-0", reason="job Failed"))
    state = evolve(state, JobPhaseChanged(namespace="ns", name="slow", phase="Failed", reason="x"))
    state = evolve(state, completed("other"))  # "slow" falls out while its run is stopping
    assert ("ns", "slow", "slow-w-0") in state.runs and ("ns", "slow", "slow-w-0") in state.todo
    out = decide(state, 1.0)
    assert [type(e.event).__name__ for e in out] == ["TaskFinished"]  # still reported
    state = evolve(state, out[0].event)
    assert not state.runs and not state.todo and not state.ends
