"""explain's words for a gang its network topology holds (issue 25): the tier, the resource the
best HyperNode lacks and how much it has, the plugin, and what would let it run — not the nodes,
which each have room. Rows from the hypernodes table, so the scenarios and the words agree."""

from __future__ import annotations

import dataclasses

import pytest

from services.core.scheduling.actions import topology
from services.core.scheduling.actions.topology import PLUGIN
from services.core.scheduling.hypernodes import ROOT, build
from services.core.simulate.inventory import load_hypernodes
from tests.core.scheduling.scenarios import bound_of, load_table, run_core
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("hypernodes")}


def test_a_superpod_short_of_cards_is_named_with_what_it_has() -> None:
    u = unschedulable(ROWS["A1-hard-superpod-short-of-cards"], "default/train")
    assert (u.plugin, u.why) == (
        PLUGIN,
        "no tier-1 HyperNode has 16 free Ascend910B3 cards; s1 has 12",
    )
    assert u.unblock == ("free room in one tier-1 HyperNode, or raise "
                         "spec.networkTopology.highestTierAllowed to 2")  # fmt: skip
    assert u.node_reasons == {} and u.groups == ()  # no node refused a pod: the HyperNodes did


def test_cpu_short_in_every_hypernode_of_the_tier() -> None:
    u = unschedulable(ROWS["V2-hard-cannot-cross-highest-tier-allowed"], "c1/pg1")
    assert (u.plugin, u.why) == (PLUGIN, "no tier-1 HyperNode has 6 cpu in all; the largest, s0, has 4 cpu")
    assert u.unblock == "raise spec.networkTopology.highestTierAllowed to 2"  # s2 has 8 cpu


def test_a_gang_larger_than_every_hypernode_of_its_tier_is_not_told_to_free_room() -> None:
    """spine has 32 cards in all and the gang wants 40: freeing never helps; the root (tier 3,
    every node, c's too) holds it."""
    u = unschedulable(ROWS["A10-hard-larger-than-every-hypernode-of-its-tier"], "default/big5")
    assert u.why == ("no tier-2 HyperNode has 40 Ascend910B3 cards in all; the largest, spine, "
                     "has 32 Ascend910B3 cards")  # fmt: skip
    assert u.unblock == ("raise spec.networkTopology.highestTierAllowed to 3 (above the cluster's "
                         "top tier: anywhere in the cluster)")  # fmt: skip


def test_without_hypernodes_the_root_is_tier_1() -> None:
    u = unschedulable(ROWS["A12-no-hypernodes-tier-0-allows-nothing"], "default/train")
    assert u.unblock == ("raise spec.networkTopology.highestTierAllowed to 1 (above the cluster's "
                         "top tier: anywhere in the cluster)")  # fmt: skip


def test_an_unusable_tree_says_which_hypernode_has_two_parents() -> None:
    u = unschedulable(ROWS["A7-a-hypernode-with-two-parents-holds-hard-gangs"], "default/train")
    assert u.why == ("the HyperNode tree cannot be used: HyperNode s0 is a member of both up1 and up2 "
                     "(a HyperNode has one parent)")  # fmt: skip


def test_the_tree_resolves_members_and_common_ancestors() -> None:
    inv = ROWS["V3-hard-can-allocate-when-highest-tier-not-reached"].inventory
    labels = {n["name"]: {} for n in inv["nodes"]}
    topo = build(load_hypernodes(inv), labels)
    assert topo.nodes["s1"] == {"s1-n3", "s1-n4"}  # regexMatch ^s1-
    assert topo.nodes["s2"] == set(labels)
    assert (topo.lca("s0", "s1"), topo.lca("s0", "s0"), topo.spanning(["s0-n1", "s1-n4"])) == (
        "s2",
        "s0",
        "s2",
    )
    assert topo.tiers == (1, 2, 3) and topo.real_tiers == (1, 2) and topo.problem == ""
    # Volcano's virtual root: one tier above the top, every node, parent of every root HyperNode
    assert (topo.root_tier, topo.tier[ROOT], topo.nodes[ROOT], topo.parent["s2"]) == (
        3, 3, set(labels), ROOT)  # fmt: skip
    two = build(load_hypernodes(inv)[:2], {**labels, "outside": {}})  # no s2: no common ancestor
    assert (two.root_tier, two.lca("s0", "s1"), two.spanning(["s0-n1", "s1-n3"])) == (2, ROOT, ROOT)
    assert two.spanning(["s0-n1", "outside"]) == ROOT and two.spanning(["gone"]) is None
    assert build([], {"n": {}}).by_tier == {1: (ROOT,)}  # no HyperNodes: the root is tier 1
    cyclic = build([*load_hypernodes(inv)[:2], *load_hypernodes({"hypernodes": [
        {"metadata": {"name": "s2"}, "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s3"}}}]}},
        {"metadata": {"name": "s3"}, "spec": {"tier": 3, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s2"}}}]}},
    ]})], labels)  # fmt: skip
    assert cyclic.problem == "HyperNodes s2 → s3 → s2 form a cycle"


def test_jobs_asking_no_highest_tier_never_build_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root holds every node: building it is per-node work, paid only by a gang with a
    highest tier (issue 29's hot path) — not by one without networkTopology, nor by hard mode
    without a tier."""

    def refuse(*_: object) -> None:
        raise AssertionError("the HyperNode tree was built")

    monkeypatch.setattr(topology, "build", refuse)
    sc = ROWS["A6-hard-without-a-highest-tier-constrains-nothing"]
    plain = dataclasses.replace(sc, workload=sc.workload.replace("networkTopology: {mode: hard}, ", ""))
    for row in (sc, plain):
        assert len(bound_of(run_core(row).decisions)) == 4
