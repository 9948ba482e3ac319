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


@pytest.fixture
def printed() -> Iterator[list[int]]:
    """The PIDs a test's script printed (`run_script`): SIGKILLed after the test if alive."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def run_script(code: str, pids: list[int], *args: str, timeout: float = 60.0) -> str:
    """`python -c code args…` in a session of its own; its output once it ended. The PIDs it
    printed (one a line) go to `pids` (the `printed` fixture), whether it ended or not."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, cwd=ROOT, env=env, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        pids.extend(printed_pids(out))
        pytest.fail(f"still running {timeout}s later:\n{out}")
    pids.extend(printed_pids(out))
    return out


def printed_pids(out: str) -> list[int]:
    return [int(line) for line in out.split() if line.isdigit()]


#: a ControlPlane whose n-th child gets SIGHUP (the terminal closing) to its parent from inside
#: `subprocess.Popen(...)`: the child forked, the call not yet returned — where, once in a
#: while under load, `make run` closed mid-start left a process behind
SIGNAL_INSIDE_POPEN = """
import os, signal, subprocess, sys
from pathlib import Path
from services.cli.up import ControlPlane, catch_stop_signals

at, count = int(sys.argv[2]), [0]
execute_child = subprocess.Popen._execute_child

def execute_child_then_signal(self, *args, **kwargs):
    execute_child(self, *args, **kwargs)  # the child runs from here on
    print(self.pid, flush=True)
    count[0] += 1
    if count[0] == at:
        os.kill(os.getpid(), signal.SIGHUP)

subprocess.Popen._execute_child = execute_child_then_signal
catch_stop_signals()
try:
    ControlPlane(Path(sys.argv[1]), auth=False).start(report=lambda line: None)
except KeyboardInterrupt as exc:
    print("interrupted", exc, flush=True)
"""


@pytest.mark.parametrize("at", [1, 2], ids=["nats-server", "first service"])
def test_a_stop_signal_inside_popen_leaves_nothing_running(demo_dir: Path, printed: list[int], at: int) -> None:
    """The handler raised `Interrupted` wherever the main thread was: inside Popen the child
    existed but was not yet in `procs` (nor the server's `process`), so `stop()` never
    signalled it; the nats-server, in a session of its own, ran on for good. Now a signal that
    comes while a process is started is raised once it is recorded."""
    out = run_script(SIGNAL_INSIDE_POPEN, printed, str(demo_dir / "state"), str(at))
    pids = printed_pids(out)
    assert len(pids) == at and "interrupted SIGHUP" in out, out
    assert [p for p in pids if alive(p)] == [], out  # stop() waited for each: no poll needed


#: a ControlPlane (its nats-server, and a stand-in service that answers the SIGTERM of the stop
#: with Ctrl-C to the plane, as a user pressing it during a slow stop) stopped normally
SIGNAL_DURING_STOP = """
import subprocess, sys
from pathlib import Path
from services.cli.up import ControlPlane, catch_stop_signals

ControlPlane.names = lambda self: []  # our nats-server only; the stand-in below is the service
plane = ControlPlane(Path(sys.argv[1]), auth=False).start(report=lambda line: None)
print(plane.server.pid, flush=True)
stand_in = subprocess.Popen([sys.executable, "-c", '''
import os, signal
def stop(signum, frame):
    os.kill(os.getppid(), signal.SIGINT)  # before it exits: the plane is inside its stop
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
signal.pause()
'''], stdout=subprocess.PIPE, text=True)
plane.procs["stand-in"] = stand_in
print(stand_in.pid, flush=True)
assert stand_in.stdout.readline() == "ready\\n"
catch_stop_signals()
try:
    plane.stop()
    print("stopped", flush=True)
except KeyboardInterrupt as exc:
    print("stop cut short by", exc, flush=True)
"""


def test_ctrl_c_during_a_normal_stop_does_not_cut_it_short(demo_dir: Path, printed: list[int]) -> None:
    """The handler stayed installed while `stop()` ran (demo's and up's `finally`): Ctrl-C
    raised inside `_stop_pids`, `server.stop()` was never reached and the nats-server (its own
    session) ran on for good."""
    out = run_script(SIGNAL_DURING_STOP, printed, str(demo_dir / "state"))
    nats, stand_in = printed_pids(out)
    assert "stopped" in out.split(), out
    assert not alive(nats) and not alive(stand_in)
