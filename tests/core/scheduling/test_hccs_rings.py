"""Ascend 910 HCCS rings (rules generation 2, `config.RING_FIT`), end to end through the
simulator: a pod's cards come from the best-fitting ring (ascend-for-volcano's module910x8
priorities), so 2-card pods pack a ring and a whole ring stays whole for a 4-card pod; a 910A
pod of <= 4 cards never spans the two rings (its chips could not talk over HCCS) and waits with
the rings' free cards named, where HAMi's largest-ring-first fill split it 2 + 2 (a 910B/910C
operator's review: `frag2a.yaml`, q3 on cards 5, 4, 1, 0). A log of generation 1 re-runs as it ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from contracts.events import JobSubmitted, JobUnschedulable, PlacementProposed, SchedulerConfigured
from services.core.scheduling import podreasons
from services.core.scheduling.config import DEFAULT_CONF, RING_FIT
from services.core.scheduling.verify import decoded, verify
from services.core.simulate.jsonl import read_jsonl
from tests.core.scheduling.scenarios import Scenario, engine_log, run_engine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay" / "rules1"


def _node(model: str) -> dict[str, object]:
    return {"nodes": [{"name": "n1", "cpu": 192, "memory": "1536Gi", "devices": [{"type": model, "count": 8}]}]}


def _pods(model: str, *pods: tuple[str, int, int, int | None]) -> str:
    """(name, arrives at, cards, runs for) each."""
    docs = []
    for name, at, cards, runs in pods:
        annotations = {"tessera.io/arrive-at": str(at)}
        if runs is not None:
            annotations["tessera.io/duration"] = str(runs)
        docs.append(json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {f"huawei.com/{model}": str(cards)}}}]},
        }))  # fmt: skip
    return "\n---\n".join(docs)


def _scenario(model: str, *pods: tuple[str, int, int, int | None]) -> Scenario:
    return Scenario("rings", model, DEFAULT_CONF, _node(model), _pods(model, *pods), {}, multi_step=True)


def _rings(report: dict[str, object]) -> dict[str, set[int]]:
    """Each placed pod's HCCS rings (cards 0-3: ring 0, 4-7: ring 1)."""
    return {p["name"]: {d["index"] // 4 for d in p["devices"]}  # type: ignore[index]
            for p in report["pods"] if p["devices"]}  # type: ignore[attr-defined]  # fmt: skip


#: the review's frag2a: 2, 2, then 4 cards
REVIEW = (("q1", 0, 2, None), ("q2", 10, 2, None), ("q3", 20, 4, None))
#: 2-card pods fill both rings; one in each ring ends; then 4 cards: 2 + 2 free across the rings
SPLIT = (("q1", 0, 2, 40), ("q2", 10, 2, None), ("q3", 20, 2, 20), ("q4", 30, 2, None), ("q5", 50, 4, None))


def test_the_second_2_card_pod_joins_the_ring_and_the_4_card_pod_gets_the_whole_other_ring() -> None:
    for model in ("Ascend910A", "Ascend910B3"):
        rings = _rings(run_engine(_scenario(model, *REVIEW)))
        assert rings["q1"] == rings["q2"] and len(rings["q1"]) == 1, (model, rings)
        assert len(rings["q3"]) == 1 and rings["q3"] != rings["q1"], (model, rings)


def test_a_910a_pod_whose_free_cards_are_split_across_the_rings_waits_saying_so() -> None:
    sc = _scenario("Ascend910A", *SPLIT)
    report = run_engine(sc)
    (q5,) = [p for p in report["pods"] if p["name"] == "q5"]
    assert q5["phase"] == "Pending" and not q5["devices"]
    assert "RingNotFit" in q5["reason"]
    events = [e for _, _, e in decoded(engine_log(sc))[0]]
    (u,) = {e.why: e for e in events if isinstance(e, JobUnschedulable) and e.name == "q5"}.values()
    assert "asked 4 whole cards in one HCCS ring, 4 free but no ring has 4" in u.why, u.why
    assert "ring 0, cards 0-3: 2 free; ring 1, cards 4-7: 2 free" in u.why, u.why
    assert u.unblock.startswith("free 2 Ascend910A cards of ring "), u.unblock
    (spec,) = [e.spec for e in events if isinstance(e, JobSubmitted) and e.spec.name == "q5"]
    line = podreasons.nodes_line(u.node_reasons, 1, spec)
    assert line.startswith("0/1 nodes are available: 1 has no HCCS ring with 4 free Ascend910A cards"), line


def test_a_910b_pod_is_still_split_where_no_ring_holds_it() -> None:
    """910B nodes are fully meshed (ascend-for-volcano's module910bx8 only counts cards): the
    ring is a preference there, as HAMi's fill."""
    report = run_engine(_scenario("Ascend910B3", *SPLIT))
    (q5,) = [p for p in report["pods"] if p["name"] == "q5"]
    assert q5["phase"] == "Running" and _rings(report)["q5"] == {0, 1}


def test_a_log_of_generation_1_that_split_a_910a_pod_across_the_rings_verifies() -> None:
    """ring-split.jsonl: the review's frag2a simulated by the code before RING_FIT (main at
    4f76aae), labelled generation 1: q2 took the untouched ring, q3 cards 5, 4, 1, 0."""
    stored, poisoned = decoded(read_jsonl(FIXTURES / "ring-split.jsonl"))
    assert not poisoned
    assert {e.rules for _, _, e in stored if isinstance(e, SchedulerConfigured)} == {RING_FIT - 1}
    placed = {e.name: {s.card for p in e.placements for s in p.slices} for _, _, e in stored
              if isinstance(e, PlacementProposed)}  # fmt: skip
    assert placed["q3"] == {"n1-Ascend910A-5", "n1-Ascend910A-4", "n1-Ascend910A-1", "n1-Ascend910A-0"}
    verdict = verify(stored)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert verdict.decisions == 3
    now = [(s, h, msgspec.structs.replace(e, rules=RING_FIT) if isinstance(e, SchedulerConfigured) else e)
           for s, h, e in stored]  # fmt: skip
    d = verify(now).divergence
    assert d is not None and isinstance(d.rederived, PlacementProposed) and d.rederived.name == "q2"
    assert {s.card for p in d.rederived.placements for s in p.slices} == {"n1-Ascend910A-5", "n1-Ascend910A-4"}
