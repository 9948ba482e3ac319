"""`tessera replay --verify` over the log the five service processes wrote: every recorded
session re-run from the log reaches the decisions the scheduler appended; a log whose
configuration or one decision was altered is caught, naming that decision."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from services.cli.demo import check
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from tests.e2e.test_system import EXAMPLES, apply
from tests.processes import wait_until


def tessera(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def rewrite(src: Path, dst: Path, change) -> None:
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    assert any(change(row) for row in rows), "nothing to alter"
    dst.write_text("".join(json.dumps(r) + "\n" for r in rows))


async def test_the_processes_log_verifies_and_an_altered_one_does_not(plane: ControlPlane,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    texts = [(EXAMPLES / f).read_text() for f in ("article.yaml", "inference.yaml")]
    expected = yaml.safe_load((EXAMPLES / "expected.yaml").read_text())["pods"]
    reply = await apply(plane.url, "\n---\n".join(texts))
    replies = {r.name: r for r in reply.results}

    async def as_expected() -> bool:
        return not check(expected, replies, await fetch_report(plane.url, "tessera"))

    await wait_until(as_expected, timeout=60, what="the demo workload's expected outcomes")

    as_cli = ("--nats", plane.url, "--nats-creds", plane.creds("cli"))  # the log's reader
    live = tessera("replay", "--verify", *as_cli)
    assert live.returncode == 0, live.stdout + live.stderr
    assert live.stdout.startswith("verified: ") and " 0 decisions" not in live.stdout

    log = tmp_path / "log.jsonl"
    dumped = tessera("events", "--output-file", str(log), *as_cli)
    assert dumped.returncode == 0, dumped.stderr
    assert tessera("replay", "--verify", "--from", str(log)).returncode == 0

    # The card policy the scheduler ran with, changed in the log: another card is chosen.
    def binpack(row: dict) -> bool:
        if row["headers"].get("Tessera-Type") != "SchedulerConfigured":
            return False
        conf = row["data"]["conf"]
        row["data"]["conf"] = conf.replace("SchedulePolicy: spread", "SchedulePolicy: binpack")
        return row["data"]["conf"] != conf

    altered = tmp_path / "conf.jsonl"
    rewrite(log, altered, binpack)
    out = tessera("replay", "--verify", "--from", str(altered))
    assert out.returncode == 1, out.stdout
    assert "diverged" in out.stdout and "inputs that differ from what the scheduler saw: conf" in out.stdout

    # One proposal's card, changed: that decision is named, and no input differs.
    target: dict = {}

    def other_card(row: dict) -> bool:
        if target or row["headers"].get("Tessera-Type") != "PlacementProposed":
            return False
        first = row["data"]["placements"][0]["slices"][0]
        first["card"] = first["card"] + "-x"
        target.update(seq=row["seq"], name=row["data"]["name"])
        return True

    altered = tmp_path / "decision.jsonl"
    rewrite(log, altered, other_card)
    out = tessera("replay", "--verify", "--from", str(altered))
    assert out.returncode == 1, out.stdout
    assert f"job default/{target['name']}, decision #{target['seq']}" in out.stdout
    assert "placements[0].slices[0].card" in out.stdout
    assert "every input digest matches" in out.stdout
