"""Long operations show progress on a terminal, and nothing extra where a script reads (issue 13,
item 15): `simulate` over its sessions, with stderr a pseudo-terminal and then a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT

ARGS = ["simulate", "--inventory", str(ROOT / "examples" / "inventory.yaml"),
        "--workload", str(ROOT / "examples" / "inference.yaml")]  # fmt: skip


def drained(fd: int) -> bytes:
    """Everything the terminal holds once the writer is gone (Linux answers EIO at the end)."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk


def test_simulate_draws_progress_on_a_terminal_only(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "services.cli.main", *ARGS, "--report", str(tmp_path / "r.json")]
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=follower, cwd=ROOT, timeout=120)
        os.close(follower)
        follower = -1
        drawn = drained(leader)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0
    assert b"simulating: sessions" in drawn
    assert b"simulating" not in done.stdout  # the summary on stdout stays clean
    piped = subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=120)
    assert piped.returncode == 0 and piped.stderr == b""
