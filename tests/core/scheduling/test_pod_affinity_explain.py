"""explain's words for an InterPodAffinity refusal (issue 22): the rule in kube-scheduler's
words, the term that refused, and the pod it is about, from the same rows as the table."""

from __future__ import annotations

from tests.core.scheduling.scenarios import load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("podaffinity")}
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def test_anti_affinity_names_the_term_and_the_pod_in_the_domain() -> None:
    u = unschedulable(ROWS["anti-affinity-refuses"], "default/new")
    words = f"pod anti-affinity to service=securityscan by region: a matching pod runs in the node's region ({ANTI})"
    assert u.plugin == "predicates"
    assert u.why == f"0/1 nodes are available: 1 {words}."
    assert u.unblock == "end default/pre (region=r1), or relax the pod's anti-affinity term"
    assert u.node_reasons == {"n1": ANTI}


def test_an_existing_pods_anti_affinity_names_that_pod() -> None:
    u = unschedulable(ROWS["existing-anti-affinity-refuses"], "default/new")
    assert u.why == (
        "0/1 nodes are available: 1 the anti-affinity of default/pre to app=web by "
        f"kubernetes.io/hostname selects this pod ({EXISTING})."
    )
    assert u.unblock.startswith("end default/pre (kubernetes.io/hostname=n1)")
    assert u.reason.endswith(f"0/1 nodes are unavailable: 1 {EXISTING}."), u.reason


def test_affinity_to_a_label_nobody_has_says_so() -> None:
    u = unschedulable(ROWS["affinity-to-nobody"], "default/new")
    assert u.why == (
        "0/1 nodes are available: 1 pod affinity to app=cache by region: no matching pod runs "
        f"in the node's region ({AFFINITY})."
    )
    assert u.unblock == "run a pod matching app=cache in region=r1, or remove the pod's affinity term"


def test_a_node_without_the_topology_label_is_named_and_grouped_apart() -> None:
    u = unschedulable(ROWS["affinity-node-without-topology-label"], "default/new")
    assert [(g.reason, g.nodes) for g in u.groups] == [
        ("cpu: asked 1, free 0 of 4", 1),
        (f"pod affinity to foo=bar by region: the node has no region label ({AFFINITY})", 1),
    ]
    assert u.node_reasons == {"n1": "Insufficient cpu", "n2": AFFINITY}


def test_a_gang_too_large_for_its_own_anti_affinity_counts_its_members() -> None:
    u = unschedulable(ROWS["gang-larger-than-the-nodes"], "default/web")
    assert u.reason.endswith(f"0/2 nodes are unavailable: 2 {ANTI}."), u.reason
    assert u.plugin == "gang"  # alone each member fits: the gang as a whole does not
