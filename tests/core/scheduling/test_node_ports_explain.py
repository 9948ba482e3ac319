"""explain's words for a NodePorts refusal (issue 22): the port, the pod holding it and how to
free it, and kube-scheduler's reason counted per node, from the same rows as the tables."""

from __future__ import annotations

from tests.core.scheduling.scenarios import load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("nodeports")}
PORTS = "node(s) didn't have free ports for the requested pod ports"


def test_explain_names_the_port_and_the_pod_holding_it() -> None:
    u = unschedulable(ROWS["same-port-same-protocol"], "default/new")
    assert u.plugin == "predicates"
    held = f"hostPort TCP/8080 on 0.0.0.0: held by default/pre ({PORTS})"
    assert u.why == f"0/1 nodes are available: 1 {held}."
    assert u.unblock == "end default/pre on n1, or ask another hostPort"
    assert [(g.reason, g.plugin, g.nodes) for g in u.groups] == [(held, "predicates", 1)]


def test_reason_counts_carry_kube_schedulers_words() -> None:
    u = unschedulable(ROWS["same-host-ip"], "default/new")
    assert u.node_reasons == {"n1": PORTS}
    assert u.reason.endswith(f"0/1 nodes are unavailable: 1 {PORTS}."), u.reason
    assert "hostPort TCP/8080 on 127.0.0.1: held by default/pre" in u.why


def test_overhead_is_in_what_explain_says_was_asked() -> None:
    u = unschedulable(ROWS["overhead-cpu-does-not-fit"], "default/new")
    assert [g.reason for g in u.groups] == ["cpu: asked 2.5, free 2 of 2"]


def test_an_earlier_gang_member_holds_the_port_for_the_next() -> None:
    u = unschedulable(ROWS["gang-same-port-needs-both"], "default/web")
    assert u.reason.endswith(f"0/1 nodes are unavailable: 1 {PORTS}."), u.reason
    assert u.plugin == "gang"  # alone each member fits: the gang as a whole does not
