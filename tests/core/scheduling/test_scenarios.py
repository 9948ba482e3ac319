"""volcano.md §4 acceptance scenarios, each one session through the pure core."""

from __future__ import annotations

import pytest

from tests.core.scheduling.scenarios import Scenario, bound_of, evicted_of, load_table, run_core

TABLES = ["allocate"]
CASES = [sc for t in TABLES for sc in load_table(t)]


@pytest.mark.parametrize("sc", CASES, ids=[f"{c.table}-{c.name}" for c in CASES])
def test_scenario_through_core(sc: Scenario) -> None:
    d = run_core(sc)
    if "bound" in sc.expect:
        assert bound_of(d) == sc.expect["bound"]
    if "evicted" in sc.expect:
        assert evicted_of(d) == sorted(sc.expect["evicted"])
    if "inqueue" in sc.expect:
        assert sorted(
            f"{p.namespace}/{p.name}" for p in d.phases if p.phase == "Inqueue"
        ) == sorted(sc.expect["inqueue"])
