"""rev-gpu finding 2, as a user sees it: an A100-80GB in MIG mode took 6 of 9 pods asking
12000 MB each as soft slices (HAMi's MIG profiles fit 3, and its plugin could carve none of
them without `hami.io/vgpu-mig-allocations`); now it takes none, and `get cards` (replay's
state), `describe card`, `describe node` and `explain` say why."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contracts.events import NodeRegistered
from contracts.registry import default_registry
from contracts.subjects import Subjects
from services.cli.describe import describe
from services.cli.main import main
from services.cli.replay import state_text
from services.core.devices.mig import MIG_WORDS
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from tests.cli.test_explain import explain, simulate, waits

INVENTORY = """nodes:
  - name: a100-mig
    cpu: 64
    memory: 512Gi
    devices:
      - {type: NVIDIA-A100-SXM4-80GB, count: 1, memory: 81920, mode: mig, splitCount: 7}
"""
POD = """apiVersion: v1
kind: Pod
metadata: {name: m%d}
spec:
  schedulerName: volcano
  containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "12000"}}}
"""


@pytest.fixture
def mig_log(tmp_path: Path) -> Path:
    inventory, workload = tmp_path / "inv-mig.yaml", tmp_path / "w-mig12.yaml"
    inventory.write_text(INVENTORY)
    workload.write_text("---\n".join(POD % i for i in range(9)))
    return simulate(tmp_path, inventory, workload)


def test_no_pod_is_booked_on_a_mig_card_and_every_view_says_why(
    mig_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = read_jsonl(mig_log)
    report = build_report(messages)
    assert {p["phase"] for p in report["pods"]} == {"Pending"}, report["pods"]
    assert all("CardInMigMode" in p["reason"] for p in report["pods"])
    (card,) = report["cards"]
    assert (card["memory_used"], card["slices_used"], card["note"]) == (0, 0, MIG_WORDS)

    cards = state_text(messages, "table").split("CARDS\n", 1)[1].splitlines()
    assert cards[0].split()[-1] == "NOTE" and cards[1].endswith(MIG_WORDS), cards

    subjects = Subjects("tessera")
    lines = describe("cards", card["uuid"], "default", report, messages, subjects)
    assert lines is not None and any(line.startswith("Note:") and MIG_WORDS in line for line in lines), lines
    registry = default_registry()
    registered = [e for m in messages if m.headers.get("Tessera-Type") == "NodeRegistered"
                  and isinstance(e := registry.decode("NodeRegistered", m.data), NodeRegistered)]  # fmt: skip
    node_lines = describe("nodes", "a100-mig", "default", report, messages, subjects, [(registered[-1], 0)])
    assert node_lines is not None
    assert any(line.startswith("Note:") and f"1 card kept off, in {MIG_WORDS}" in line for line in node_lines), node_lines

    code, out, _ = explain(capsys, "pod", "m1", "--from", str(mig_log))
    assert code == 0
    text = waits(out)
    assert (f"NVIDIA: the node's 1 card (NVIDIA-A100-SXM4-80GB) is in {MIG_WORDS} [1/1 CardInMigMode]") in text, text
    assert "run the pod on a node whose GPUs are not in MIG mode" in text, text


def test_a_card_row_of_an_ordinary_card_carries_no_note(tmp_path: Path) -> None:
    """Reports of clusters without MIG cards stay as they were (no `note` key)."""
    inventory, workload = tmp_path / "inv.yaml", tmp_path / "w.yaml"
    inventory.write_text(INVENTORY.replace("mode: mig", "mode: hami-core"))
    workload.write_text("---\n".join(POD % i for i in range(2)))
    log = tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(inventory), "--workload", str(workload),
                 "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    report = build_report(read_jsonl(log))
    assert [p["phase"] for p in report["pods"]] == ["Running", "Running"]
    assert "note" not in report["cards"][0]
    assert "NOTE" not in state_text(read_jsonl(log), "table")


def test_the_records_form_of_a_card_carries_its_note(mig_log: Path) -> None:
    from services.cli import kubeobjects as ko

    (card,) = build_report(read_jsonl(mig_log))["cards"]
    assert msgspec.json.decode(msgspec.json.encode(ko.card_object(card)))["status"]["note"] == MIG_WORDS
