"""The device config's global `vnpus.hamiVnpuCore` (the mixed-cluster review's M3): HAMi's
scheduler reads it for a node without the `hami-vnpu-core` annotation (hami.md §2.4, Fit step
1), and ascend-device-plugin's `IsHamiVnpuCore` takes it when no node config says. Tessera loaded
it and read it nowhere: a hami-core pod waited ModeNotFit on every card."""

from __future__ import annotations

import dataclasses

from services.core.devices import NodeFit, NodeMisfit, build_vendors, fit_task, parse_container
from services.core.devices.catalogue import default_catalogue
from services.core.devices.nodeconfig import NodeDeviceConfig
from services.core.simulate.inventory import load_inventory
from services.nodeagent.inventory import discovered_node
from tests.core.devices.test_fit import npu, use
from tests.nodeagent.test_discovery import fixture

SOFT = {"huawei.com/vnpu-mode": "hami-core"}
GLOBAL_ON = dataclasses.replace(default_catalogue(), hami_vnpu_core=True)
ASK = {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 8192, "huawei.com/Ascend910B3-core": 30}


def test_the_scheduler_takes_the_global_switch_where_the_node_says_nothing() -> None:
    reg = build_vendors(GLOBAL_ON)
    reqs = parse_container(ASK, annotations=SOFT, registry=reg)
    cards = [(npu("c0", 0, cores=100), use())]
    assert isinstance(fit_task(cards, reqs, registry=reg, pod_annotations=SOFT), NodeFit)
    off = fit_task(cards, reqs, registry=reg, pod_annotations=SOFT, node_annotations={"hami-vnpu-core": "false"})
    assert isinstance(off, NodeMisfit) and off.message == "1/1 ModeNotFit"  # the node's word wins
    default = build_vendors()
    got = fit_task(cards, parse_container(ASK, annotations=SOFT, registry=default), registry=default,
                   pod_annotations=SOFT)  # fmt: skip
    assert isinstance(got, NodeMisfit) and got.message == "1/1 ModeNotFit"


def test_simulated_nodes_run_hami_core_unless_their_node_config_says() -> None:
    doc = {"nodes": [{"name": "a", "devices": [{"type": "Ascend910B3", "count": 1}]},
                     {"name": "b", "devices": [{"type": "Ascend910B3", "count": 1}]}]}  # fmt: skip
    a, b = load_inventory(doc, GLOBAL_ON, {"b": NodeDeviceConfig(name="b", hami_vnpu_core=False)})
    assert a.annotations.get("hami-vnpu-core") == "true" and [c.mode for c in a.cards] == ["hami-core"]
    assert [c.cores for c in a.cards] == [100]
    assert b.annotations.get("hami-vnpu-core") == "false" and [c.mode for c in b.cards] == ["template"]
    (plain,) = load_inventory({"nodes": doc["nodes"][:1]}, default_catalogue())
    assert "hami-vnpu-core" not in plain.annotations and [c.mode for c in plain.cards] == ["template"]


def test_discovered_cards_take_the_global_switch_unless_the_flag_or_node_config_says() -> None:
    text = fixture("npu-smi-910b3x8.txt")
    on = discovered_node("n1", 0, 0, npu_smi=text, catalogue=GLOBAL_ON)
    assert {c.mode for c in on.cards} == {"hami-core"} and on.annotations.get("hami-vnpu-core") == "true"
    off = discovered_node("n1", 0, 0, npu_smi=text, catalogue=GLOBAL_ON,
                          node_config=NodeDeviceConfig(name="n1", hami_vnpu_core=False))  # fmt: skip
    assert {c.mode for c in off.cards} == {"template"}
    flag = discovered_node("n1", 0, 0, npu_smi=text, hami_vnpu_core=True)
    assert {c.mode for c in flag.cards} == {"hami-core"}
    assert {c.mode for c in discovered_node("n1", 0, 0, npu_smi=text).cards} == {"template"}
