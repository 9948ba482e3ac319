"""The queue's flow forgets ended jobs beyond its `keep` (issue 12 item 7) — retries, pods and
name — but never a suspended job, which `resume` needs."""

from __future__ import annotations

from contracts.events import JobPhaseChanged, JobSubmitted, TaskStarted
from contracts.workloads import JobSpec, TaskSpec
from services.core.retention import FinishedOrder
from services.queue import flow as fl


def submit(flow: fl.Flow, seq: int, name: str) -> None:
    spec = JobSpec(namespace="ns", name=name, tasks=(TaskSpec(name="w", replicas=1),))
    flow.apply(seq, JobSubmitted(spec=spec))
    flow.apply(seq + 1, TaskStarted(namespace="ns", name=name, task=f"{name}-w-0", node="n1"))


def test_ended_jobs_beyond_keep_are_forgotten_suspended_ones_are_not() -> None:
    flow = fl.Flow(finished=FinishedOrder(keep=1))
    for i, name in enumerate(("a", "b", "c", "held")):
        submit(flow, 10 * i + 1, name)
    flow.apply(50, JobPhaseChanged(namespace="ns", name="held", phase="Aborted", reason=fl.SUSPENDED))
    flow.apply(51, JobPhaseChanged(namespace="ns", name="a", phase="Failed", reason="x"))
    flow.apply(52, JobPhaseChanged(namespace="ns", name="b", phase="Failed", reason="x"))
    assert flow.submitted == {"ns/b", "ns/c", "ns/held"}  # a forgotten
    assert {k[0] for k in flow.task_seq} == {"ns/b", "ns/c", "ns/held"}
    assert list(flow.finished.order) == ["ns/b"]
    assert fl.command(flow, "resume", "ns", "held")  # still resumable
    try:
        fl.command(flow, "delete", "ns", "a")
    except fl.Refused as exc:
        assert "not found" in str(exc)
    else:
        raise AssertionError("a forgotten job was deleted")
