"""Volcano's `nodegroup` plugin: a queue's jobs run in the node groups (`volcano.sh/nodegroup-name`)
its `spec.affinity` names. Four 4-cpu nodes, one per group a–c and one unlabelled; each job one
2-cpu pod."""

from __future__ import annotations

import pytest

from contracts.events import JobSubmitted, NodeRegistered, QueueCreated
from contracts.workloads import JobSpec, NodeGroupAffinity, QueueSpec, TaskSpec
from services.core.devices import build_vendors
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.workload import Workload, admit
from services.core.workload.devicerequests import hami_parser
from services.kube import volcano

CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: nodegroup%s}]
"""
REG = build_vendors()
NODES = {"na": "a", "nb": "b", "nc": "c", "plain": None}


def placed(queues: dict[str, NodeGroupAffinity | None], jobs: dict[str, str], args: str = "",
           parents: dict[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """job → node, for jobs (job → queue) in queues with those affinities."""
    p, seq = st.ClusterProjection(), 0
    events: list[object] = [QueueCreated(spec=QueueSpec(name="root"))]
    events += [QueueCreated(spec=QueueSpec(name=q, node_groups=g, parent=(parents or {}).get(q, "root")))
               for q, g in queues.items()]  # fmt: skip
    for name, group in NODES.items():
        events.append(NodeRegistered(node=name, cpu_milli=4000, memory_mib=8192,
                                     labels={"volcano.sh/nodegroup-name": group} if group else {}))  # fmt: skip
    for job, queue in jobs.items():
        task = TaskSpec(name="main", replicas=1, cpu_milli=2000, min_available=1)
        events.append(JobSubmitted(spec=JobSpec(namespace="default", name=job, queue=queue, min_available=1,
                                                tasks=(task,))))  # fmt: skip
    for e in events:
        seq += 1
        p.apply(seq, e)  # type: ignore[arg-type]
    conf = parse_conf(CONF % args)
    got = [{pl.name: pl.placements[0].node for pl in decide(p.snapshot(), conf, node_cache=cached).placements}
           for cached in (True, False)]  # fmt: skip
    assert got[0] == got[1], "results cached per node and pod shape differ from the plain evaluation"
    return got[0]


def test_required_groups_and_the_preferred_one_first() -> None:
    g = NodeGroupAffinity(required=("a", "b"), preferred=("b",))
    assert placed({"team": g}, {"j1": "team"}) == {"j1": "nb"}  # required + preferred: 150
    assert set(placed({"team": g}, {"j1": "team", "j2": "team", "j3": "team"}).values()) <= {"na", "nb"}


def test_anti_required_wins_over_required_and_anti_preferred_lets_a_group_in_last() -> None:
    assert placed({"team": NodeGroupAffinity(required=("a", "b"), anti_required=("a",))}, {"j": "team"}) == {"j": "nb"}
    soft = NodeGroupAffinity(required=("a",), anti_preferred=("c",))
    assert placed({"team": soft}, {"j1": "team", "j2": "team", "j3": "team"}) in (
        {"j1": "na", "j2": "na", "j3": "nc"}, {"j1": "na", "j2": "nc", "j3": "na"}, {"j1": "nc", "j2": "na", "j3": "na"})


def test_a_queue_without_affinity_under_strict_and_not() -> None:
    """strict (default): no node at all — labelled nodes are other queues', unlabelled ones are
    not allowed either; `strict: false` lets it use the unlabelled node."""
    assert placed({"free": None}, {"j": "free"}) == {}
    assert placed({"free": None}, {"j": "free"}, args=", arguments: {strict: false}") == {"j": "plain"}


def test_a_child_queue_inherits_its_ancestors_affinity_with_hierarchy_on() -> None:
    queues = {"dept": NodeGroupAffinity(required=("c",)), "team": None}
    assert placed(queues, {"j": "team"}, parents={"team": "dept"}) == {}
    assert placed(queues, {"j": "team"}, args=", enableHierarchy: true", parents={"team": "dept"}) == {"j": "nc"}


def test_preferred_order() -> None:
    g = NodeGroupAffinity(preferred=("c", "a"))
    assert placed({"team": g}, {"j": "team"}, args=", arguments: {enablePreferredOrder: true}") == {"j": "nc"}


def admitted(doc: dict) -> Workload:
    return admit([doc], hami_parser(REG), REG.resource_names())


def test_a_queue_affinity_is_admitted_as_written_and_written_back() -> None:
    doc = {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": "team"},
           "spec": {"weight": 1, "affinity": {
               "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a", "b"],
                                     "preferredDuringSchedulingIgnoredDuringExecution": ["b"]},
               "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["c"]}}}}  # fmt: skip
    (spec,) = admitted(doc).queues
    assert spec.node_groups == NodeGroupAffinity(required=("a", "b"), preferred=("b",), anti_required=("c",))
    assert admitted(volcano.queue_object(spec)).queues == (spec,)


@pytest.mark.parametrize(("affinity", "where"), [
    ({"nodeGroupAfinity": {}}, "spec.affinity.nodeGroupAfinity"),
    ({"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "a"}},
     "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
    ({"nodeGroupAntiAffinity": {"required": ["a"]}}, "spec.affinity.nodeGroupAntiAffinity.required"),
])  # fmt: skip
def test_a_mistyped_affinity_is_refused_naming_the_field(affinity: dict, where: str) -> None:
    w = admitted({"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": "team"},
                  "spec": {"affinity": affinity}})  # fmt: skip
    assert not w.queues
    assert [r.path for r in w.rejections] == [where], w.rejections


def test_two_queues_with_different_groups_share_no_cached_results() -> None:
    """Equal pods of two queues on equal nodes: each queue's pods go to its own group (the
    node cache keys results by the pod's shape, which holds its queue's affinity)."""
    queues = {"x": NodeGroupAffinity(required=("a",)), "y": NodeGroupAffinity(required=("b",))}
    assert placed(queues, {"jx1": "x", "jy1": "y", "jx2": "x", "jy2": "y"}) == {
        "jx1": "na", "jy1": "nb", "jx2": "na", "jy2": "nb"}  # fmt: skip
