"""volcano.md §4 acceptance scenarios: each one session through the pure core (tables A, C, D,
E, I), and the e2e table H as a whole simulation through the engine in-process."""

from __future__ import annotations

import pytest

from tests.core.scheduling.scenarios import (
    FIXTURES,
    Scenario,
    check_core,
    check_report,
    load_tables,
    run_core,
    run_engine,
)

TABLES = tuple(
    t
    for t in ("allocate", "preempt", "reclaim", "enqueue", "devices", "preempt_devices", "e2e",
              "nodeports", "gates", "booking", "podaffinity",
              "topologyspread", "volumes", "resourcequota", "hypernodes", "served")
    if (FIXTURES / f"{t}.yaml").exists()
)
CASES = load_tables(*TABLES)


@pytest.mark.parametrize("sc", CASES, ids=[f"{c.table}-{c.name}" for c in CASES])
def test_scenario_through_core(sc: Scenario) -> None:
    if sc.multi_step:
        check_report(sc, run_engine(sc))
    else:
        check_core(sc, run_core(sc))
