"""Real service processes for end-to-end tests, always stopped by PID (pass or fail)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class ServiceProcess:
    def __init__(self, module: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.module = module
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc: subprocess.Popen[str] | None = None

    def start(self, ready: str, timeout: float = 30.0) -> ServiceProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=self.env,
        )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.module} exited with {self.proc.wait()} before ready")
            if ready in line:
                return self
        raise TimeoutError(f"{self.module} not ready in {timeout}s")

    async def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return await asyncio.to_thread(self.proc.wait, timeout)

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = ""
) -> None:
    """Poll a condition on observable state (consumer info, the log) until it holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.05)


def stop_mentioning(path: Path) -> list[int]:
    """SIGKILL every process of ours whose command line names `path` (a test's state dir: `up`'s
    supervisor, its nats-server store, the services' credential files), and return their PIDs.
    The fallback when `down` cannot: the state file is gone or `down` failed half-way.
    `path` matches whole path components only: under parallel workers `.../test_x1` must not
    sweep the processes of `.../test_x10`."""
    killed = []
    for pid in mentioning(path):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def mentioning(path: Path) -> list[int]:
    """The PIDs of the live processes (not zombies) whose command line names `path`, whole path
    components only (see `stop_mentioning`)."""
    mark = re.compile(re.escape(str(path)) + r"(?=/|$)")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(mark.search(a.decode(errors="replace")) for a in args):
            found.append(int(entry.name))
    return found


def fail_once(service: Any, when: Callable[[Any], bool] = lambda _out: True) -> list[Any]:
    """The log out of reach for one append (a failover): `service.publish` raises for the
    first outgoing event `when` accepts, then publishes as before. Returns the list that holds
    that event once it failed."""
    publish = service.publish
    failed: list[Any] = []

    async def flaky(out: Any, *args: Any) -> Any:
        if not failed and when(out):
            failed.append(out.event)
            raise ConnectionError("the log out of reach, once")
        return await publish(out, *args)

    service.publish = flaky
    return failed
