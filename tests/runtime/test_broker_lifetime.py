"""A broker ends with the process that started it: a test run or `tessera up` killed without
its teardown (SIGKILL, `timeout`) left its nats-server running for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from services.runtime.lifeline import alive
from services.runtime.natsserver import NatsServer

STARTER = """
import sys, time
from pathlib import Path
from services.runtime.natsserver import NatsServer
server = NatsServer(data_dir=Path(sys.argv[1])).start()
print(server.pid, flush=True)
time.sleep(600)
"""


def gone_within(pid: int, timeout: float = 20.0) -> bool:
    """Poll the process table (an exited, unreaped broker counts as gone, as `down` counts it)."""
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_broker_ends_when_its_starter_is_killed(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "js")], stdout=subprocess.PIPE,
                               text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    broker = 0
    try:
        assert starter.stdout is not None
        broker = int(starter.stdout.readline())
        assert alive(broker)
        starter.kill()  # no teardown of any kind
        starter.wait()
        assert gone_within(broker)
    finally:
        starter.kill()
        starter.wait()
        if broker and alive(broker):
            os.kill(broker, signal.SIGKILL)


def test_a_broker_started_from_a_worker_thread_outlives_the_thread(tmp_path: Path) -> None:
    """Linux's parent-death signal follows the forking *thread*: armed there, the broker a test
    starts through `to_thread` would die as soon as the pool retired that thread."""
    server = NatsServer(data_dir=tmp_path / "js")
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()
    try:
        assert server.pid is not None and alive(server.pid)
        server.wait_ready(5.0)  # still serving after its starting thread ended
    finally:
        server.stop()
    assert server.process is None
