"""Issue 13 item 8: HAMi's per-node `vDeviceCount` (node-config.yaml, hami.md §2.6) makes the
article's "one 64 GB 910B serves 8 × 8 GB tasks" reachable; without it (4 slices per hami-core
910B3) the pending reason says the slice count, not memory, ran out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.core.devices.nodeconfig import NodeConfigError, parse_node_config
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.simulate.report import build_report
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.nodeagent.__main__ import hosted_nodes, parser
from tests.core.scheduling.scenarios import vendors

NODE_CONFIG = """
nodes:
- name: n1
  hami-vnpu-core: true
  vDeviceCount: 8
  filterDevices: {index: [1], uuid: []}
"""
INVENTORY = {"nodes": [{"name": "n1", "cpu": 64, "memory": "256Gi",
                        "devices": [{"type": "Ascend910B3", "count": 2}]}]}  # fmt: skip


def _tasks(n: int) -> str:
    return "".join(f"""---
apiVersion: v1
kind: Pod
metadata: {{name: t{i}, annotations: {{huawei.com/vnpu-mode: hami-core}}}}
spec: {{containers: [{{name: c, image: busybox, resources: {{limits: {{huawei.com/Ascend910B3: 1, huawei.com/Ascend910B3-memory: 8192}}}}}}]}}
""" for i in range(n))  # fmt: skip


def _run(node_config: str | None) -> dict:  # type: ignore[type-arg]
    reg = vendors()
    cfg = parse_node_config(node_config) if node_config else None
    inventory = {"nodes": [{**INVENTORY["nodes"][0], "annotations": {"hami-vnpu-core": "true"},
                            "devices": [{"type": "Ascend910B3", "count": 1}]}]}  # fmt: skip
    work = admit(load_documents(_tasks(8)), hami_parser(reg), reg.resource_names())
    nodes = load_inventory(inventory, reg.catalogue, cfg)
    sim = load_simulation(parse_conf(DEFAULT_CONF), reg, nodes, work)
    sim.run()
    return build_report(sim.log.messages())


def test_one_64gb_card_serves_eight_8gb_tasks_with_vdevicecount_8() -> None:
    report = _run("nodes: [{name: n1, vDeviceCount: 8}]")
    assert {p["name"]: p["phase"] for p in report["pods"]} == {f"t{i}": "Running" for i in range(8)}
    (card,) = report["cards"]
    assert (card["slices_used"], card["slices_total"], card["memory_used"]) == (8, 8, 65536)


def test_without_it_the_reason_says_the_slice_count_not_memory_is_exhausted() -> None:
    report = _run(None)
    pending = [p for p in report["pods"] if p["phase"] == "Pending"]
    assert len(pending) == 4
    for p in pending:
        assert "the slice count, not memory, is exhausted (4/4 slices used" in p["reason"], p
        assert "32768 MB free" in p["reason"]


def test_node_config_sets_split_count_soft_slicing_and_filtered_cards() -> None:
    (node,) = load_inventory(INVENTORY, vendors().catalogue, parse_node_config(NODE_CONFIG))
    assert node.annotations["hami-vnpu-core"] == "true"
    (card,) = node.cards  # index 1 is filtered out
    assert (card.index, card.split_count, card.mode, card.cores) == (0, 8, "hami-core", 100)
    (default,) = load_inventory({"nodes": [{**INVENTORY["nodes"][0], "name": "n2"}]},
                                vendors().catalogue, parse_node_config(NODE_CONFIG))[0:1]  # fmt: skip
    assert [c.split_count for c in default.cards] == [4, 4]  # not named: HAMi's default


@pytest.mark.parametrize(("text", "error"), [
    ("nodes: [{name: n1, vDeviceCunt: 8}]", "nodes[0].vDeviceCunt: unknown field"),
    ("nodes: [{name: n1, vDeviceCount: 0}]", "nodes[0].vDeviceCount: must be an integer >= 1"),
    ("nodes: [{vDeviceCount: 8}]", "nodes[0].name: required"),
    ("nodes: [{name: n1, filterDevices: {idx: [1]}}]", "filterDevices.idx: unknown field"),
    ("nodes: [{name: n1}, {name: n1}]", "duplicate node n1"),
])  # fmt: skip
def test_a_bad_node_config_names_the_field(text: str, error: str) -> None:
    with pytest.raises(NodeConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_node_config(text)


def test_the_node_agent_registers_cards_with_the_node_configs_split_count(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(INVENTORY))
    cfg = tmp_path / "node-config.yaml"
    cfg.write_text(NODE_CONFIG)
    args = parser().parse_args(["--nats", "nats://127.0.0.1:1", "--inventory", str(inv),
                                "--node-config", str(cfg)])  # fmt: skip
    (node,) = hosted_nodes(args)
    assert [(c.index, c.split_count) for c in node.cards] == [(0, 8)]
