"""explain's words for a device name no node serves: which names their device plugins do
serve, and to ask one of them (or run Tessera's node side) — not a card count, which the
family name's cards would have made "the cluster has 0"."""

from __future__ import annotations

import dataclasses

from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from tests.core.scheduling.scenarios import _simulation, load_table
from tests.core.scheduling.scenarios import unschedulable_of as unschedulable

ROWS = {sc.name: sc for sc in load_table("served")}


def test_explain_names_what_the_nodes_serve_and_which_name_to_ask() -> None:
    u = unschedulable(ROWS["family-name-on-hami-nodes"], "default/family")
    assert u.plugin == "deviceshare"
    assert u.why == ("no node with Ascend910 cards serves huawei.com/Ascend910: their kubelets' device plugins "
                     "serve huawei.com/Ascend910B3 (bound there, the pod would start without the card)")  # fmt: skip
    assert u.unblock.startswith("ask for huawei.com/Ascend910B3 in the pod's resources, or run Tessera's node side")
    assert "the cluster has" not in u.reason, u.reason



def test_a_family_names_whole_cards_are_counted_over_its_models() -> None:
    u = unschedulable(ROWS["family-name-gang-larger-than-the-cluster"], "default/pair")
    assert u.why == "gang needs 2 whole Ascend910 cards, the cluster has 1", u.why


def test_nvidia_whole_cards_are_counted_over_the_models_hami_registers() -> None:
    """HAMi's registration types a GPU by model (`NVIDIA-A100`); a bare `nvidia.com/gpu` asks
    any ("NVIDIA", matched by containment as HAMi's fit does): counted by name, a gang of two
    was told the cluster has 0 cards."""
    u = unschedulable(ROWS["nvidia-gang-larger-than-the-cluster"], "default/pair")
    assert u.why == "gang needs 2 whole NVIDIA cards, the cluster has 1", u.why


def test_a_node_of_the_vendors_own_plugin_is_named_with_the_missing_registration() -> None:
    """The node advertises 8 Ascend910: "no node has a card, add a node with Ascend910 cards" sent
    the operator to buy hardware they have; the fix is the plugin that registers the cards."""
    u = unschedulable(ROWS["vendor-plugins-without-registration"], "default/npu")
    assert u.plugin == "deviceshare"
    assert u.why == ("the pod asks for huawei.com/Ascend910 (Ascend910); no node in the cluster has an Ascend910 "
                     "card Tessera can book: npu-1 serves huawei.com/Ascend910 from a device plugin without "
                     "HAMi's registration (hami.io/node-register-<CommonWord>); Tessera books slices only from "
                     "HAMi's registration, which HAMi's device plugins and Tessera's own node side write, and "
                     "whole cards also from a vendor plugin's count of a name pods ask (nvidia.com/gpu, "
                     "huawei.com/<model or family>)")  # fmt: skip
    assert u.unblock == ("on npu-1: install HAMi's ascend-device-plugin in place of the vendor's, or Tessera's "
                         "node side (chart value nodeAgent.devicePlugin: tessera)")  # fmt: skip
    g = unschedulable(ROWS["vendor-plugins-without-registration"], "default/gpu")
    assert "(hami.io/node-nvidia-register)" in g.why and "gpu-1" in g.unblock and "npu-1" not in g.why



def test_a_lost_node_with_the_cards_is_named_not_add_a_node() -> None:
    """The only node with Ascend910B3 cards lost (NodeLost: no heartbeat): "no node has a
    card, add a node" sent the operator to buy hardware they have; the node is named, not ready."""
    sc = dataclasses.replace(ROWS["family-name-on-hami-nodes"],
                             workload=ROWS["family-name-on-hami-nodes"].workload.split("---")[1])  # fmt: skip
    sim = _simulation(sc, cycles=0)
    sim.run()
    snap = sim.projection.snapshot()
    lost = dataclasses.replace(snap, nodes=tuple(dataclasses.replace(n, ready=False) for n in snap.nodes))
    (u,) = [u for u in decide(lost, parse_conf(sc.conf)).unschedulable if u.name == "model"]
    assert "n1 has Ascend910B3 cards but is not ready" in u.why, u.why
    assert u.unblock.startswith("bring n1 back"), u.unblock
    assert "add a node" in u.unblock and "add a node" not in u.unblock.split(",")[0]
