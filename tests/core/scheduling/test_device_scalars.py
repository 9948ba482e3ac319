"""Device counts no deviceshare books are node scalars, whole cards (`config.counted_vendors`):
a pod asking 8 Ascend cards ran on a node of 4 when the configuration had no deviceshare (as
MindCluster users' Volcano confs have none), and with deviceshare's Ascend switch off every
Ascend pod was refused. Volcano's allocate fits every requested extended resource against the
node's allocatable; the memory/core names of deviceshare's devices are not counted."""

from __future__ import annotations

from typing import Any

import pytest

from services.core.scheduling.config import counted_vendors, parse_conf
from tests.core.scheduling.scenarios import (
    Scenario,
    check_core,
    check_report,
    load_table,
    run_core,
    run_engine,
)
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

CASES = load_table("scalars")
ROWS = {sc.name: sc for sc in CASES}
B3 = "huawei.com/Ascend910B3"


@pytest.mark.parametrize("sc", CASES, ids=[c.name for c in CASES])
def test_scenario(sc: Scenario) -> None:
    check_core(sc, run_core(sc))


def test_the_counted_families_follow_deviceshare_and_its_switches() -> None:
    base = ROWS["more-cards-than-any-node"].conf
    assert counted_vendors(parse_conf(base)) == {"huawei", "nvidia"}
    only_nvidia = ROWS["ascend-switch-off"].conf
    assert counted_vendors(parse_conf(only_nvidia)) == {"huawei"}
    bare = only_nvidia.replace("arguments: {deviceshare.VGPUEnable: true}", "arguments: {}")
    assert counted_vendors(parse_conf(bare)) == frozenset()  # deviceshare books every family


def test_explain_names_the_short_scalar_in_cards_and_why_they_are_counted() -> None:
    u = unschedulable(ROWS["more-cards-than-any-node"], "default/p8")
    assert u.plugin == "predicates"
    assert ("huawei.com/Ascend910B3: asked 8, free 4 of 4 (no deviceshare in the scheduler configuration: "
            "cards are counted whole against the node's Ascend cards [Insufficient huawei.com/Ascend910B3])"
            ) in u.why, u.why  # fmt: skip
    assert u.unblock == "ask for at most 4 huawei.com/Ascend910B3 per pod, or add a node with 8", u.unblock


def test_explain_says_the_slice_is_taken_whole_while_the_switch_is_off() -> None:
    u = unschedulable(ROWS["ascend-switch-off"], "default/slices")
    assert "huawei.com/Ascend910B3: asked 1, free 0 of 2" in u.why, u.why
    assert "deviceshare.AscendHAMiVNPUEnable is off: the card is taken whole" in u.why, u.why
    assert "is not booked [Insufficient huawei.com/Ascend910B3]" in u.why, u.why
    assert "devices are off" not in u.why


QUEUE_CASES = load_table("counted_queues")


@pytest.mark.parametrize("sc", QUEUE_CASES, ids=[c.name for c in QUEUE_CASES])
def test_queue_accounting_charges_what_the_node_takes(sc: Scenario) -> None:
    check_report(sc, run_engine(sc))


def _allocated(report: dict[str, Any], queue: str) -> dict[str, int]:
    return next(q["allocated"] for q in report["queues"] if q["name"] == queue)


def test_the_report_charges_queues_as_the_scheduler_configuration_does() -> None:
    """The report's queue rows read the recorded configuration's deviceshare switches: slices
    deviceshare books are card shares (four quarters of one card: 1), counted cards whole."""
    rows = {sc.name: sc for sc in QUEUE_CASES}
    booked = run_engine(rows["deviceshare-books-the-slices"])
    assert _allocated(booked, "default").get(B3) == 1000, _allocated(booked, "default")
    counted = run_engine(rows["reclaim-to-the-deserved-cards"])
    assert _allocated(counted, "qb").get(B3) == 2000, _allocated(counted, "qb")
    assert _allocated(counted, "qa").get(B3) == 2000, _allocated(counted, "qa")
