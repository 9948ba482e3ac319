"""Volcano's `pdb` plugin: preemption takes no pod its PodDisruptionBudgets do not allow to go.
Two nodes, each filled by one low-priority `web` pod; two urgent pods want a node each."""

from __future__ import annotations

import dataclasses

import msgspec

from contracts.events import (
    DisruptionBudgetChanged,
    DisruptionBudgetDeleted,
    EvictionRequested,
    JobSubmitted,
    NodeRegistered,
    PlacementCommitted,
    QueueCreated,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, LabelRequirement, QueueSpec, TaskSpec
from services.core.scheduling import record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.projection_state import ProjectionState, projection_of, state_of
from tests.core.scheduling.scenarios import PREEMPT_CONF

CONF = parse_conf(PREEMPT_CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: pdb\n"))
WEB = (LabelRequirement(key="app", operator="In", values=("web",)),)


def job(name: str, priority: int, labels: dict[str, str] | None = None, kind: str = "PodGroup") -> JobSpec:
    task = TaskSpec(name="main", replicas=1, cpu_milli=2000, min_available=1, labels=labels or {})
    return JobSpec(namespace="default", name=name, kind=kind, min_available=1, tasks=(task,),
                   priority=priority)  # fmt: skip


class Cluster:
    def __init__(self, *budgets: DisruptionBudgetChanged, labels: dict[str, str] | None = None,
                 kind: str = "PodGroup") -> None:  # fmt: skip
        self.p, self.seq = st.ClusterProjection(), 0
        self.add(QueueCreated(spec=QueueSpec(name="default")), *budgets)
        for i in range(2):
            web = job(f"web-{i}", 10, labels={"app": "web"} if labels is None else labels, kind=kind)
            pod = f"web-{i}-main-0"
            self.add(NodeRegistered(node=f"n{i}", cpu_milli=2000, memory_mib=4096), JobSubmitted(spec=web),
                     PlacementCommitted(namespace="default", name=web.name,
                                        placements=(TaskPlacement(task=pod, node=f"n{i}"),)),
                     TaskStarted(namespace="default", name=web.name, task=pod, node=f"n{i}"))  # fmt: skip
        self.add(JobSubmitted(spec=job("urgent-a", 1000)), JobSubmitted(spec=job("urgent-b", 1000)))

    def add(self, *events: object) -> None:
        for e in events:
            self.seq += 1
            self.p.apply(self.seq, e)  # type: ignore[arg-type]

    def evicted(self) -> list[str]:
        return sorted(e.name for e in decide(self.p.snapshot(), CONF).evictions)


def budget(allowed: int, selector: tuple[LabelRequirement, ...] | None = WEB, namespace: str = "default",
           disrupted: tuple[str, ...] = ()) -> DisruptionBudgetChanged:  # fmt: skip
    return DisruptionBudgetChanged(namespace=namespace, name="web", selector=selector, allowed=allowed,
                                   disrupted=disrupted)  # fmt: skip


def test_without_a_budget_both_pods_go() -> None:
    assert Cluster().evicted() == ["web-0", "web-1"]


def test_a_budget_allowing_one_disruption_gives_up_one_pod_in_a_session_over_two_nodes() -> None:
    """Volcano's plugin gives each node's call the whole allowance again: both pods would go."""
    assert len(Cluster(budget(1)).evicted()) == 1
    assert Cluster(budget(0)).evicted() == []
    assert Cluster(budget(2)).evicted() == ["web-0", "web-1"]


def test_pods_already_on_their_way_out_spend_the_allowance() -> None:
    """An eviction an earlier session asked for (the pod Releasing) is not yet in the budget's
    status: it counts against the allowance until the pod is gone."""
    c = Cluster(budget(1))
    c.add(EvictionRequested(namespace="default", name="web-0", task="web-0-main-0", reason="preempted"))
    assert c.evicted() == []


def test_a_pod_the_budget_already_counts_as_disrupted_spends_nothing() -> None:
    assert Cluster(budget(1, disrupted=("web-0-main-0",))).evicted() == ["web-0", "web-1"]


def test_selectors_read_as_policy_v1() -> None:
    """An empty selector covers every pod of the namespace, labelled or not; none covers none;
    another namespace's budget covers nothing here."""
    assert Cluster(budget(0, selector=()), labels={}).evicted() == []
    assert Cluster(budget(0, selector=None)).evicted() == ["web-0", "web-1"]
    assert Cluster(budget(0, namespace="other")).evicted() == ["web-0", "web-1"]
    other = (LabelRequirement(key="app", operator="In", values=("db",)),)
    assert Cluster(budget(0, selector=other)).evicted() == ["web-0", "web-1"]


def test_budgets_survive_a_restored_projection_and_go_when_deleted() -> None:
    c = Cluster(budget(0))
    c.p = projection_of(msgspec.msgpack.decode(msgspec.msgpack.encode(state_of(c.p)), type=ProjectionState))
    assert c.evicted() == []
    assert "budgets" in record.input_digests(c.p.snapshot(), record.configured())
    c.add(DisruptionBudgetDeleted(namespace="default", name="web"))
    assert c.evicted() == ["web-0", "web-1"]
    assert "budgets" not in record.input_digests(dataclasses.replace(c.p.snapshot()), record.configured())


def test_the_waiting_job_is_told_which_budget_holds_its_preemption_back() -> None:
    c = Cluster(budget(0))
    words = {u.name: u.unblock for u in decide(c.p.snapshot(), CONF).unschedulable}
    assert "preemption held back: PodDisruptionBudget default/web allows 0 disruption(s) now, web-0-main-0" \
        in words["urgent-a"], words  # fmt: skip


def test_a_volcano_jobs_pods_carry_their_controllers_labels() -> None:
    """A budget over one Volcano Job selects its pods by `volcano.sh/job-name`, a label the job
    controller puts on them (not in their template)."""
    one_job = (LabelRequirement(key="volcano.sh/job-name", operator="In", values=("web-1",)),)
    assert Cluster(budget(0, selector=one_job), kind="Job").evicted() == ["web-0"]
    assert Cluster(budget(0, selector=one_job)).evicted() == ["web-0", "web-1"]  # PodGroup pods: no such label
