"""`tessera up --detach` → `get` → `down`: real processes, found through the state file."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.up import read_state
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.lifeline import alive  # an exited, unreaped process (Z) is gone
from tests.allocator.scenario import ascend_node, put
from tests.processes import ROOT, stop_mentioning, wait_until


def tessera(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@contextlib.contextmanager
def running(state: Path, inventory: Path = ROOT / "examples" / "inventory.yaml") -> Iterator[Path]:
    """A detached `tessera up` on `state` for the block, brought down after it, pass or fail."""
    up = tessera("up", "--detach", "--state-dir", str(state), "--inventory", str(inventory))
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield state
    finally:
        tessera("down", "--state-dir", str(state))


def admin_creds(state: dict) -> str:
    """The operator's NATS user of a running `up` (this test writes node events itself)."""
    return str(Path(state["credentials"]) / "admin.json")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    if (tmp_path / "up.json").exists():  # the test failed half-way: stop by PID anyway
        tessera("down", "--state-dir", str(tmp_path))
    stop_mentioning(tmp_path)  # and whatever `down` could not find (state file gone, down failed)


async def test_up_get_down(state_dir: Path) -> None:
    inventory = str(ROOT / "examples" / "inventory.yaml")  # node-a, node-b: 8 × 910B3 each
    up = tessera("up", "--detach", "--state-dir", str(state_dir), "--inventory", inventory)
    assert up.returncode == 0, up.stderr
    for name in ("allocator", "scheduler", "nodeagent"):
        assert f"{name:10s} ready" in up.stdout, up.stdout
    state = read_state(state_dir)
    pids = [state["nats_pid"], *state["services"].values()]
    assert all(alive(p) for p in pids)
    log = await JetStreamLog.connect(state["nats"], credentials=admin_creds(state))
    await put(log, log.subjects.node("n1"), ascend_node("n1", cards=2))

    async def cards_registered() -> bool:
        return len(await log.last_per_subject(log.subjects.all_cards())) == 18

    await wait_until(cards_registered, what="allocator to register the cards")
    await log.close()
    got = tessera("get", "cards", "-o", "records", "--state-dir", str(state_dir))
    assert got.returncode == 0, got.stderr
    cards = json.loads(got.stdout)
    assert [c["uuid"] for c in cards][:2] == ["n1-Ascend910B3-0", "n1-Ascend910B3-1"]
    assert sum(c["node"] == "node-b" for c in cards) == 8  # registered by the node-agent process
    assert all(c["memory_total"] == 65536 and c["memory_used"] == 0 for c in cards)
    table = tessera("get", "nodes", "--state-dir", str(state_dir))
    assert "n1" in table.stdout and "node-a" in table.stdout and "NODE" in table.stdout
    down = tessera("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert not any(alive(p) for p in pids)
    assert not (state_dir / "up.json").exists()


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """Someone else's process, whose PID a stale up.json names (as after a reboot)."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def stale_state(state_dir: Path, pid: int, **more: object) -> Path:
    """An up.json whose every PID is `pid`, as `up` writes it (`more` on top)."""
    path = state_dir / "up.json"
    path.write_text(json.dumps({"nats": "nats://127.0.0.1:1", "nats_pid": pid, "nats_pids": [pid],
                                "services": {"queue": pid}, "supervisor_pid": pid, **more}))  # fmt: skip
    return path


def test_down_leaves_alone_a_process_that_only_has_a_recorded_pid(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    """`down` with a stale up.json (up SIGKILLed, the machine rebooted) sent SIGTERM, then
    SIGKILL, to whatever held the recorded PIDs by then, and said "queue stopped". The PID's
    identity (its start time) is recorded now, and only a match is signalled."""
    start_time = Path(f"/proc/{bystander.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    path = stale_state(tmp_path, bystander.pid, identities={str(bystander.pid): str(int(start_time) - 1)})
    out = tessera("down", "--state-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"nothing running (stale state {path} removed: none of the processes it records runs)\n"
    assert bystander.poll() is None and not path.exists()


def test_down_signals_nothing_from_a_state_file_without_identities(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    """An up.json of an older tessera: whose process a live PID is cannot be told, so it is
    said, and nothing is signalled; once those PIDs are gone, it is a stale file like another."""
    path = stale_state(tmp_path, bystander.pid)
    out = tessera("down", "--state-dir", str(tmp_path))
    assert out.returncode == 1
    assert f"records no process identities (an older tessera wrote it), so whether pid {bystander.pid} " in out.stderr
    assert bystander.poll() is None and path.exists()
    bystander.kill()
    bystander.wait(10)
    again = tessera("down", "--state-dir", str(tmp_path))
    assert again.returncode == 0 and again.stdout.startswith("nothing running (stale state"), again.stderr
    assert not path.exists()
