"""Placement policies (services/core/placement) and the openb replay harness (benchmarks/openb).

Hand-built clusters whose right answers follow from perf.md §1.3/§1.4 by hand, plus a small
end-to-end replay on a slice of the real openb cluster.
"""

from __future__ import annotations

import itertools
import random

import pytest

from benchmarks.openb import Curve, replay, run_one
from benchmarks.openb_trace import (
    arrival_sequence,
    capacity_milli,
    data_dir,
    load_nodes,
    load_trace,
)
from services.core.devices.policies import PLACEMENT_POLICIES
from services.core.placement import (
    POLICIES,
    FragmentationModel,
    NodeView,
    Placer,
    Request,
    Shape,
    TargetWorkload,
    apply,
    build_policies,
    choose,
    fits,
    shape_fragmentation,
)
from services.core.placement.tessera import (
    TesseraPolicy,
    claimed_below,
    model_claims,
    residual_waste,
    slice_sizes,
)
from services.core.scheduling.config import PluginConf
from services.core.scheduling.plugins.deviceshare import DeviceSharePlugin

DS_POLICY = "deviceshare.SchedulePolicy"
HALF = Shape(cpu_milli=1000, num_cards=1, card_milli=500)
CPU_ONLY = Shape(cpu_milli=4000, num_cards=0, card_milli=0)


def node(
    name: str, cards: tuple[int, ...], cpu: int = 64_000, mem: int = 256_000, model: str = "G2"
):
    return NodeView(name, cpu, mem, model, cards)


# --- fragmentation (perf.md §1.3) -------------------------------------------------------------


def test_case2_counts_only_cards_too_small_for_the_shape() -> None:
    assert shape_fragmentation(HALF, "G2", 64_000, (1000, 300, 600)) == 300


def test_case1_cpu_shortage_makes_all_idle_cards_fragment() -> None:
    assert shape_fragmentation(HALF, "G2", 500, (1000, 300, 600)) == 1900


def test_case1_too_few_fitting_cards_makes_all_idle_cards_fragment() -> None:
    two_whole = Shape(cpu_milli=1000, num_cards=2, card_milli=1000)
    assert shape_fragmentation(two_whole, "G2", 64_000, (1000, 300, 600)) == 1900


def test_case1_model_filter_makes_all_idle_cards_fragment() -> None:
    v100_only = Shape(cpu_milli=1000, num_cards=1, card_milli=500, models=("V100M32",))
    assert shape_fragmentation(v100_only, "G2", 64_000, (1000,)) == 1000
    assert shape_fragmentation(v100_only, "V100M32", 64_000, (1000,)) == 0


def test_cpu_only_task_sees_every_idle_card_as_fragment() -> None:
    assert shape_fragmentation(CPU_ONLY, "G2", 64_000, (1000, 250)) == 1250
    assert shape_fragmentation(CPU_ONLY, "G2", 64_000, (0, 0)) == 0


def test_node_fragmentation_is_the_expectation_over_the_workload() -> None:
    workload = TargetWorkload(((HALF, 0.75), (CPU_ONLY, 0.25)))
    model = FragmentationModel(workload)
    rng = random.Random(7)
    for _ in range(200):
        cards = tuple(rng.choice((0, 120, 499, 500, 730, 1000)) for _ in range(rng.randint(1, 8)))
        cpu = rng.choice((0, 999, 1000, 50_000))
        want = 0.75 * shape_fragmentation(HALF, "G2", cpu, cards) + 0.25 * sum(cards)
        assert model.amount("G2", cpu, cards) == pytest.approx(want)
        # Card order is irrelevant to F.
        assert model.amount("G2", cpu, tuple(reversed(cards))) == pytest.approx(want)


def test_target_workload_keeps_most_frequent_shapes_up_to_coverage() -> None:
    reqs = [Request(1000, 10, 1, 500)] * 90 + [Request(2000, 10, 1, 1000)] * 8 + [Request(8, 1)] * 2
    w = TargetWorkload.from_requests(reqs, coverage=0.95)
    assert [s for s, _ in w.shapes] == [
        Shape(1000, 1, 500),
        Shape(2000, 1, 1000),
    ]
    assert sum(p for _, p in w.shapes) == pytest.approx(1.0)
    assert w.shapes[0][1] == pytest.approx(90 / 98)


# --- filter and model ------------------------------------------------------------------------


def test_filter_checks_cpu_memory_model_and_per_card_milli() -> None:
    n = node("a", (1000, 300), cpu=4000, mem=1000, model="T4")
    assert fits(n, Request(4000, 1000, 1, 1000))
    assert not fits(n, Request(4001, 10, 1, 100))
    assert not fits(n, Request(10, 1001, 1, 100))
    assert not fits(n, Request(10, 10, 2, 500))
    assert fits(n, Request(10, 10, 2, 300))
    assert not fits(n, Request(10, 10, 1, 100, frozenset({"V100M32"})))
    assert fits(n, Request(10, 10, 1, 100, frozenset({"V100M32", "T4"})))
    assert fits(node("cpu", ()), Request(10, 10))


def test_apply_debits_cpu_memory_and_the_chosen_cards() -> None:
    after = apply(node("a", (1000, 1000)), Request(1000, 100, 1, 300), (1,))
    assert (after.cpu_milli, after.memory_mib, after.cards) == (63_000, 255_900, (1000, 700))
    with pytest.raises(ValueError):
        apply(after, Request(1, 1, 1, 800), (1,))


# --- policy choices derivable by hand --------------------------------------------------------


def test_fgd_avoids_creating_a_fragment_where_bestfit_fills_the_tightest_node() -> None:
    # M = {one 0.5-card slice}. A 0.3 slice on B (0.7 free) leaves 0.4 < 0.5: a new fragment
    # (ΔF = +400). On A (1.0 free) it leaves 0.7, still usable (ΔF = 0). FGD picks A; BestFit
    # minimises leftover and picks B.
    workload = TargetWorkload(((HALF, 1.0),))
    nodes = [node("B", (700,)), node("A", (1000,))]
    req = Request(1000, 100, 1, 300)
    assert choose(req, nodes, workload, "fgd").node == "A"
    assert choose(req, nodes, workload, "fgd-exact").node == "A"
    assert choose(req, nodes, workload, "tessera").node == "A"
    assert choose(req, nodes, workload, "bestfit").node == "B"


def test_fgd_card_choice_keeps_a_usable_slice_where_bestfit_takes_the_tightest_card() -> None:
    # M = {0.6-card slice}. Taking 0.3 from the 0.8 card leaves 0.5 < 0.6 (fragment); taking it
    # from the whole card leaves 0.7 and 0.8, both usable.
    workload = TargetWorkload(((Shape(1000, 1, 600), 1.0),))
    n = [node("C", (1000, 800))]
    req = Request(1000, 100, 1, 300)
    assert choose(req, n, workload, "fgd").cards == (0,)
    assert choose(req, n, workload, "bestfit").cards == (1,)


def test_whole_card_requests_bind_the_lowest_free_cards() -> None:
    workload = TargetWorkload(((HALF, 1.0),))
    n = [node("D", (200, 1000, 1000, 1000))]
    assert choose(Request(1000, 100, 2, 1000), n, workload, "fgd").cards == (1, 2)


def test_tessera_sends_cpu_only_pods_to_cpu_rich_nodes() -> None:
    # Workload brings 10 CPU milli per card milli. G has exactly enough CPU for its two cards;
    # T has plenty. An 8-core CPU-only pod fits on both without breaking any typical shape
    # (ΔF = 0 everywhere), so FGD falls back to node order and strands G's cards; Tessera
    # counts the card milli G could no longer feed and picks T.
    gpu = Shape(cpu_milli=10_000, num_cards=1, card_milli=1000)
    workload = TargetWorkload(((gpu, 0.5), (CPU_ONLY, 0.5)))
    nodes = [node("G", (1000, 1000), cpu=20_000), node("T", (1000, 1000), cpu=100_000)]
    req = Request(8000, 100)
    assert choose(req, nodes, workload, "fgd").node == "G"
    assert choose(req, nodes, workload, "tessera").node == "T"


def test_residual_waste_is_zero_when_slices_tile_a_card_exactly() -> None:
    w = residual_waste(TargetWorkload(((HALF, 1.0),)))
    assert w[1000] == 0 and w[500] == 0
    assert w[499] == 499 and w[700] == 200


BIG = Shape(3000, 1, 810)
FILLER = Shape(1000, 1, 160)
MID = Shape(8000, 1, 470)
THIRD = Shape(4000, 1, 320)


def test_small_slices_rarer_than_the_big_slices_holes_are_claimed_by_them() -> None:
    rare = TargetWorkload(((BIG, 0.4), (MID, 0.3), (THIRD, 0.25), (FILLER, 0.05)))
    assert claimed_below(slice_sizes(rare)) == 190
    # As many 160s as 810s: the holes no longer absorb them all, nothing is claimed.
    common = TargetWorkload(((BIG, 0.3), (MID, 0.2), (THIRD, 0.2), (FILLER, 0.3)))
    assert claimed_below(slice_sizes(common)) == 0


def test_residual_waste_does_not_count_on_claimed_fillers() -> None:
    # 470 + 320 leaves 210: only a 160 fits there. When the 160s are claimed by the 810s'
    # holes the 210 is written off; when they are plentiful it is expected to shrink to 50.
    rare = residual_waste(TargetWorkload(((BIG, 0.4), (MID, 0.3), (THIRD, 0.25), (FILLER, 0.05))))
    assert rare[210] == 210
    common = residual_waste(TargetWorkload(((BIG, 0.3), (MID, 0.2), (THIRD, 0.2), (FILLER, 0.3))))
    assert common[210] == 50


def test_tessera_opens_a_card_rather_than_leave_a_hole_only_claimed_fillers_fit() -> None:
    # A 320 slice: on A (530 free) it leaves 210, which only the scarce 160s could use; on B it
    # opens a card whose 680 takes a 470 or two 320s. FGD sees a smaller fragment on A.
    workload = TargetWorkload(((BIG, 0.4), (MID, 0.3), (THIRD, 0.25), (FILLER, 0.05)))
    nodes = [node("A", (530, 0)), node("B", (1000, 0))]
    req = Request(4000, 1000, 1, 320)
    assert choose(req, nodes, workload, "fgd").node == "A"
    assert choose(req, nodes, workload, "tessera").node == "B"


def test_model_claims_weigh_constrained_demand_against_the_models_cards() -> None:
    # Half the pods need a T4 card, half take any card. Ten cards, two of them T4: the whole
    # workload loads an average card with 1/10 of the demand, the T4-only half alone puts 1/4 on
    # each T4 card, far above average: claim capped at 1. G2 is claimed by no one.
    t4 = Shape(1000, 1, 1000, ("T4",))
    anyc = Shape(1000, 1, 1000)
    w = TargetWorkload(((t4, 0.5), (anyc, 0.5)))
    assert model_claims(w, {"T4": 2, "G2": 8}) == {"T4": 1.0}
    # With many T4 cards the claim is the ratio to the average load: (0.5/8) / (1/10) = 0.625.
    assert model_claims(w, {"T4": 8, "G2": 2}) == {"T4": pytest.approx(0.625)}
    assert model_claims(TargetWorkload(((anyc, 1.0),)), {"T4": 2, "G2": 8}) == {}


def test_tessera_keeps_unconstrained_pods_off_a_model_constrained_pods_need() -> None:
    # A CPU-only pod changes no node's F and strands nothing on either node, so without an
    # inventory it goes to the first node, the T4 one, and takes CPU the T4-only pods need.
    # With the inventory (two T4 cards out of ten, claimed by half the workload) it pays for
    # that and goes to the G2 node; a T4-only pod still goes to T4.
    t4 = Shape(1000, 1, 1000, ("T4",))
    w = TargetWorkload(((t4, 0.5), (Shape(1000, 1, 1000), 0.5)))
    nodes = [
        node("t", (1000, 1000), cpu=100_000, model="T4"),
        node("g", (1000,) * 8, cpu=16_000, model="G2"),
    ]
    cpu_only = Request(8000, 100)
    assert Placer(nodes, TesseraPolicy(w)).choose(cpu_only).node == "t"
    assert choose(cpu_only, nodes, w, "tessera").node == "g"
    t4_only = Request(1000, 100, 1, 1000, frozenset({"T4"}))
    assert choose(t4_only, nodes, w, "tessera").node == "t"


def test_random_policy_is_seeded() -> None:
    workload = TargetWorkload(((HALF, 1.0),))
    nodes = [node(f"n{i}", (1000, 1000, 1000)) for i in range(20)]
    req = Request(1000, 100, 1, 500)
    pick = [choose(req, nodes, workload, "random", random.Random(3)) for _ in range(3)]
    assert pick[0] == pick[1] == pick[2]
    others = {choose(req, nodes, workload, "random", random.Random(s)).node for s in range(20)}
    assert len(others) > 1


def test_registry_is_built_by_a_function_and_complete() -> None:
    assert build_policies().keys() == POLICIES.keys()
    assert {"random", "bestfit", "packing", "dotproduct", "fgd", "tessera"} <= POLICIES.keys()
    assert isinstance(POLICIES["tessera"](TargetWorkload(((HALF, 1.0),))), TesseraPolicy)


def test_every_placement_name_the_scheduler_accepts_is_a_registered_policy() -> None:
    # deviceshare.SchedulePolicy routes these names to services.core.placement instead of HAMi.
    assert PLACEMENT_POLICIES <= POLICIES.keys()
    for name in PLACEMENT_POLICIES:
        plugin = DeviceSharePlugin(PluginConf("deviceshare", {}, {DS_POLICY: name}))
        assert plugin.placement == name
        assert plugin.config.card_ranker is not None
    spread = DeviceSharePlugin(PluginConf("deviceshare", {}, {DS_POLICY: "spread"}))
    assert spread.placement == "" and spread.config.card_ranker is None


def test_score_step_is_declared_exactly_for_quantised_scores() -> None:
    # The scheduler breaks ties with a fraction of score_step; a continuous score must not
    # declare one, or the tie-break could reorder genuinely different scores.
    w = TargetWorkload(((HALF, 1.0),))
    assert POLICIES["fgd"](w).score_step == 1.0
    assert POLICIES["tessera"](w).score_step == 1.0
    assert POLICIES["fgd-exact"](w).score_step is None
    assert TesseraPolicy(w, quantum=0).score_step is None
    rng = random.Random(5)
    for _ in range(100):
        cards = tuple(rng.choice((0, 200, 530, 1000)) for _ in range(rng.randint(1, 4)))
        view, req = node("q", cards), Request(1000, 100, 1, rng.choice((100, 470, 810)))
        if fits(view, req):
            for name in ("fgd", "tessera"):
                score = POLICIES[name](w).evaluate(view, req).score
                assert score == int(score)  # type: ignore[arg-type]


def test_placer_drops_requests_that_fit_nowhere_and_caches_per_node() -> None:
    workload = TargetWorkload(((HALF, 1.0),))
    placer = Placer([node("a", (1000,)), node("b", (1000,))], POLICIES["tessera"](workload))
    req = Request(1000, 100, 1, 600)
    assert placer.place(req) is not None
    assert placer.place(req) is not None
    assert placer.place(req) is None  # both cards now hold 400: nothing fits
    assert sorted(n.cards for n in placer.nodes) == [(400,), (400,)]
    assert placer.pods_on("a") == placer.pods_on("b") == 1


# --- the replay harness on a slice of the real trace -----------------------------------------

needs_data = pytest.mark.skipif(
    not (data_dir() / "openb_node_list_gpu_node.csv").exists(), reason="openb data not present"
)


@pytest.fixture(scope="module")
def small_cluster() -> tuple[list[NodeView], list[Request]]:
    nodes = load_nodes()[::24]  # 51 nodes spread over all models
    trace = load_trace("default")
    return nodes, trace


@needs_data
def test_arrival_sequence_is_seeded_and_inflated_to_130_percent(small_cluster) -> None:
    nodes, trace = small_cluster
    cap = capacity_milli(nodes)
    a = arrival_sequence(trace[:250], cap, 42)
    assert a == arrival_sequence(trace[:250], cap, 42)
    assert a != arrival_sequence(trace[:250], cap, 43)
    total = sum(p.gpu_milli for p in a)
    assert 1.3 * cap <= total < 1.3 * cap + 8000
    assert sorted(map(id, a[:250])) == sorted(map(id, trace[:250]))  # a permutation, then extras


@needs_data
@pytest.mark.parametrize("policy", ["fgd", "tessera", "bestfit"])
def test_small_replay_metrics_are_consistent(small_cluster, policy: str) -> None:
    nodes, trace = small_cluster
    cap = capacity_milli(nodes)
    workload = TargetWorkload.from_requests(trace)
    pods = arrival_sequence(trace[:250], cap, 42)
    curve, failed, final = replay(nodes, pods, policy, workload, tie_seed=1)
    # Nothing is over-committed.
    original = {n.name: n for n in nodes}
    for n in final.values():
        assert n.cpu_milli >= 0 and n.memory_mib >= 0
        assert all(0 <= c <= 1000 for c in n.cards)
        assert len(n.cards) == len(original[n.name].cards)
    buckets = sorted(curve.alloc_pct)
    assert buckets[0] <= 1 and buckets[-1] == 130
    for b in buckets:
        assert 0.0 <= curve.alloc_pct[b] <= min(100.0, b + 1.0)
        assert 0.0 <= curve.frag_rate_pct[b] <= 100.0
    # No departures: allocation never falls, so unallocated never rises.
    allocs = [curve.alloc_pct[b] for b in buckets]
    assert all(x <= y + 1e-9 for x, y in itertools.pairwise(allocs))
    # Early on everything fits; by 130% some pods must have been dropped.
    assert curve.alloc_pct[buckets[len(buckets) // 4]] >= buckets[len(buckets) // 4] - 1.5
    assert failed > 0
    assert 100.0 - curve.at(curve.alloc_pct, 100) < 40.0


@needs_data
def test_replay_is_deterministic(small_cluster) -> None:
    nodes, trace = small_cluster
    workload = TargetWorkload.from_requests(trace)
    pods = arrival_sequence(trace[:250], capacity_milli(nodes), 5)
    a = replay(nodes, pods, "tessera", workload, tie_seed=9)
    b = replay(nodes, pods, "tessera", workload, tie_seed=9)
    assert a[0] == b[0] and a[1] == b[1]


def test_curve_falls_back_to_neighbouring_buckets() -> None:
    c = Curve({99: 90.0, 101: 92.0}, {})
    assert c.at(c.alloc_pct, 100) == 91.0
    assert c.at(c.alloc_pct, 99) == 90.0


@needs_data
def test_run_one_record_shape() -> None:
    # Full-size cluster, so keep it to the cheap policy; checks the JSON record fields.
    r = run_one("multigpu50", "bestfit", 42)
    assert r.trace == "multigpu50" and r.policy == "bestfit" and r.seed == 42
    assert 0 < r.unallocated_pct_at_100 < 30 and 0 < r.unallocated_pct_at_130 < 30
    assert 0 < r.frag_rate_at_90 <= 100
