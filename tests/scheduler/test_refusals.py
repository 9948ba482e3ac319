"""A proposal the allocator refuses is never proposed again unchanged (issue 27).

Each session of the scheduler service is driven by hand against an "allocator" that refuses
every proposal with one of the reasons the real one gives: the number of events per pod stays
bounded however many sessions run, the pod waits with the refusal as its reason, and a change
to one of the refused nodes (or to the job) lets it be tried there again — once."""

from __future__ import annotations

import pytest

from contracts.events import (
    BindingFailed,
    JobSubmitted,
    JobUnschedulable,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    QueueCreated,
    TaskFinished,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling.view import MAX_REFUSED_NODES
from services.runtime.eventlog import MemoryLog
from services.scheduler.service import Scheduler
from services.scheduler.view import ViewFold
from tests.allocator.scenario import put

#: what the allocator answers (services/allocator/commit.py, service.py) when its ledgers and
#: the scheduler's view disagree in a way the next session does not change
REASONS = [
    "already placed as proposed",
    "card n1-Ascend910B3-0 on n1 is not registered",
    "task cpu-0 on card n1-Ascend910B3-0: CardInsufficientMemory",
    "default/cpu/cpu-0 is already placed on cards ['n9-Ascend910B3-0']",
]
SESSIONS = 40  # a loop would propose once a session


def cpu_job(name: str = "cpu", cpu: int = 4000) -> JobSpec:
    task = TaskSpec(name="c", cpu_milli=cpu, memory_mib=1024, pod_names=(f"{name}-0",))
    return JobSpec(namespace="default", name=name, tasks=(task,))


def node(name: str, cpu: int = 8000) -> NodeRegistered:
    return NodeRegistered(node=name, cpu_milli=cpu, memory_mib=64_000)


class Driver:
    """The scheduler's sessions, with their events and the answers folded back in log order."""

    def __init__(self, sched: Scheduler, seq: int) -> None:
        self.sched, self.seq = sched, seq
        self.log: list[object] = []

    def fold(self, event: object) -> int:
        self.seq += 1
        self.sched._fold(self.seq, event)  # type: ignore[arg-type]
        self.log.append(event)
        return self.seq

    def sessions(self, n: int, reason: str) -> None:
        for _ in range(n):
            for out in self.sched.session_events():
                at = self.fold(out.event)
                if isinstance(out.event, PlacementProposed):
                    self.fold(PlacementRejected(namespace=out.event.namespace, name=out.event.name,
                                                reason=reason, proposal_seq=at))  # fmt: skip

    def proposals(self) -> list[PlacementProposed]:
        return [e for e in self.log if isinstance(e, PlacementProposed)]


async def driver(nodes: int) -> Driver:
    log = MemoryLog()
    s = log.subjects
    for q in ("root", "default"):
        await put(log, s.queue(q), QueueCreated(spec=QueueSpec(name=q, parent="" if q == "root" else "root")))
    for i in range(nodes):
        await put(log, s.node(f"n{i + 1}"), node(f"n{i + 1}"))
    seq = await put(log, s.job("default", "cpu"), JobSubmitted(spec=cpu_job()))
    sched = Scheduler(log)
    await sched.recover()
    return Driver(sched, seq)


@pytest.mark.parametrize("reason", REASONS)
async def test_a_refused_pod_is_proposed_on_each_node_at_most_once_then_waits_saying_why(reason: str) -> None:
    d = await driver(nodes=5)
    d.sessions(SESSIONS, reason)
    proposals = d.proposals()
    assert len(proposals) == MAX_REFUSED_NODES, [p.placements[0].node for p in proposals]
    nodes = [p.placements[0].node for p in proposals]
    assert len(set(nodes)) == len(nodes)  # never the same node twice
    waits = [e for e in d.log if isinstance(e, JobUnschedulable)]
    assert waits and reason in waits[-1].reason and "held back" in waits[-1].reason
    assert len(d.log) <= 2 * MAX_REFUSED_NODES + 3  # proposals, answers, a few reasons


async def test_a_change_on_a_refused_node_lets_the_pod_be_tried_there_once_more() -> None:
    d = await driver(nodes=1)
    d.sessions(3, "already placed as proposed")
    assert len(d.proposals()) == 1
    waits = [e for e in d.log if isinstance(e, JobUnschedulable)]
    assert "placement refused by the allocator: already placed as proposed" in waits[-1].reason
    # another pod on n1 finished: n1 changed, so one more try there
    d.fold(TaskFinished(namespace="other", name="x", task="x-0", node="n1", exit_code=0))
    d.sessions(SESSIONS, "already placed as proposed")
    assert len(d.proposals()) == 2
    # a new node is a place no refusal has seen
    d.fold(node("n2"))
    d.sessions(SESSIONS, "already placed as proposed")
    assert [p.placements[0].node for p in d.proposals()] == ["n1", "n1", "n2"]
    # the job's own change (its spec updated) clears its refusals; a commit then places it
    d.fold(JobUpdated(namespace="default", name="cpu", spec=cpu_job(cpu=2000), reason="edited"))
    outs = [o.event for o in d.sched.session_events()]
    proposal = next(e for e in outs if isinstance(e, PlacementProposed))
    at = d.fold(proposal)
    d.fold(PlacementCommitted(namespace="default", name="cpu", placements=proposal.placements, proposal_seq=at))
    assert d.sched.view.refused == {}
    assert not [o for o in d.sched.session_events() if isinstance(o.event, PlacementProposed)]


async def test_a_stale_answer_is_no_refusal() -> None:
    """"stale proposal …" answers a proposal the log moved under (the job updated, answered,
    ended): nothing about its nodes, so the next session proposes there again."""
    d = await driver(nodes=1)
    d.sessions(3, "stale proposal #7: the job was updated (#8): edited")
    assert len(d.proposals()) == 3


async def test_a_refusal_on_a_view_the_ledger_had_moved_past_is_no_refusal() -> None:
    """"stale view: …" answers a proposal that lost a race for a card (another commit took it
    after the proposal's view): the next session's view has the winner, so the job is tried
    again on the same nodes — remembered, the refusal kept it off the only nodes with free
    cards for good."""
    d = await driver(nodes=1)
    d.sessions(3, "stale view: card n1-Ascend910B3-0 changed after the proposal's view (#5 → #9); "
                  "task cpu-0 on card n1-Ascend910B3-0: ExclusiveDeviceAllocateConflict")  # fmt: skip
    assert len(d.proposals()) == 3 and d.sched.view.refused == {}


async def test_a_job_whose_pods_were_refused_is_held_from_every_node_until_its_retry() -> None:
    """The job controller gives a task back when the API server refuses its pod (PodSecurity, a
    quota): `BindingFailed` with a `retry_at`. Until then no session places the job (its cards
    stayed booked by pods that could never be made), a change on its nodes does not lift that,
    the session says when it is tried again, and a change of the job itself lifts it at once."""
    d = await driver(nodes=1)
    d.sched.clock = lambda: 1000.0
    outs = [o.event for o in d.sched.session_events()]
    proposal = next(e for e in outs if isinstance(e, PlacementProposed))
    at = d.fold(proposal)
    d.fold(PlacementCommitted(namespace="default", name="cpu", placements=proposal.placements, proposal_seq=at))
    refusal = 'Error creating pod cpu-0: pods "cpu-0" is forbidden: violates PodSecurity "restricted:latest"'
    d.fold(BindingFailed(namespace="default", name="cpu", task="cpu-0", node="n1", reason=refusal, retry_at=1004.0))
    d.fold(TaskFinished(namespace="other", name="x", task="x-0", node="n1", exit_code=0))  # n1 changed
    decided = d.sched.session_events()
    assert not [o for o in decided if isinstance(o.event, PlacementProposed)], "placed again before its retry"
    (held,) = [o.event for o in decided if isinstance(o.event, JobUnschedulable)]
    assert "held back: the API server refused its pods" in held.reason and refusal in held.reason, held.reason
    assert "tried again at 1970-01-01T00:16:44Z" in held.reason, held.reason
    assert d.sched._revisit == 1004.0  # an unchanged log opens a session then, not before
    # the snapshot a restart resumes from holds it too
    fold = ViewFold(d.sched.subjects.events)
    assert fold.decode(fold.encode(d.sched.view)).refused == d.sched.view.refused != {}
    d.sched.clock = lambda: 1004.0
    assert [o for o in d.sched.session_events() if isinstance(o.event, PlacementProposed)], "not tried at its retry"


async def test_a_held_job_changed_by_its_user_is_tried_at_once() -> None:
    d = await driver(nodes=1)
    d.sched.clock = lambda: 1000.0
    d.fold(BindingFailed(namespace="default", name="cpu", task="cpu-0", node="n1", reason="refused", retry_at=2000.0))
    assert not [o for o in d.sched.session_events() if isinstance(o.event, PlacementProposed)]
    d.fold(JobUpdated(namespace="default", name="cpu", spec=cpu_job(cpu=2000), reason="edited"))
    assert [o for o in d.sched.session_events() if isinstance(o.event, PlacementProposed)]
