"""Lifecycle hazards of `tessera up` (issue 13, items 9–12): a second `up`, services outliving
their supervisor, a broker killed under them, a log from an earlier run, an unreachable NATS, a service that cannot start.

Real processes throughout: every test stops what it started by PID (the `state_dir` fixture runs
`tessera down` if a test left a system up)."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.cli.up import read_state
from services.runtime.lifeline import alive
from services.runtime.natsserver import free_port
from tests.cli.test_up_down import state_dir, tessera
from tests.processes import ROOT

__all__ = ["state_dir"]  # the fixture, shared with test_up_down

INVENTORY = str(ROOT / "examples" / "inventory.yaml")  # node-a, node-b
BAD_CONF = """
actions: "enqueue, allocate"
tiers:
  - plugins:
      - name: gang
        enableGangg: true
"""
OTHER_INVENTORY = """
nodes:
  - name: node-c
    cpu: 16
    memory: 64Gi
    devices:
      - {type: Ascend910B3, count: 2}
"""
UNREACHABLE = "nats://127.0.0.1:1"


def wait_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    """Poll the process table until none of `pids` lives; returns those still alive."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def node_names(state: Path) -> list[str]:
    got = tessera("get", "nodes", "-o", "records", "--state-dir", str(state))
    assert got.returncode == 0, got.stderr
    return [n["node"] for n in json.loads(got.stdout)]


def wait_nodes(state: Path, want: list[str], tries: int = 200) -> None:
    for _ in range(tries):  # poll `get nodes` (observable) until the node-agent registered them
        if node_names(state) == want:
            return
    raise AssertionError(f"nodes never became {want}: {node_names(state)}")


def test_second_up_refuses_and_services_end_with_their_supervisor(state_dir: Path) -> None:
    first = tessera("up", "--detach", "--state-dir", str(state_dir))
    assert first.returncode == 0, first.stderr
    state = read_state(state_dir)
    second = tessera("up", "--detach", "--state-dir", str(state_dir))
    assert second.returncode == 1
    assert f"already running (pid nats-server {state['nats_pid']}" in second.stderr
    assert read_state(state_dir) == state  # the state file of the first is untouched
    services = list(state["services"].values())
    assert all(alive(p) for p in services)

    os.kill(state["supervisor_pid"], signal.SIGKILL)  # `up` is gone for good
    # ... and so are the services it ran, and its broker (it ran on until `tessera down`)
    assert wait_gone([*services, state["nats_pid"]]) == []
    down = tessera("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert "nothing running" in down.stdout
    again = tessera("up", "--detach", "--state-dir", str(state_dir))
    assert again.returncode == 0, again.stderr


def test_a_killed_nats_server_is_restarted_and_said_how_it_ended(state_dir: Path) -> None:
    """kill -9 of the broker under `tessera up`: the supervisor said only "nats-server exited:
    stopping every service", stopped them for good and removed up.json, and the next `up`
    truncated up.log, the only record. Now it restarts the broker on its store and port, says
    how it ended, the services reconnect, and up.log is appended to."""
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    (state_dir / "logs" / "up.log").write_text("an earlier run's last words\n")
    first = tessera("up", "--detach", "--inventory", INVENTORY, "--state-dir", str(state_dir))
    assert first.returncode == 0, first.stderr
    assert "an earlier run's last words" not in first.stdout  # it prints this run's part only
    wait_nodes(state_dir, ["node-a", "node-b"])
    state = read_state(state_dir)
    os.kill(state["nats_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # poll what `get components` shows (the state file)
        now = read_state(state_dir)
        nats = next(c for c in now["components"] if c["name"] == "nats-server")
        if nats["restarts"] == 1 and nats["state"] == "running" and now["nats_pid"] != state["nats_pid"]:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"nats-server not restarted: {read_state(state_dir)}")
    assert nats["last_error"] == "killed by SIGKILL"
    assert now["nats"] == state["nats"]  # the same port
    assert now["services"] == state["services"] and all(alive(p) for p in state["services"].values())
    wait_nodes(state_dir, ["node-a", "node-b"])  # the same store, served again
    log = (state_dir / "logs" / "up.log").read_text()
    assert log.startswith("an earlier run's last words\n")
    assert f"nats-server (pid {state['nats_pid']}) exited: killed by SIGKILL: restarting it on the same store and port" in log
    assert tessera("down", "--state-dir", str(state_dir)).returncode == 0


def test_up_reports_what_the_log_holds_fresh_and_purge(state_dir: Path) -> None:
    other = state_dir / "other.yaml"
    other.write_text(OTHER_INVENTORY)
    run = lambda *a: tessera(*a, "--state-dir", str(state_dir))  # noqa: E731
    first = run("up", "--detach", "--inventory", INVENTORY)
    assert first.returncode == 0, first.stderr
    assert "already holds" not in first.stdout  # an empty log says nothing
    wait_nodes(state_dir, ["node-a", "node-b"])
    assert run("down").returncode == 0

    fresh = run("up", "--detach", "--fresh", "--inventory", str(other))
    assert fresh.returncode == 0, fresh.stderr
    assert "already holds" not in fresh.stdout  # --fresh started empty
    wait_nodes(state_dir, ["node-c"])
    assert run("down").returncode == 0

    back = run("up", "--detach", "--inventory", INVENTORY)
    assert back.returncode == 0, back.stderr
    assert re.search(r"the log already holds \d+ events: 1 node\(s\) \(node-c\)", back.stdout), back.stdout
    assert "nodes in the log but not in this inventory: node-c" in back.stdout
    purged = run("down", "--purge")
    assert purged.returncode == 0 and "log purged" in purged.stdout
    assert not (state_dir / "nats").exists()


COMMANDS = [
    ("get", "pods"), ("get", "nodes"), ("get", "cards"), ("events",), ("describe", "pod", "x"),
    ("queue", "close", "q"), ("job", "suspend", "j"), ("delete", "pod", "x"),
]  # fmt: skip


def test_ensure_streams_waits_for_nats_as_long_as_told_then_says_so(tmp_path: Path) -> None:
    """`ensure-streams` connected as a service does, retrying for ever: a wrong URL hung it
    with nothing said. It waits `--wait` seconds (the chart's hook Job runs it while NATS comes
    up, and retries it)."""
    out = tessera("ensure-streams", "--nats", UNREACHABLE, "--wait", "1", "--state-dir", str(tmp_path))
    assert out.returncode == 2
    assert f"NATS at {UNREACHABLE} did not answer within 1 s" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_commands_fail_fast_without_nats(command: tuple[str, ...], tmp_path: Path) -> None:
    started = time.monotonic()
    out = tessera(*command, "--nats", UNREACHABLE, "--state-dir", str(tmp_path))
    assert time.monotonic() - started < 15
    assert out.returncode == 2
    assert f"cannot reach NATS at {UNREACHABLE} (is `tessera up` running?)" in out.stderr
    assert "Traceback" not in out.stderr


def test_apply_fails_fast_without_nats(tmp_path: Path) -> None:
    manifest = tmp_path / "q.yaml"
    manifest.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n")
    out = tessera("apply", "-f", str(manifest), "--nats", UNREACHABLE)
    assert out.returncode == 2 and "cannot reach NATS at" in out.stderr
    assert "Traceback" not in out.stderr


def test_sigterm_to_tessera_nats_stops_its_server(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "nats", "--data-dir", str(tmp_path),
         "--port", str(free_port())], stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    server_pid = 0
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        server_pid = int(line.rsplit("pid ", 1)[1])
        assert alive(server_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert wait_gone([server_pid]) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if server_pid and alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_a_service_failing_at_start_says_why(state_dir: Path) -> None:
    """A configuration `up` can check is refused before anything starts; a service that still
    fails at start (here the node-agent on an inventory without nodes) has its cause printed."""
    conf = state_dir / "bad.conf"
    conf.write_text(BAD_CONF)
    out = tessera("up", "--detach", "--scheduler-conf", str(conf), "--state-dir", str(state_dir))
    assert out.returncode != 0
    assert "tiers[0].plugins[0].enableGangg: unknown field" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    inventory = state_dir / "empty.yaml"
    inventory.write_text("{}\n")
    out = tessera("up", "--detach", "--inventory", str(inventory), "--state-dir", str(state_dir))
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert "nodeagent exited" in said and "InventoryError: nodes: required list" in said
    assert "Traceback" not in said
    assert not (state_dir / "up.json").exists()


def test_down_counts_an_exited_process_it_cannot_reap_as_gone() -> None:
    """A service `up --detach` started is not `down`'s child: once it exits it stays a zombie
    until its parent (here a container's init that does not reap) waits for it, and kill(0)
    kept finding it, so `down` waited out the whole grace period, then sent SIGKILL."""
    from services.cli.up import _gone

    parent = subprocess.Popen([sys.executable, "-c", "import os, signal, time\n"
                               "pid = os.fork()\n"
                               "if pid == 0:\n    signal.pause()\n"
                               "print(pid, flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert parent.stdout is not None
        orphan = int(parent.stdout.readline())  # our grandchild: its parent never waits for it
        assert not _gone(orphan)
        os.kill(orphan, signal.SIGTERM)
        while (state := Path(f"/proc/{orphan}/stat").read_text().rsplit(") ", 1)[1][0]) != "Z":
            os.sched_yield()  # exiting: the kernel makes it a zombie (no sleep: its state says when)
        assert state == "Z" and _gone(orphan)
    finally:
        parent.kill()
        parent.wait()


#: `_wait_ready` in a process whose service pipe is descriptor 1024 or more
READY_ON_A_HIGH_FD = """
import os, resource, subprocess, sys
from pathlib import Path
from services.cli.up import ControlPlane

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]  # every descriptor below 1024
plane = ControlPlane(Path(sys.argv[1]), auth=False)
proc = plane.procs["allocator"] = subprocess.Popen(
    [sys.executable, "-c", "print('allocator ready')"], stdout=subprocess.PIPE, text=True)
assert proc.stdout.fileno() >= 1024, proc.stdout.fileno()
try:
    plane._wait_ready("allocator", timeout=60)
    print("ready seen", flush=True)
finally:
    proc.wait()
"""


def test_a_service_pipe_above_descriptor_1024_is_read(tmp_path: Path) -> None:
    """`_wait_ready` used select.select, which raises ValueError for a descriptor of 1024 or
    more: `up` (or a test's ControlPlane) holding many files open could not start a service."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 2048:
        pytest.skip("the hard limit on open files is below 2048")
    out = subprocess.run([sys.executable, "-c", READY_ON_A_HIGH_FD, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.returncode == 0 and out.stdout == "ready seen\n", out.stderr[-2000:]


#: a task an interruption left pending, collected after the stop's one line
PENDING_TASK_AFTER_INTERRUPT = """
import asyncio, gc
from services.cli.up import quiet_after_interrupt

async def forever():
    await asyncio.Event().wait()

loop = asyncio.new_event_loop()
task = loop.create_task(forever())
loop.run_until_complete(asyncio.sleep(0))
quiet_after_interrupt()
loop.close()
del task, loop
gc.collect()
print("interrupted: every process the demo started is stopped", flush=True)
"""


def test_after_an_interrupt_a_pending_task_is_not_reported() -> None:
    """Ctrl-C to `demo` may leave a task pending; asyncio's logger said "Task was destroyed but
    it is pending!" under the one line that says the stop is done (seen once in `pytest -n 2
    tests/cli`: the demo's stderr had company)."""
    out = subprocess.run([sys.executable, "-c", PENDING_TASK_AFTER_INTERRUPT], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "interrupted: every process the demo started is stopped"
    assert out.stderr == ""
