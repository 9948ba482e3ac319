"""A service process ends when told to or when its broker is gone, whatever state it is in:
before it reached NATS, and with NATS gone and nobody reading its output.

Real processes (a nats-server, the services), each stopped by PID in `finally`; the waits are on
what the processes show (their exit, their /readyz and /healthz), never on a fixed sleep."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.natsserver import NatsServer, free_port
from tests.processes import ROOT


def service(name: str, *args: str, stdout: int | None = subprocess.DEVNULL,
            stderr: Path | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
    err = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen([sys.executable, "-m", f"services.{name}", *args], stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=err, cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    finally:
        if stderr is not None:
            err.close()  # type: ignore[union-attr]


def stop(*procs: subprocess.Popen[bytes] | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0  # not serving yet


def poll_until(condition: object, proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    """Ask `condition` (a look at the process's probes) until it holds, failing if the process
    ends first; the process's own pace, no sleep of a guessed length."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert proc.poll() is None, f"{what}: the service exited ({proc.returncode}) first"
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.05)  # a poll interval of the probe, not a synchronisation


@pytest.fixture
def stand_in() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose PID a service is told is its broker's (`--exit-with-pid`)."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        yield proc
    finally:
        stop(proc)


@pytest.mark.parametrize("name", ["allocator", "scheduler"])
def test_a_service_whose_broker_is_gone_before_it_connected_ends(
    name: str, stand_in: subprocess.Popen[bytes]
) -> None:
    """The lifeline was watched only once connected, and the connection retries for ever: a
    service started as its nats-server died (`make run` with the server killed during start-up)
    ran on, saying nothing, for good."""
    proc = service(name, "--nats", f"nats://127.0.0.1:{free_port()}", "--exit-with-pid", str(stand_in.pid))
    try:
        stand_in.kill()
        stand_in.wait(10)
        assert proc.wait(30) == 3  # its nats-server is gone: the lifeline's exit code
    finally:
        stop(proc)


def test_sigterm_ends_a_service_that_never_reached_nats() -> None:
    """SIGTERM to a service that is trying to reach NATS (which retries for ever) ends it
    cleanly: exit 0, within a deadline. Sent once the service has connected to a stand-in
    broker that never answers — not while Python itself starts, where the default action ends
    the process (-SIGTERM) whatever the service does."""
    with socket.socket() as broker:
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        proc = service("queue", "--nats", f"nats://127.0.0.1:{broker.getsockname()[1]}")
        try:
            poll_until(lambda: select.select([broker], [], [], 0)[0], proc, 60, "connecting to NATS")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
        finally:
            stop(proc)


def test_the_scheduler_ends_on_sigterm_with_its_reader_gone_and_its_broker_dead(tmp_path: Path) -> None:
    """What `make run` left when its terminal closed: the services' stdout was `demo`'s pipe,
    so the scheduler's "ready" line raised BrokenPipeError out of its consume loop; the loop's
    shutdown cancelled its log reader once, nats-py swallowed that cancellation and the reader
    retried the log for ever — through SIGTERM (only an event nobody waited for any more), and
    through its nats-server's death, until SIGKILL."""
    server = NatsServer(data_dir=tmp_path / "js").start()
    proc = None
    try:
        read_end, write_end = os.pipe()
        os.close(read_end)  # nobody will read what it prints: "scheduler ready" meets a closed pipe
        port = free_port()
        log = tmp_path / "scheduler.log"
        try:
            proc = service("scheduler", "--nats", server.url, "--metrics-port", str(port),
                           "--lease-ttl", "2", stdout=write_end, stderr=log)  # fmt: skip
        finally:
            os.close(write_end)
        poll_until(lambda: status(port, "/readyz") == 200, proc, 60, "ready")
        server.kill()  # the broker dies for good
        poll_until(lambda: status(port, "/readyz") == 503, proc, 30, "NATS seen gone")
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(20)
        except subprocess.TimeoutExpired:
            pytest.fail("the scheduler ignored SIGTERM:\n" + log.read_text()[-2000:])
        said = log.read_text()
        assert code == 0, said[-2000:]
        assert "standard output is gone" in said
        # every task ended by itself (the lease's renewal in flight did not hold the stop)
        assert "not stopped within" not in said and "still running" not in said, said[-2000:]
        assert "Traceback" not in said, said[-3000:]
    finally:
        stop(proc)
        server.stop()


#: `run_service` around a stand-in `_serve` that stops soon after it is told, leaving a task that
#: does not end when cancelled: the event loop's own shutdown, after `run_service` returned,
#: waits for it until the stop's limit (shortened here) ends the process
CLEAN_STOP_SLOW_SHUTDOWN = """
import argparse, asyncio, sys
from services.runtime import bootstrap, eventloop

bootstrap.STOP_LIMIT = 1.0
kept = []

async def stubborn():
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass

async def serve(name, args, build, api, edge, stopping, running):
    running.set()
    kept.append(asyncio.ensure_future(stubborn()))
    print("ready", flush=True)
    await stopping.wait()
    await asyncio.sleep(0.2)  # what a stop does (a flush, a close): done well within the grace
    return 0

bootstrap._serve = serve
args = argparse.Namespace(log_level="INFO", exit_with_pid=0)
sys.exit(eventloop.run(bootstrap.run_service("stand-in", args, build=None)))
"""


def test_a_clean_stop_exits_0_when_the_loop_shutdown_meets_the_limit() -> None:
    """The limit armed as a stop began (exit 1) was not cancelled when the service stopped
    within the grace: a clean stop whose loop shutdown then reached it ended with 1."""
    proc = subprocess.Popen([sys.executable, "-c", CLEAN_STOP_SLOW_SHUTDOWN], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop(proc)
