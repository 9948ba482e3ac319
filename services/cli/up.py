"""`tessera up` / `tessera down`: the control plane as separate processes on one machine.

`up` starts the embedded nats-server (unless `--nats URL` names one), then every service as its
own `python -m services.<name>` process, waits until each says it is ready, and records the PIDs
and the NATS URL in `<state-dir>/up.json` so later commands (`get`, `apply`, `down`) find the
running system without flags. Without `--detach` it stays in the foreground and stops everything
on Ctrl-C; `down` stops a detached one by PID.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from services.runtime.natsserver import NatsServer

SERVICES = ("allocator", "queue", "scheduler", "admission", "nodeagent")
STATE_DIR = Path(os.environ.get("TESSERA_HOME", ".tessera"))


def state_file(state_dir: Path) -> Path:
    return state_dir / "up.json"


def read_state(state_dir: Path = STATE_DIR) -> dict:
    path = state_file(state_dir)
    if not path.exists():
        raise SystemExit(f"no running tessera found ({path} missing): run `tessera up` first")
    return json.loads(path.read_text())


def available(name: str) -> bool:
    if importlib.util.find_spec(f"services.{name}") is None:
        return False
    return importlib.util.find_spec(f"services.{name}.__main__") is not None


def _start(
    name: str, args: list[str], log_dir: Path, timeout: float = 60.0
) -> subprocess.Popen[str]:
    log_file = (log_dir / f"{name}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", f"services.{name}", *args],
        stdout=subprocess.PIPE,
        stderr=log_file,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(
                f"{name} exited ({proc.wait()}) before it was ready; see {log_file.name}"
            )
        if "ready" in line:
            return proc
    proc.kill()
    raise SystemExit(f"{name} not ready after {timeout}s")


def _stop_pid(pid: int, timeout: float = 10.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def cmd_up(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    log_dir = state_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    server = None
    url = args.nats
    if not url:
        server = NatsServer(data_dir=state_dir / "nats").start()
        url = server.url
        print(f"nats-server (JetStream) on {url}, pid {server.pid}")
    common = ["--nats", url]
    procs: dict[str, subprocess.Popen[str]] = {}
    detached = False
    try:
        for name in SERVICES:
            if not available(name):
                print(f"  {name:10s} not built yet: skipped")
                continue
            if name == "nodeagent" and not args.inventory:
                print(f"  {name:10s} no --inventory given: no simulated nodes, skipped")
                continue
            extra = (
                ["--inventory", args.inventory] if name == "nodeagent" and args.inventory else []
            )
            procs[name] = _start(name, common + extra, log_dir)
            print(f"  {name:10s} ready (pid {procs[name].pid})")
        state = {
            "nats": url,
            "nats_pid": server.pid if server else None,
            "services": {n: p.pid for n, p in procs.items()},
        }
        state_file(state_dir).write_text(json.dumps(state, indent=2))
        if args.detach:
            print(f"detached; `tessera down` stops it (state in {state_file(state_dir)})")
            detached = True
            return 0
        print("running; Ctrl-C stops everything")
        try:
            while all(p.poll() is None for p in procs.values()):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        if not detached:
            for p in procs.values():
                _stop_pid(p.pid)
            if server:
                server.stop()
            state_file(state_dir).unlink(missing_ok=True)


def cmd_down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    state = read_state(state_dir)
    for name, pid in state["services"].items():
        _stop_pid(pid)
        print(f"  {name:10s} stopped")
    if state.get("nats_pid"):
        _stop_pid(state["nats_pid"])
        print("  nats-server stopped")
    state_file(state_dir).unlink(missing_ok=True)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="start NATS and the services as separate processes")
    up.add_argument("--nats", default="", help="use this NATS instead of the embedded one")
    up.add_argument("--inventory", default="", help="simulated nodes for the node-agent")
    up.add_argument("--detach", action="store_true")
    up.add_argument("--state-dir", default=str(STATE_DIR))
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop what `tessera up --detach` started")
    down.add_argument("--state-dir", default=str(STATE_DIR))
    down.set_defaults(func=cmd_down)
