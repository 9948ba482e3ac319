"""Ascend 910 HCCS rules of generation 3: which card counts a 910A pod may ask
(`config.RING_COUNT_FIT`), and nodes ranked by the ring a pod's cards take there
(`config.RING_RANK`), both as ascend-for-volcano's module910x8 has them (`checkSingleTrainMode` /
`judgeNodeAndTaskNPU`: 1, 2, 4 or 8; `ScoreBestNPUNodes`: the best ring fit wins). Admission
refuses `huawei.com/Ascend910A` of another count; a family name's pod (`huawei.com/Ascend910`)
learns its model at placement and waits on 910A cards, saying why. A log of generation 2 (its
card choices without the ranking) re-runs as it ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from contracts.events import JobSubmitted, JobUnschedulable, PlacementProposed, SchedulerConfigured
from services.core.devices import build_vendors
from services.core.scheduling import podreasons
from services.core.scheduling.config import DEFAULT_CONF, RING_COUNT_FIT, RING_RANK
from services.core.scheduling.verify import decoded, verify
from services.core.simulate.jsonl import read_jsonl
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from tests.core.scheduling.scenarios import Scenario, engine_log, run_engine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "replay" / "rules2"
REG = build_vendors()
SPREAD = DEFAULT_CONF.replace("NodeSchedulePolicy: binpack", "NodeSchedulePolicy: spread")

#: (name, arrives at, resource, cards, pinned to node or None)
Pod = tuple[str, int, str, int, str | None]


def pods(*specs: Pod) -> str:
    docs = []
    for name, at, resource, cards, node in specs:
        spec: dict[str, object] = {"schedulerName": "volcano", "containers": [
            {"name": "c", "image": "x", "resources": {"limits": {resource: str(cards)}}}]}  # fmt: skip
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        docs.append(json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                                "metadata": {"name": name, "annotations": {"tessera.io/arrive-at": str(at)}}}))  # fmt: skip
    return "\n---\n".join(docs)


def scenario(nodes: list[tuple[str, str, int]], *specs: Pod, conf: str = DEFAULT_CONF) -> Scenario:
    """`nodes`: (name, card model, cards) each."""
    inventory = {"nodes": [{"name": n, "cpu": 192, "memory": "1536Gi", "devices": [{"type": m, "count": c}]}
                           for n, m, c in nodes]}  # fmt: skip
    return Scenario("rings", "rings", conf, inventory, pods(*specs), {}, multi_step=True)


def sequence(model: str) -> tuple[Pod, ...]:
    """Pods pinned first, then 1, 2 and 4 cards: on an 8-card node `a` holds ring 1 (ring 0's 4
    free), on a 4-card node `b` holds one card (3 free). The 1- and 2-card pods fill the 4-card
    node's ring exactly (ascend-for-volcano's affScore 1 then 0) and the 4-card pod takes the whole
    ring; binpack alone sent the 1-card pod to the fuller 8-card node, broke its whole ring, and
    the 4-card pod waited (3 + 1 free, no ring of 4 anywhere)."""
    r = f"huawei.com/{model}"
    return (("a", 0, r, 4, "n1"), ("b", 0, r, 1, "n2"), ("p1", 10, r, 1, None), ("p2", 20, r, 2, None),
            ("p3", 30, r, 4, None))  # fmt: skip


def mixed(model: str) -> list[tuple[str, str, int]]:
    return [("n1", model, 8), ("n2", model, 4)]


def placed(report: dict[str, object]) -> dict[str, tuple[str, frozenset[int]]]:
    """Each running pod's node and HCCS rings (cards 0-3: ring 0, 4-7: ring 1)."""
    return {p["name"]: (p["node"], frozenset(d["index"] // 4 for d in p["devices"]))  # type: ignore[index]
            for p in report["pods"] if p["devices"]}  # type: ignore[attr-defined]  # fmt: skip


# --- admission: counts a 910A pod may ask ----------------------------------------------------


def _admitted(resource: str, cards: int) -> list[str]:
    workload = admit(load_documents(pods(("p", 0, resource, cards, None))), hami_parser(REG), REG.resource_names())
    return [r.line() for r in workload.rejections]


@pytest.mark.parametrize("cards", [3, 5, 6, 7, 9, 16])
def test_an_ascend910a_pod_of_a_count_its_rings_cannot_serve_is_refused_naming_the_rule(cards: int) -> None:
    assert _admitted("huawei.com/Ascend910A", cards) == [
        f"spec.containers[0].resources.limits.huawei.com/Ascend910A: must be 1, 2, 4 or 8 (Ascend910A chips "
        f"talk over HCCS rings of 4, 8 to a server; ascend-for-volcano's module910x8 refuses other counts) "
        f"(value: {cards})"]  # fmt: skip


@pytest.mark.parametrize(("resource", "cards"), [
    *(("huawei.com/Ascend910A", n) for n in (1, 2, 4, 8)),
    ("huawei.com/Ascend910B3", 3), ("huawei.com/Ascend910B3", 6),  # module910bx8: any count up to 8
    ("huawei.com/Ascend910", 3),  # a family name: its model is known at placement
])  # fmt: skip
def test_counts_a_ring_serves_and_other_models_counts_are_admitted(resource: str, cards: int) -> None:
    assert _admitted(resource, cards) == []


# --- placement: a family name's pod on 910A cards ---------------------------------------------


def test_a_family_pod_of_3_cards_waits_on_910a_cards_saying_the_counts_they_take() -> None:
    sc = scenario([("n1", "Ascend910A", 8)], ("f", 0, "huawei.com/Ascend910", 3, None))
    (f,) = run_engine(sc)["pods"]
    assert f["phase"] == "Pending" and not f["devices"] and "RingCountNotFit" in f["reason"], f
    events = [e for _, _, e in decoded(engine_log(sc))[0]]
    (u,) = {e.why: e for e in events if isinstance(e, JobUnschedulable)}.values()
    assert ("Ascend910: asked 3 cards, and the node's are Ascend910A, where a pod asks 1, 2, 4 or 8 (Ascend910A "
            "chips talk over HCCS rings of 4, 8 to a server; ascend-for-volcano's module910x8 refuses other "
            "counts) [8/8 RingCountNotFit]") in u.why, u.why  # fmt: skip
    assert u.unblock == "ask 1, 2, 4 or 8 cards per pod; or run it where other Ascend910 models are (their pods may take 3)"
    (spec,) = [e.spec for e in events if isinstance(e, JobSubmitted)]
    line = podreasons.nodes_line(u.node_reasons, 1, spec)
    assert line == "0/1 nodes are available: 1 has only Ascend910A cards, where a pod asks 1, 2, 4 or 8 (HCCS rings of 4), not 3."


def test_a_family_pod_of_6_cards_goes_to_the_910b_node_not_across_the_910a_rings() -> None:
    sc = scenario([("n1", "Ascend910A", 8), ("n2", "Ascend910B3", 8)], ("f", 0, "huawei.com/Ascend910", 6, None))
    assert placed(run_engine(sc))["f"][0] == "n2"


# --- node ranking by ring fit -----------------------------------------------------------------


@pytest.mark.parametrize("model", ["Ascend910A", "Ascend910B3"])
def test_1_2_4_cards_fill_the_ring_that_fits_them_and_the_4_card_pod_gets_a_whole_ring(model: str) -> None:
    got = placed(run_engine(scenario(mixed(model), *sequence(model))))
    assert got["p1"][0] == got["p2"][0] == "n2", got
    assert got["p3"] == ("n1", frozenset({0})), got


@pytest.mark.parametrize("model", ["Ascend910A", "Ascend910B3"])
def test_under_spread_the_1_and_2_card_pods_fill_a_broken_ring_not_the_empty_node(model: str) -> None:
    """NodeSchedulePolicy spread sends a pod to the emptiest node; a worse ring fit outweighs it.
    Before, the 1-card pod broke the empty node's ring, the 2-card pod took the other, and the
    4-card pod was split 3 + 1 across the rings (910B) or waited (910A)."""
    r = f"huawei.com/{model}"
    sc = scenario([("n1", model, 8), ("n2", model, 8)], ("a", 0, r, 4, "n2"), ("b", 0, r, 1, "n2"),
                  ("p1", 10, r, 1, None), ("p2", 20, r, 2, None), ("p3", 30, r, 4, None), conf=SPREAD)  # fmt: skip
    got = placed(run_engine(sc))
    assert got["p1"][0] == got["p2"][0] == "n2", got
    assert got["p3"][0] == "n1" and len(got["p3"][1]) == 1, got


def test_the_reviews_2_2_4_on_one_node_is_unchanged() -> None:
    """frag2a (test_hccs_rings): the second 2-card pod joins the first's ring, the 4-card pod
    takes the other ring — a card choice, which the ranking leaves alone."""
    r = "huawei.com/Ascend910A"
    got = placed(run_engine(scenario([("n1", "Ascend910A", 8)], ("q1", 0, r, 2, None), ("q2", 10, r, 2, None),
                                     ("q3", 20, r, 4, None))))  # fmt: skip
    assert got["q1"][1] == got["q2"][1] and len(got["q3"][1]) == 1 and got["q3"][1] != got["q1"][1], got


# --- a log of generation 2 --------------------------------------------------------------------


def test_a_log_of_generation_2_that_broke_a_whole_ring_and_placed_a_3_card_family_pod_on_910a_verifies() -> None:
    """ring-rank.jsonl: `sequence("Ascend910A")` on `mixed("Ascend910A")`, then at 40 s a family
    pod `f` of 3 cards pinned to n3 (4 Ascend910A cards, tainted for it alone), simulated by main
    at 282e4bd (rules generation 2): p1 went to n1 and p3 waited; f took 3 cards of n3. It
    verifies as it ran; read by generation 3 it diverges (p1 would go to n2, f wait)."""
    stored, poisoned = decoded(read_jsonl(FIXTURES / "ring-rank.jsonl"))
    assert not poisoned
    assert {e.rules for _, _, e in stored if isinstance(e, SchedulerConfigured)} == {RING_RANK - 1}
    nodes = {e.name: {p.node for p in e.placements} for _, _, e in stored if isinstance(e, PlacementProposed)}
    assert nodes["p1"] == {"n1"} and "p3" not in nodes and nodes["f"] == {"n3"}, nodes
    verdict = verify(stored)
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    now = [(s, h, msgspec.structs.replace(e, rules=RING_COUNT_FIT) if isinstance(e, SchedulerConfigured) else e)
           for s, h, e in stored]  # fmt: skip
    d = verify(now).divergence  # the first: a's score, its whole ring now in it (its node the same)
    assert d is not None and isinstance(d.rederived, PlacementProposed) and d.rederived.name == "a", d
    assert [p.node for p in d.rederived.placements] == ["n1"]
    assert "placements[0].score: 300.0 → 4300.0" in d.fields, d.fields
