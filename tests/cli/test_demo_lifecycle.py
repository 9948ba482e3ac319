"""`tessera demo` (make run) and a foreground `tessera up` leave nothing behind however they
end: their nats-server dying during start-up, the terminal closing (SIGHUP to the process
group), `kill PID`, Ctrl-C. And `down` with nothing running is a no-op.

Real processes: each test's demo runs with TMPDIR in the test's directory, so every process it
starts names that directory on its command line; the test looks for them there and SIGKILLs
what is left in `finally` (by PID). Waits are on output lines and exits, with deadlines."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.lifeline import alive
from tests.cli.test_up_down import tessera
from tests.processes import ROOT, mentioning, stop_mentioning


class Demo:
    """`tessera demo` in a session of its own (as a shell runs a job in a process group)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.tmp = tmp
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
        self.proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     cwd=ROOT, env=env, start_new_session=True)  # fmt: skip
        self.out = b""

    def until(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Read its output until a line matches `pattern`."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while not (found := re.search(pattern, self.out.decode(errors="replace"))):
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} within {timeout}s:\n{self.out.decode()}"
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"exited ({self.proc.wait()}) before {pattern!r}:\n{self.out.decode()}"
                self.out += chunk
        return found

    def finish(self, timeout: float) -> tuple[int, str]:
        """Its exit code and what it wrote to stderr; fails if it does not end in `timeout` s."""
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {timeout}s later:\n{self.out.decode()}")
        return self.proc.returncode, err.decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


@pytest.fixture
def demo_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop_mentioning(tmp_path)  # whatever a failing test left: services, nats-server, supervisor


def left_behind(tmp: Path) -> tuple[list[int], list[Path]]:
    """Processes still naming the test's directory, and demo directories still there."""
    return mentioning(tmp), sorted(tmp.glob("tessera-demo-*"))


def test_demo_fails_at_once_when_its_nats_server_dies_during_start_up(demo_dir: Path) -> None:
    """It waited for the first service's "ready" in a blocking readline, and the services
    waited for a broker that was gone: `make run` hung for good, all six processes alive."""
    demo = Demo(demo_dir, "demo")
    try:
        nats = int(demo.until(r"nats-server .*pid (\d+)").group(1))
        os.kill(nats, signal.SIGKILL)
        code, err = demo.finish(30)
        assert code == 1, err
        assert f"nats-server (pid {nats}) exited during start-up: killed by SIGKILL" in err
        assert "Traceback" not in err
        assert left_behind(demo_dir) == ([], [])
    finally:
        demo.stop()


SIGNALS = [
    (signal.SIGHUP, r"nats-server .*pid \d+"),  # the terminal closed while it starts the services
    (signal.SIGTERM, r"\[2/5\]"),  # `kill` once the services run
    (signal.SIGINT, r"\[2/5\]"),  # Ctrl-C
]


@pytest.mark.parametrize(("sig", "moment"), SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_a_signal_to_demo_stops_everything_it_started(demo_dir: Path, sig: signal.Signals, moment: str) -> None:
    """To the process group, as a terminal sends it. Without a SIGHUP/SIGTERM handler `demo`
    died at once: its `finally` never ran, four services and the directory stayed, and the
    nats-server (in demo's group) took SIGHUP as a configuration reload and ran on under init.
    Ctrl-C cleaned up but printed a traceback."""
    demo = Demo(demo_dir, "demo")
    nats = 0
    try:
        demo.until(moment)
        nats = int(demo.until(r"nats-server .*pid (\d+)").group(1))
        os.killpg(demo.proc.pid, sig)
        code, err = demo.finish(30)
        assert code == 128 + sig, err
        assert err.strip() == (f"interrupted ({sig.name}): every process the demo started is stopped "
                               "and its directory removed")  # fmt: skip
        assert not alive(nats)
        assert left_behind(demo_dir) == ([], [])
    finally:
        demo.stop()
        if nats and alive(nats):
            os.kill(nats, signal.SIGKILL)


def test_sighup_to_a_foreground_up_stops_everything_it_started(demo_dir: Path) -> None:
    state = demo_dir / "state"
    up = Demo(demo_dir, "up", "--state-dir", str(state))
    try:
        up.until("Ctrl-C stops everything")
        pids = mentioning(state)
        assert len(pids) == 1 + 1 + 4  # up itself, its nats-server, four services (no inventory)
        os.killpg(up.proc.pid, signal.SIGHUP)
        code, err = up.finish(30)
        assert code == 0, err
        assert "Traceback" not in err
        assert [p for p in pids if alive(p)] == []
        assert not (state / "up.json").exists()
    finally:
        up.stop()


def test_down_with_nothing_running_is_a_no_op(tmp_path: Path) -> None:
    """It said `no running tessera found … run \\`tessera up\\` first` and exited 1: advice to
    start what one asked to stop. Stopping what is stopped succeeds, as `docker compose down`
    and `docker stop` of a stopped container do."""
    for _ in range(2):
        out = tessera("down", "--state-dir", str(tmp_path))
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("nothing running (")
        assert "tessera up` first" not in out.stdout + out.stderr
