"""An eviction asked for but not yet done: on a cluster the victim's pod runs on for its grace
period, and the scheduler keeps deciding meanwhile. Volcano's cache shows such a task as
Releasing (its pod has a deletion timestamp): not a candidate victim any more, and its resources
are the node's future idle, where the preemptor is pipelined. A projection that kept the victim
Running would let the next session evict a second pod for the same preemptor."""

from __future__ import annotations

from contracts.events import (
    JobDeleted,
    JobSubmitted,
    NodeRegistered,
    PlacementCommitted,
    QueueCreated,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Decisions
from services.core.scheduling.record import decision_events
from services.queue import flow as fl
from tests.core.scheduling.scenarios import PREEMPT_CONF

CONF = parse_conf(PREEMPT_CONF)  # one queue: reclaim finds nothing; no cards: deviceshare neither


def job(name: str, priority: int) -> JobSpec:
    task = TaskSpec(name="main", replicas=1, cpu_milli=2000, min_available=1)
    return JobSpec(namespace="default", name=name, kind="PodGroup", min_available=1, tasks=(task,),
                   priority=priority)  # fmt: skip


class Cluster:
    """Two 2-cpu nodes, each filled by a low-priority pod; events folded as the services do."""

    def __init__(self) -> None:
        self.flow = fl.Flow()
        self.seq = 0
        self.add(QueueCreated(spec=QueueSpec(name="default")))
        for n in ("n0", "n1"):
            self.add(NodeRegistered(node=n, cpu_milli=2000, memory_mib=4096))
            low = job(f"low-{n}", 10)
            pod = f"low-{n}-main-0"
            self.add(JobSubmitted(spec=low),
                     PlacementCommitted(namespace="default", name=low.name, placements=(TaskPlacement(task=pod, node=n),)),
                     TaskStarted(namespace="default", name=low.name, task=pod, node=n))  # fmt: skip
        self.add(JobSubmitted(spec=job("urgent", 1000)))
        self.proposed: dict = {}

    def add(self, *events: object) -> None:
        for e in events:
            self.seq += 1
            self.flow.apply(self.seq, e)  # type: ignore[arg-type]

    def session(self, n: int) -> Decisions:
        """One session, its events appended (phase changes, evictions; nothing commits)."""
        d = decide(self.flow.projection.snapshot(), CONF)
        self.add(*decision_events(d, session=n, mode="service", outstanding={}, last_reasons={},
                                  proposed=self.proposed))  # fmt: skip
        return d

    def status(self, name: str) -> str:
        return self.flow.projection.tasks[f"default/{name}"][f"{name}-main-0"].status


def evicted(d: Decisions) -> list[str]:
    return sorted(e.name for e in d.evictions)


def test_a_victim_whose_pod_still_runs_is_not_evicted_again_nor_is_a_second_one() -> None:
    c = Cluster()
    first = c.session(1)
    assert len(first.evictions) == 1, first  # one victim frees the 2 cpus urgent needs
    victim = first.evictions[0].name
    assert c.status(victim) == st.RELEASING  # asked to stop, its pod still running
    for n in range(2, 5):  # sessions while the victim's grace period runs
        later = c.session(n)
        assert evicted(later) == [], f"session {n} evicted more for the same preemptor"
        pipelined = [p.node for jp in later.placements if jp.name == "urgent" for p in jp.placements]
        assert pipelined == [c.flow.projection.tasks[f"default/{victim}"][f"{victim}-main-0"].node]
    other = next(n for n in ("low-n0", "low-n1") if n != victim)
    assert c.status(other) == st.RUNNING
    # the pod is gone: the victim waits again, urgent is placed where it ran
    c.add(TaskFinished(namespace="default", name=victim, task=f"{victim}-main-0", node="", exit_code=137,
                       reason="evicted"))  # fmt: skip
    assert c.status(victim) == st.PENDING
    done = c.session(5)
    assert evicted(done) == []
    placed = [jp for jp in done.placements if jp.name == "urgent"]
    assert placed and not placed[0].pipelined


def test_a_job_terminated_while_its_pod_is_being_evicted_ends_once_the_pod_is_gone() -> None:
    """The victim's job is terminated mid-eviction: nothing runs by the projection's word, but
    its pod still holds the node — `Terminated` waits for it, as it waits for pods it stops."""
    c = Cluster()
    victim = c.session(1).evictions[0].name
    key = f"default/{victim}"
    ending = fl.end_job(c.flow, key, "TerminateJob", "by a Command")
    assert [type(e).__name__ for e in ending] == ["JobPhaseChanged"]  # no second eviction
    assert ending[0].phase == "Terminating"  # type: ignore[attr-defined]
    c.add(*ending)
    assert fl.ending_events(c.flow, key) == []  # still being stopped: not ended
    c.add(TaskFinished(namespace="default", name=victim, task=f"{victim}-main-0", node="", exit_code=137,
                       reason="evicted"))  # fmt: skip
    ended = fl.ending_events(c.flow, key)
    assert [(type(e).__name__, getattr(e, "phase", "")) for e in ended] == [("JobPhaseChanged", "Terminated")]


def test_a_job_that_fails_while_its_pod_runs_keeps_its_node_until_the_pod_is_gone() -> None:
    """maxRetry spent (or minSuccess reached) while a pod still runs: the job was ended at once
    and left the projection, so the next session bound another pod onto the node its pod
    still held (the kubelet's OutOfcpu on a cluster). Now it is Failing until the pod is
    gone: the node is the waiting job's only in the future (pipelined), then for real."""
    c = Cluster()
    c.add(JobDeleted(namespace="default", name="urgent"))  # (no preemptor here)
    failing = fl.terminate(c.flow, "default/low-n0", "Failed", "RestartJob on PodFailed")
    assert [(type(e).__name__, getattr(e, "phase", "")) for e in failing] == [
        ("JobPhaseChanged", "Failing"), ("EvictionRequested", "")]  # fmt: skip
    c.add(*failing, JobSubmitted(spec=job("next", 10)))
    placed = [p for jp in c.session(1).placements if jp.name == "next" for p in jp.placements]
    assert not [jp for jp in c.session(2).placements if jp.name == "next" and not jp.pipelined], placed
    c.add(TaskFinished(namespace="default", name="low-n0", task="low-n0-main-0", node="", exit_code=137,
                       reason="evicted"))  # fmt: skip
    c.add(*fl.job_events(c.flow, "default/low-n0"))
    assert "default/low-n0" not in c.flow.projection.jobs
    done = [jp for jp in c.session(3).placements if jp.name == "next"]
    assert done and not done[0].pipelined and done[0].placements[0].node == "n0"
