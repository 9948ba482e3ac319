"""The report learns a node's cards from its registration too: after `tessera compact` a card in
use keeps only its last ledger event (a SliceReserved) and no CardRegistered, and the report
left such cards out (`get cards`, `describe card`) and lost their aiCore totals."""

from __future__ import annotations

from pathlib import Path

from services.cli.main import main
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from tests.processes import ROOT

EXAMPLES = ROOT / "examples"


def test_cards_in_use_are_reported_when_their_registration_was_compacted_away(tmp_path: Path) -> None:
    log = tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(EXAMPLES / "inventory.yaml"), "--workload",
                 str(EXAMPLES / "article.yaml"), "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    messages = read_jsonl(log)
    whole = {c["uuid"]: c for c in build_report(messages)["cards"]}
    used = {u for u, c in whole.items() if c["memory_used"]}
    assert used
    # what compaction leaves of a card in use: its last event only (not its CardRegistered)
    compacted = [m for m in messages if not (m.headers.get("Tessera-Type") == "CardRegistered"
                                             and m.subject.rsplit(".", 1)[-1] in used)]  # fmt: skip
    after = {c["uuid"]: c for c in build_report(compacted)["cards"]}
    assert set(after) == set(whole)
    for u in used:
        assert after[u]["memory_used"] == whole[u]["memory_used"] and after[u]["cores_total"] == whole[u]["cores_total"]
