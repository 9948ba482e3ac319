"""rev-gpu finding 2, as a user sees it once the device config gives `knownMigGeometries`
(HAMi's chart values): 9 pods asking 12000 MB on one A100-80GB in MIG mode → 3 run, each a
2g.20gb instance (before: all 9 kept off with CardInMigMode; before that, 6 booked as soft
slices); `get cards`, `describe card` and `explain` name the instances; a pod that ends frees
its placement for the next."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.subjects import Subjects
from services.cli.describe import describe
from services.cli.main import main
from services.cli.replay import state_text
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from tests.cli.test_explain import explain, waits
from tests.cli.test_mig_cards import INVENTORY
from tests.core.devices.test_mig_carve import CHART

POD = """apiVersion: v1
kind: Pod
metadata:
  name: m%d%s
spec:
  schedulerName: volcano
  containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "12000"}}}
"""


def run(tmp_path: Path, annotations: str = "") -> Path:
    inventory, workload, config = tmp_path / "inv.yaml", tmp_path / "w.yaml", tmp_path / "devcfg.yaml"
    inventory.write_text(INVENTORY)
    config.write_text(CHART)
    workload.write_text("---\n".join(POD % (i, annotations) for i in range(9)))
    log = tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(inventory), "--workload", str(workload),
                 "--device-config", str(config), "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    return log


def test_three_of_nine_run_as_2g_20gb_and_the_views_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = run(tmp_path)
    messages = read_jsonl(log)
    report = build_report(messages)
    running = sorted(p["name"] for p in report["pods"] if p["phase"] == "Running")
    assert len(running) == 3, report["pods"]
    waiting = [p for p in report["pods"] if p["phase"] == "Pending"]
    assert len(waiting) == 6 and all("CardMigTopologyInfeasible" in p["reason"] for p in waiting)
    (card,) = report["cards"]
    assert (card["memory_used"], card["cores_used"], card["slices_used"]) == (61440, 84, 3)
    assert card["note"] == "MIG: 2g.20gb@0, 2g.20gb@2, 2g.20gb@4"
    assert not [m for m in messages if m.headers.get("Tessera-Type") == "PlacementRejected"]

    rows = state_text(messages, "table").split("CARDS\n", 1)[1].splitlines()
    assert rows[1].endswith("MIG: 2g.20gb@0, 2g.20gb@2, 2g.20gb@4"), rows
    lines = describe("cards", card["uuid"], "default", report, messages, Subjects("tessera"))
    assert lines is not None and any(line.startswith("Note:") and "2g.20gb@2" in line for line in lines), lines

    pending = waiting[0]["name"]
    code, out, _ = explain(capsys, "pod", pending, "--from", str(log))
    text = waits(out)
    assert code == 0 and "asked 1 MIG instance of 12000 MB, no allowed profile holding it has a free placement" in text, text


def test_a_pod_that_ends_frees_its_placement_for_the_next(tmp_path: Path) -> None:
    """Each pod runs 10 s: three at a time, all nine run in the end, never more than three."""
    log = run(tmp_path, '\n  annotations: {tessera.io/duration: "10"}')
    messages = read_jsonl(log)
    report = build_report(messages)
    assert {p["phase"] for p in report["pods"]} == {"Succeeded"}, report["pods"]
    assert "PlacementRejected" not in {m.headers.get("Tessera-Type") for m in messages}
