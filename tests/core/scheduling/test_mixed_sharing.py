"""A gang on whole 910B3 cards shares two nodes with vNPU-template and hami-core inference pods.

Run as a whole simulation (in-process engine; the CLI's report must be identical): no card is
over-committed, a gang is bound all at once or not at all, and the inference pods land where
HAMi's default policies put them — node binpack (the busier node first), card spread (the
emptiest card of the node first), hami-core pods only on the hami-core node.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.events import PlacementCommitted
from contracts.registry import default_registry
from services.cli.main import main
from services.core.devices import build_vendors
from services.core.scheduling.config import default_conf
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.simulate.report import build_report
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from tests.core.scheduling.scenarios import FIXTURES

WORKLOAD = FIXTURES / "mixed_sharing.yaml"
INVENTORY = FIXTURES / "mixed_sharing_inventory.yaml"


@pytest.fixture(scope="module")
def run() -> tuple[dict[str, Any], list[PlacementCommitted]]:
    reg = build_vendors()
    workload = admit(load_documents(WORKLOAD.read_text()), hami_parser(reg), reg.resource_names())
    assert not workload.rejections
    nodes = load_inventory(yaml.safe_load(INVENTORY.read_text()), reg.catalogue)
    sim = load_simulation(default_conf(), reg, nodes, workload)
    sim.run()
    messages = sim.log.messages()
    codec = default_registry()
    commits = []
    for m in messages:
        ev = codec.decode(m.headers.get("Tessera-Type", ""), m.data)
        if isinstance(ev, PlacementCommitted):
            commits.append(ev)
    return build_report(messages), commits


def _pods(report: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [p for p in report["pods"] if p["name"].startswith(prefix)]


def test_no_card_is_over_committed(run: tuple[dict[str, Any], list[PlacementCommitted]]) -> None:
    report, _ = run
    whole = {d["uuid"] for p in report["pods"] for d in p["devices"]
             if d["template"] is None and d["memory"] == 65536}  # fmt: skip
    assert len(whole) == 6
    for c in report["cards"]:
        assert c["memory_used"] <= c["memory_total"], c
        assert c["cores_used"] <= c["cores_total"], c
        assert c["slices_used"] <= c["slices_total"], c
        if c["uuid"] in whole:
            assert c["slices_used"] == 1, c  # a whole card is never shared


def test_gangs_are_bound_whole_or_not_at_all(
    run: tuple[dict[str, Any], list[PlacementCommitted]],
) -> None:
    report, commits = run
    train = [c for c in commits if c.name == "train"]
    assert len(train) == 1 and {p.task for p in train[0].placements} == {
        "train-worker-0", "train-worker-1"
    }  # fmt: skip
    assert all(len(p.slices) == 3 for p in train[0].placements)
    assert not [c for c in commits if c.name == "big"]
    assert {p["phase"] for p in _pods(report, "big-")} == {"Pending"}


def test_inference_pods_follow_node_binpack_and_card_spread(
    run: tuple[dict[str, Any], list[PlacementCommitted]],
) -> None:
    report, _ = run
    assert {p["phase"] for p in report["pods"] if not p["name"].startswith("big-")} == {"Running"}
    train_node = {p["node"] for p in _pods(report, "train-")}
    assert train_node == {"node-a"}
    # node binpack: template pods fill the gang's (busier) node first — its 2 free cards × 4
    # vir05 slots — and only then go to node-b
    tmpl = {int(p["name"].split("-")[1]): p for p in _pods(report, "tmpl-")}
    assert [tmpl[i]["node"] for i in range(10)] == ["node-a"] * 8 + ["node-b"] * 2
    a_cards = Counter(tmpl[i]["devices"][0]["index"] for i in range(8))
    assert sorted(a_cards.values()) == [4, 4]
    # card spread: consecutive pods alternate between the emptiest cards
    assert tmpl[0]["devices"][0]["index"] != tmpl[1]["devices"][0]["index"]
    # hami-core pods only on the hami-core node; with the 2 template pods there, spread gives
    # every pod its own card
    soft = _pods(report, "soft-")
    assert {p["node"] for p in soft} == {"node-b"}
    assert all(d["template"] is None and d["cores"] == 25 for p in soft for d in p["devices"])
    b_cards = [p["devices"][0]["index"] for p in [*soft, tmpl[8], tmpl[9]]]
    assert sorted(b_cards) == list(range(8))


def test_cli_report_is_the_engine_report(
    run: tuple[dict[str, Any], list[PlacementCommitted]], tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    args = ["simulate", "--inventory", str(INVENTORY), "--workload", str(WORKLOAD)]
    assert main([*args, "--report", str(out)]) == 0
    assert json.loads(out.read_text()) == run[0]
