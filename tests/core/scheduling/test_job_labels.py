"""A Volcano Job's pods carry the labels its controller puts on them (`volcano.sh/job-name`,
`volcano.sh/task-spec`…) beside their template's, and label selectors in the session see them:
a job spreading its own pods one per node by anti-affinity or topology spread over its
`volcano.sh/job-name` (the selectors matched none of its pods before, so they stacked up)."""

from __future__ import annotations

import pytest

from contracts.events import JobSubmitted, NodeRegistered, QueueCreated
from contracts.workloads import (
    JobSpec,
    LabelRequirement,
    PodAffinity,
    PodAffinityTerm,
    QueueSpec,
    SpreadConstraint,
    TaskSpec,
)
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide

JOB = (LabelRequirement(key="volcano.sh/job-name", operator="In", values=("train",)),)
HOST = "kubernetes.io/hostname"
#: binpack: without a rule keeping them apart, a job's pods go to one node
CONF = parse_conf("""actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack, arguments: {binpack.weight: 10}}]
""")


def placed(task: TaskSpec, kind: str = "Job", node_cache: bool = True) -> list[str]:
    """The nodes a 3-pod job's pods go to, on three 8-cpu nodes."""
    p = st.ClusterProjection()
    events: list[object] = [QueueCreated(spec=QueueSpec(name="default"))]
    events += [NodeRegistered(node=f"n{i}", cpu_milli=8000, memory_mib=16384, labels={HOST: f"n{i}"}) for i in range(3)]
    events.append(JobSubmitted(spec=JobSpec(namespace="default", name="train", kind=kind, min_available=3,
                                            tasks=(task,))))  # fmt: skip
    for seq, e in enumerate(events, 1):
        p.apply(seq, e)  # type: ignore[arg-type]
    (placement,) = decide(p.snapshot(), CONF, node_cache=node_cache).placements
    return sorted(t.node for t in placement.placements)


@pytest.mark.parametrize("node_cache", [True, False])
def test_anti_affinity_over_the_job_name_spreads_a_jobs_pods(node_cache: bool) -> None:
    term = PodAffinityTerm(topology_key=HOST, selector=JOB, namespaces=("default",))
    task = TaskSpec(name="w", replicas=3, cpu_milli=1000, pod_affinity=PodAffinity(anti_affinity=(term,)))
    assert placed(task, node_cache=node_cache) == ["n0", "n1", "n2"]


def test_without_a_rule_they_go_together() -> None:
    assert len(set(placed(TaskSpec(name="w", replicas=3, cpu_milli=1000)))) == 1


def test_topology_spread_over_the_job_name_spreads_a_jobs_pods() -> None:
    spread = SpreadConstraint(max_skew=1, topology_key=HOST, selector=JOB)
    assert placed(TaskSpec(name="w", replicas=3, cpu_milli=1000, spread=(spread,))) == ["n0", "n1", "n2"]


def test_a_podgroups_pods_have_only_their_own_labels() -> None:
    """kubectl-made pods of a PodGroup get no controller labels: the selector matches none of
    them, so nothing keeps them apart."""
    term = PodAffinityTerm(topology_key=HOST, selector=JOB, namespaces=("default",))
    task = TaskSpec(name="w", replicas=3, cpu_milli=1000, pod_affinity=PodAffinity(anti_affinity=(term,)))
    assert len(set(placed(task, kind="PodGroup"))) == 1
