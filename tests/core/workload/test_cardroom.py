"""Issue 26 item 3: a request no card of the cluster can hold is refused at admission (the
field and the rule named), as Ascend's card capacity is; nothing is refused while the cluster
has no card of that vendor yet."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from contracts.devices import CardSpec
from services.cli.main import main
from services.core.devices import build_vendors
from services.core.workload import admit, load_documents
from services.core.workload.cardroom import largest_cards
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()
POD = """
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "MEM"}}}]
"""
CARDS = [CardSpec(uuid=f"g{i}", node=f"gpu-{i}", index=0, type=t, vendor="nvidia", memory=m, cores=100)
         for i, (t, m) in enumerate((("NVIDIA-A100-40G", 40960), ("NVIDIA-H100-80G", 81920)))]  # fmt: skip


def reasons(memory: int, cards: list[CardSpec]) -> list[str]:
    work = admit(load_documents(POD.replace("MEM", str(memory))), hami_parser(REG), REG.resource_names(),
                 largest=largest_cards(cards))  # fmt: skip
    return [r.line() for r in work.rejections]


def test_memory_beyond_the_largest_card_is_refused_naming_the_field_and_the_card() -> None:
    (line,) = reasons(90000, CARDS)
    assert "spec.containers[0].resources.limits.nvidia.com/gpumem" in line
    assert "90000" in line and "NVIDIA-H100-80G" in line and "81920 MB" in line


def test_what_one_card_holds_is_accepted_and_nothing_is_refused_without_cards() -> None:
    assert reasons(81920, CARDS) == []
    assert reasons(90000, []) == []  # no NVIDIA card registered yet: it may still come


def test_simulate_refuses_it_on_the_inventory_it_runs(tmp_path: Path) -> None:
    inv = {"nodes": [{"name": "gpu-1", "cpu": 16, "memory": "64Gi",
                      "devices": [{"type": "NVIDIA-A100", "count": 2, "memory": 40960}]}]}  # fmt: skip
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    (tmp_path / "w.yaml").write_text(POD.replace("MEM", "90000"))
    report = tmp_path / "r.json"
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
                 "--report", str(report)]) == 0  # fmt: skip
    (job,) = [p for p in json.loads(report.read_text())["pods"] if p["name"] == "big"]
    assert job["phase"] == "Rejected" and "exceeds every nvidia card of the cluster" in job["reason"]
