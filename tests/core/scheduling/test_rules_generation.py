"""Logs recorded before a change of the scheduling rules re-run by the rules they ran with
(`SchedulerConfigured.rules`, `config.RULES`). The fixtures in tests/fixtures/replay/rules0 were
written by `tessera simulate` at 6e97373, before generation 1 (their records carry no `rules`):

- no-deviceshare: 12 one-card Ascend pods on two nodes of 4 cards, no deviceshare in the conf
  (generation 1 fits the counts as node scalars: 4 a node, placed spread over both);
- ascend-switch-off: deviceshare with only VGPUEnable, Ascend -memory pods (before: refused
  with "Ascend devices are off", admitted Inqueue; from 1: counted whole cards, placed);
- two-containers: one 310P card, a pod of two 3072 MB containers (before: a card each, the pod
  waits; from 1: slices of one template share the card, placed).

Each verifies as recorded; the same log with its record rewritten to the current generation
diverges where the new rule decides otherwise, which is the gate being what chooses."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contracts.events import (
    JobPhaseChanged,
    JobUnschedulable,
    PlacementProposed,
    SchedulerConfigured,
)
from services.cli.main import main
from services.core.scheduling import record
from services.core.scheduling.config import RULES
from services.core.scheduling.verify import Stored, decoded, verify
from services.core.simulate.jsonl import read_jsonl

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay" / "rules0"
LOGS = ("no-deviceshare", "ascend-switch-off", "two-containers")


def _log(name: str) -> list[Stored]:
    stored, poisoned = decoded(read_jsonl(FIXTURES / f"{name}.jsonl"))
    assert not poisoned
    return stored


def _at_generation(log: list[Stored], rules: int) -> list[Stored]:
    return [(s, h, msgspec.structs.replace(e, rules=rules) if isinstance(e, SchedulerConfigured) else e)
            for s, h, e in log]  # fmt: skip


@pytest.mark.parametrize("name", LOGS)
def test_a_log_recorded_before_generation_1_verifies(name: str) -> None:
    log = _log(name)
    assert all(e.rules == 0 for _, _, e in log if isinstance(e, SchedulerConfigured))
    verdict = verify(log)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert verdict.decisions > 0
    assert main(["replay", "--verify", "--from", str(FIXTURES / f"{name}.jsonl")]) == 0


def test_without_deviceshare_the_current_rules_fit_counts_on_the_nodes() -> None:
    """Before: counts were not fitted at all, every pod on the first node; now 4 a node."""
    recorded = [e for _, _, e in _log("no-deviceshare") if isinstance(e, PlacementProposed)]
    assert {p.node for e in recorded for p in e.placements} == {"n1"}  # as it ran
    d = verify(_at_generation(_log("no-deviceshare"), RULES)).divergence
    assert d is not None and isinstance(d.rederived, PlacementProposed)
    nodes = [p.node for p in d.rederived.placements]
    assert "n2" in nodes and nodes.count("n1") <= 4


def test_with_the_ascend_switch_off_the_current_rules_place_the_pods_on_whole_cards() -> None:
    log = _log("ascend-switch-off")
    assert not any(isinstance(e, PlacementProposed) for _, _, e in log)  # refused, as it ran
    assert any(isinstance(e, JobPhaseChanged) and e.phase == "Inqueue" for _, _, e in log)
    d = verify(_at_generation(log, RULES)).divergence
    assert d is not None and isinstance(d.rederived, PlacementProposed)
    assert all(p.slices == () for p in d.rederived.placements)  # counted, not booked on cards


def test_two_containers_of_one_template_share_a_card_by_the_current_rules() -> None:
    log = _log("two-containers")
    assert any(isinstance(e, JobUnschedulable) for _, _, e in log)  # waited, as it ran
    d = verify(_at_generation(log, RULES)).divergence
    assert d is not None and isinstance(d.rederived, PlacementProposed)
    (placement,) = d.rederived.placements
    assert len({s.card for s in placement.slices}) == 1


def test_a_new_record_carries_the_current_generation_and_conf_of_reads_it() -> None:
    config = record.configured()
    assert config.rules == RULES >= 1
    assert record.conf_of(config).rules == RULES
    old = msgspec.json.decode(msgspec.json.encode(config).replace(f',"rules":{RULES}'.encode(), b""), type=SchedulerConfigured)
    assert old.rules == 0 and record.conf_of(old).rules == 0
    assert old != config  # an upgraded scheduler appends its own record (service._record_config)
