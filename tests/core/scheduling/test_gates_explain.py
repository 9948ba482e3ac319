"""explain's words for a gated pod (issue 22): it says the pod is gated and by which gates, before
any node, queue or share rule, from the same rows as the gates table."""

from __future__ import annotations

from tests.core.scheduling.scenarios import load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("gates")}
BLOCKED = "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates"


def test_explain_names_the_pod_and_its_gates() -> None:
    u = unschedulable(ROWS["two-gates-named"], "default/held")
    assert u.plugin == "SchedulingGates"
    assert u.why == f"{BLOCKED}: gated held by example.com/a example.com/b"
    assert "spec.schedulingGates" in u.unblock
    assert u.node_reasons == {}  # no node was filtered for it


def test_gates_come_before_what_the_node_lacks() -> None:
    u = unschedulable(ROWS["gated-high-priority-preempts-nothing"], "default/held")
    assert u.why.startswith(BLOCKED) and u.plugin == "SchedulingGates", u.why
    assert u.reason.startswith(BLOCKED), u.reason
