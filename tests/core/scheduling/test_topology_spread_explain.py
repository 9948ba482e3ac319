"""explain's words for a PodTopologySpread refusal (issue 22): kube-scheduler's reason, the
constraint, and how far over its emptiest domain the pod would put the node's domain."""

from __future__ import annotations

from tests.core.scheduling.scenarios import load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("topologyspread")}
SPREAD = "node(s) didn't match pod topology spread constraints"


def test_skew_refusals_group_by_constraint_beside_other_reasons() -> None:
    u = unschedulable(ROWS["nodes-2-1-0-3-only-x-reasons"], "default/new")
    words = f"topology spread of foo by kubernetes.io/hostname: maxSkew 1 would be exceeded ({SPREAD})"
    assert [(g.reason, g.nodes) for g in u.groups] == [
        (words, 3), ("cpu: asked 1, free 0.5 of 0.5", 1)]  # fmt: skip
    assert u.node_reasons == {"node-a": SPREAD, "node-b": SPREAD, "node-x": "Insufficient cpu",
                              "node-y": SPREAD}  # fmt: skip


def test_a_missing_topology_label_is_kube_schedulers_unresolvable_reason() -> None:
    u = unschedulable(ROWS["no-node-has-the-key"], "default/new")
    assert u.why == (
        "0/2 nodes are available: 2 topology spread of foo by rack: the node has no rack label "
        f"({SPREAD} (missing required label))."
    )
    assert u.unblock == "label the nodes with rack"


def test_min_domains_not_reached_says_the_emptiest_counts_as_zero() -> None:
    u = unschedulable(ROWS["min-domains-not-reached"], "default/new")
    assert u.plugin == "predicates"
    assert u.unblock == (
        "zone=zone1 would be 2 pods over the emptiest domain (2 of minDomains 3: it counts as 0): "
        "room in another zone, or a larger maxSkew"
    )
