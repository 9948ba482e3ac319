"""Read-only readers of the log (`get`, `events`, `simulate --replay`) count and skip an
undecodable event instead of crashing on it (issue 12 item 4)."""

from __future__ import annotations

from pathlib import Path

from contracts.envelope import TYPE
from contracts.subjects import Subjects
from services.cli.events import summary
from services.core.simulate.jsonl import read_jsonl, write_jsonl
from services.core.simulate.report import build_report, undecodable_warning
from services.runtime.eventlog.model import StoredMessage

S = Subjects()
POISON = [
    StoredMessage(1, S.job("default", "p"), b'{"spec": 5}', {TYPE: "JobSubmitted"}),
    StoredMessage(2, S.card("n1", "c0"), b'{"card": 1}', {TYPE: "SliceReleased"}),
    StoredMessage(3, S.job("default", "q"), b"not json at all", {TYPE: "JobDeleted"}),
]


def test_report_skips_and_names_undecodable_events(tmp_path: Path) -> None:
    report = build_report(POISON)
    assert [x["seq"] for x in report["undecodable"]] == [1, 2, 3]
    assert undecodable_warning(report).startswith("warning: 3 undecodable event(s) skipped")
    path = tmp_path / "log.jsonl"
    write_jsonl(path, POISON)  # events -o: even a body that is not JSON round-trips
    assert [m.data for m in read_jsonl(path)] == [b'{"spec":5}', b'{"card":1}', b"not json at all"]
    assert build_report(read_jsonl(path))["undecodable"] == report["undecodable"]
    assert all(summary(m).startswith("(undecodable") for m in POISON)


def test_a_clean_log_has_no_undecodable_section() -> None:
    assert "undecodable" not in build_report([])
    assert undecodable_warning(build_report([])) == ""
