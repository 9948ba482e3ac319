"""Supervision (issue 15 item 2): under a detached `tessera up` a service killed with -9 is
restarted and `get components` shows it; the policy gives up after quick failures, saying why."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from services.cli.supervise import MAX_QUICK, QUICK, Component, backoff, due, on_exit, started
from services.cli.up import read_state
from tests.cli.test_up_down import state_dir, tessera
from tests.processes import ROOT

__all__ = ["state_dir"]


def components(state: Path) -> dict[str, dict]:
    got = tessera("get", "components", "-o", "records", "--state-dir", str(state))
    assert got.returncode == 0, got.stderr
    return {c["name"]: c for c in json.loads(got.stdout)}


def test_a_killed_service_is_restarted_under_a_detached_up(state_dir: Path) -> None:
    inventory = str(ROOT / "examples" / "inventory.yaml")
    up = tessera("up", "--detach", "--inventory", inventory, "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stdout + up.stderr
    before = components(state_dir)
    assert {c["state"] for c in before.values()} == {"running"}
    assert before["allocator"]["restarts"] == 0
    victim = read_state(state_dir)["services"]["allocator"]
    os.kill(victim, signal.SIGKILL)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # poll what `get components` shows (the state file)
        now = components(state_dir)["allocator"]
        if now["restarts"] == 1 and now["state"] == "running" and now["pid"] != victim:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"allocator not restarted: {components(state_dir)['allocator']}")
    assert now["last_error"] == "killed by SIGKILL"
    assert components(state_dir)["scheduler"]["pid"] == before["scheduler"]["pid"]  # left alone
    nodes = tessera("get", "nodes", "--state-dir", str(state_dir))
    assert nodes.returncode == 0 and "node-a" in nodes.stdout
    down = tessera("down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert not (state_dir / "up.json").exists()


def test_policy_backs_off_then_gives_up_with_the_reason() -> None:
    c = Component("queue")
    started(c, 10, now=0.0)
    on_exit(c, "exited (1): ConfigError: x", now=QUICK + 1)  # after a while: one failure
    assert c.state == "restarting" and c.quick_failures == 1
    assert not due(c, QUICK + 1) and due(c, QUICK + 1 + backoff(1))
    t = QUICK + 1
    for n in range(2, MAX_QUICK + 1):
        started(c, 10 + n, now=t)
        t += 1.0
        on_exit(c, "exited (1): ConfigError: x", now=t)  # at once: quick
        assert c.quick_failures == n
    assert c.state == "failed"
    assert c.last_error == f"gave up after {MAX_QUICK} quick failures: exited (1): ConfigError: x"
    assert not due(c, t + 1000)
    assert [backoff(n) for n in (1, 2, 3, 6, 9)] == [0.5, 1.0, 2.0, 10.0, 10.0]


def test_a_metrics_port_taken_before_the_service_binds_it_is_chosen_anew(tmp_path: Path) -> None:
    """`up` probes free ports, then its services bind them: another process on the machine
    (a parallel test worker) may take one in between. The service says so by its exit status
    and gets another port, instead of the whole start failing."""
    import socket

    from services.cli.up import ControlPlane

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    cp = ControlPlane(tmp_path / "state")  # no inventory: no node agent
    cp.metrics_ports["admission"] = taken
    try:
        cp.start(report=lambda _line: None)
        assert cp.running()
        assert cp.metrics_ports["admission"] != taken
        assert "is taken" in (cp.log_dir / "admission.log").read_text()
    finally:
        cp.stop()
        holder.close()


class _DyingProcess:
    """A nats-server process that has ended with `code`."""

    def __init__(self, pid: int, code: int = 1) -> None:
        self.pid, self.returncode = pid, code

    def poll(self) -> int:
        return self.returncode


class _DyingServer:
    """A broker that starts and dies at once (its port taken, its store corrupt)."""

    def __init__(self) -> None:
        self.starts = 0
        self.process: _DyingProcess | None = _DyingProcess(100)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        self.starts += 1
        self.process = _DyingProcess(100 + self.starts)

    def _log(self) -> Path:
        return Path("/nonexistent")


def test_a_broker_that_keeps_dying_is_restarted_with_backoff_then_given_up_on(capsys) -> None:  # type: ignore[no-untyped-def]
    """`up` restarted a dead nats-server every 0.5 s for ever, `restarts` growing without
    bound. Now it gets a service's backoff and, after MAX_QUICK quick failures, `up` stops."""
    from services.cli.up import ControlPlane

    plane = ControlPlane.__new__(ControlPlane)
    server = _DyingServer()
    plane.servers, plane.cluster, plane.procs = [server], 1, {}  # type: ignore[list-item]
    plane.components = {"nats-server": Component("nats-server", state="running")}
    component = plane.components["nats-server"]
    now, looks, gave_up_at = 0.0, 0, None
    while looks < 1000:
        looks += 1
        if not plane.supervise(now):
            gave_up_at = now
            break
        now += 0.5
    assert gave_up_at is not None, "never given up on"
    assert component.state == "failed" and "gave up after" in component.last_error
    assert server.starts == component.restarts == MAX_QUICK - 1
    assert gave_up_at >= sum(backoff(n) for n in range(1, MAX_QUICK))  # waited its backoff
    err = capsys.readouterr().err
    assert "restarting it on the same store and port in" in err and "gave up after" in err
