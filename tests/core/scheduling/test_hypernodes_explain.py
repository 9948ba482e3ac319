"""explain's words for a gang its network topology holds (issue 25): the tier, the resource the
best HyperNode lacks and how much it has, the plugin, and what would let it run — not the nodes,
which each have room. Rows from the hypernodes table, so the scenarios and the words agree."""

from __future__ import annotations

from services.core.scheduling.actions.topology import PLUGIN
from services.core.scheduling.hypernodes import build
from services.core.simulate.inventory import load_hypernodes
from tests.core.scheduling.scenarios import load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("hypernodes")}


def test_a_superpod_short_of_cards_is_named_with_what_it_has() -> None:
    u = unschedulable(ROWS["A1-hard-superpod-short-of-cards"], "default/train")
    assert (u.plugin, u.why) == (
        PLUGIN,
        "no tier-1 HyperNode has 16 free Ascend910B3 cards; s1 has 12",
    )
    assert u.unblock == ("free room in one tier-1 HyperNode, or raise "
                         "spec.networkTopology.highestTierAllowed")  # fmt: skip
    assert u.node_reasons == {} and u.groups == ()  # no node refused a pod: the HyperNodes did


def test_cpu_short_in_every_hypernode_of_the_tier() -> None:
    u = unschedulable(ROWS["V2-hard-cannot-cross-highest-tier-allowed"], "c1/pg1")
    assert (u.plugin, u.why) == (PLUGIN, "no tier-1 HyperNode has 6 cpu; s0 has 4 cpu")


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
    assert topo.tiers == (1, 2) and topo.problem == ""
    cyclic = build([*load_hypernodes(inv)[:2], *load_hypernodes({"hypernodes": [
        {"metadata": {"name": "s2"}, "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s3"}}}]}},
        {"metadata": {"name": "s3"}, "spec": {"tier": 3, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s2"}}}]}},
    ]})], labels)  # fmt: skip
    assert cyclic.problem == "HyperNodes s2 → s3 → s2 form a cycle"
