"""`tessera up` / `tessera down`: the control plane as separate processes on one machine.

`up` starts the embedded nats-server (unless `--nats URL` names one; `--nats-cluster 3` runs
three), with a NATS user per service and one for the CLI (`contracts.permissions`), then every
service as its own `python -m services.<name>` process, waits until each says it is ready, and
records the PIDs, the NATS URL and the credentials' directory in `<state-dir>/up.json` so later
commands (`get`, `apply`, `down`) find the running system without flags. It then supervises:
a service that ends is restarted (`services.cli.supervise`), and the state file says so
(`get components`). Without `--detach` that happens in the foreground until Ctrl-C; with it,
in a background `up` that `down` stops by PID.

Every service serves `/metrics`, `/healthz` and `/readyz` on a free loopback port of its own,
printed with its ready line and recorded in the state file (`metrics`: key → port); a restarted
service keeps its port, so a scrape configuration written once stays valid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from contracts.subjects import Subjects
from services.cli import statedir
from services.cli.supervise import Component, due, on_exit, started
from services.runtime.health import PORT_TAKEN
from services.runtime.lifeline import alive, identity
from services.runtime.natsauth import (
    authorization,
    generate_tls,
    remember,
    server_config,
    write_credentials,
)
from services.runtime.natsserver import NatsServer, NatsServerError, free_port
from services.runtime.recording import deferred, recording

SERVICES = ("allocator", "queue", "scheduler", "admission", "nodeagent")


def state_file(state_dir: Path) -> Path:
    return state_dir / "up.json"


def read_state(state_dir: Path | None = None) -> dict:
    path = state_file(statedir.find() if state_dir is None else state_dir)
    if not path.exists():
        raise SystemExit(f"no running tessera found ({path} missing): run `tessera up` first, "
                         f"or say where it runs (--state-dir, ${statedir.ENV})")  # fmt: skip
    return json.loads(path.read_text())


def available(name: str) -> bool:
    if importlib.util.find_spec(f"services.{name}") is None:
        return False
    return importlib.util.find_spec(f"services.{name}.__main__") is not None


class ControlPlane:
    """NATS (embedded unless a URL is given) + every service as its own process.

    Used by `tessera up`, `tessera demo` and the end-to-end tests, which also `kill` and
    `restart` single services. Processes start together and are waited for by their "ready"
    line; all of them are stopped by PID in `stop()`.
    """

    def __init__(self, state_dir: Path, inventory: str = "", nats_url: str = "",
                 scheduler_conf: str = "", env: dict[str, str] | None = None,
                 extra: dict[str, list[str]] | None = None, device_config: str = "",
                 kubeconfig: str = "", auth: bool = True, nats_cluster: int = 1,
                 tls: bool = False, credentials: str = "") -> None:  # fmt: skip
        self.state_dir = state_dir
        self.kubeconfig = kubeconfig  # schedule a cluster: every service at the Kubernetes edge
        # services end with our nats-server (`--exit-with-pid`); off where the broker is killed
        # and restarted on purpose (the chaos suite), since the services must ride that out
        self.lifeline = True
        self.inventory = inventory
        self.url = nats_url
        self.scheduler_conf = scheduler_conf
        self.device_config = device_config
        self.env = {**os.environ, **(env or {})}
        self.extra = extra or {}
        #: our own broker runs with a user per service (`contracts.permissions`); a given
        #: `--nats` URL takes credential files from `credentials` (a directory), if any
        self.auth = auth
        self.cluster = max(1, nats_cluster)
        self.tls = tls
        self.credentials = Path(credentials) if credentials else (state_dir / "creds" if auth else None)
        self.ca = ""
        self.servers: list[NatsServer] = []
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.components: dict[str, Component] = {}
        self.metrics_ports: dict[str, int] = {}  # process key -> its /metrics port (loopback)
        self.log_dir = state_dir / "logs"
        self._log_start: dict[str, int] = {}  # where this run's part of each service log begins

    @property
    def server(self) -> NatsServer | None:
        """The embedded server (the first member of a cluster)."""
        return self.servers[0] if self.servers else None

    def names(self) -> list[str]:
        return [n for n in SERVICES
                if available(n) and (n != "nodeagent" or self.inventory or self.kubeconfig)]  # fmt: skip

    def creds(self, user: str) -> str:
        """The credential file of one NATS user ("" without auth)."""
        if self.credentials is None:
            return ""
        path = self.credentials / f"{user}.json"
        return str(path) if path.exists() else ""

    def args_of(self, name: str) -> list[str]:
        args = ["--nats", self.url, *self.extra.get(name, [])]
        if creds := self.creds(name):
            args += ["--nats-creds", creds]
        if self.ca:
            args += ["--nats-ca", self.ca]
        if self.cluster > 1:  # R3: every event on three servers before it is acknowledged
            args += ["--stream-replicas", str(min(3, self.cluster))]
        if self.server is not None and self.lifeline:  # our broker: when it is gone, so is the service
            # the broker is restarted when it dies (`supervise`), so the services end with
            # whoever runs it: this process, not the broker's PID (they reconnect to the new one)
            args += ["--exit-with-pid", str(os.getpid())]
        if self.kubeconfig and name != "scheduler":
            args += ["--kubeconfig", self.kubeconfig]
        elif name == "nodeagent":
            args += ["--inventory", self.inventory]
        if name == "scheduler" and self.scheduler_conf:
            args += ["--scheduler-conf", self.scheduler_conf]
        if name == "scheduler" and "nodeagent" in self.names():  # its listing says the nodes are in
            args += ["--await-inventory"]
        if self.device_config and name in ("admission", "scheduler", "nodeagent", "allocator"):
            args += ["--device-config", self.device_config]
        return args

    def _start_nats(self, report: Callable[[str], None]) -> None:
        """Our own nats-server, or `cluster` of them routed on loopback ports: credentials and
        TLS material first, since the servers' configuration names them."""
        config_auth = None
        if self.auth:
            assert self.credentials is not None
            files = write_credentials(self.credentials)
            config_auth = authorization(files, Subjects(), "TESSERA")
        tls = None
        if self.tls:
            ca, cert, key = generate_tls(self.state_dir / "tls")
            self.ca, tls = str(ca), (cert, key)
        config = server_config(config_auth, tls) if config_auth or tls else ""
        n = self.cluster
        ports = distinct_ports(3 * n if n > 1 else 2)  # every one before any is bound
        routes = tuple(ports[2 * n:]) if n > 1 else ()
        for i in range(n):
            self.servers.append(NatsServer(
                data_dir=self.state_dir / "nats" / (f"n{i + 1}" if n > 1 else ""),
                name="tessera" if n == 1 else f"tessera-{i + 1}", config=config,
                port=ports[2 * i], http_port=ports[2 * i + 1],
                cluster_port=routes[i] if routes else 0, routes=routes, tls=self.tls,
            ))  # fmt: skip
        for server in self.servers:  # all launched before any is waited for: a cluster
            server.launch()  # member is not healthy until it sees the others
        for server in self.servers:
            server.wait_ready()
            self.components[self._key(server)] = Component(self._key(server))
            started(self.components[self._key(server)], server.pid or 0, time.monotonic())
        self.url = ",".join(s.url for s in self.servers)
        pids = ", ".join(str(s.pid) for s in self.servers)
        what = f"a cluster of {n}" if n > 1 else "nats-server"
        report(f"{what} (JetStream{', auth' if self.auth else ''}{', TLS' if self.tls else ''}) "
               f"on {self.url}, pid {pids}")  # fmt: skip

    def _key(self, server: NatsServer) -> str:
        """The component name of a server: `nats-server`, or `nats-2` in a cluster."""
        return "nats-server" if self.cluster == 1 else f"nats-{self.servers.index(server) + 1}"

    def start(self, report: Callable[[str], None] = print,
              on_nats: Callable[[str], None] | None = None) -> ControlPlane:  # fmt: skip
        """`on_nats(url)` runs once NATS is up and before any service starts (`up`'s look at
        what the log already holds)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        try:
            if not self.url:
                self._start_nats(report)
            if admin := self.creds("admin"):  # this process is the operator of what it starts
                remember(self.url, admin, self.ca)
                if self.cluster > 1 and self.servers:
                    # the streams made once, before the services: five of them creating an R3
                    # stream at once on a cluster just formed once left it without a leader for
                    # 30 s (every service was told it existed "with another configuration")
                    from services.cli.streams import ensure_streams

                    asyncio.run(ensure_streams(self.url, min(3, self.cluster)))
            if on_nats is not None:
                on_nats(self.url)
            for name in self.names():
                self._spawn(name)
            for name in self.names():
                self._wait_ready(name)
                report(f"  {name:10s} ready (pid {self.procs[name].pid}, "
                       f"metrics {self.metrics_url(name)})")  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def metrics_url(self, key: str) -> str:
        return f"http://127.0.0.1:{self.metrics_ports[key]}/metrics"

    def _spawn(self, key: str) -> subprocess.Popen[str]:
        """Start the process of `key` and record it in `procs` (replacing an earlier one)."""
        name = service_of(key)
        log_path = self.log_dir / f"{key}.log"
        self._log_start[key] = log_path.stat().st_size if log_path.exists() else 0
        port = self.metrics_ports.setdefault(key, free_port())  # a restart keeps its port
        args = [*self.args_of(name), "--metrics-port", str(port), "--metrics-addr", "127.0.0.1"]
        # started and recorded (where `stop()` looks) as one step: a stop signal raised inside
        # Popen, the child forked, left a service nobody stopped
        with log_path.open("a") as log_file, recording():
            proc = self.procs[key] = subprocess.Popen(
                [sys.executable, "-m", f"services.{name}", *args],
                stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL, text=True,
                start_new_session=True, env=self.env,
            )  # fmt: skip
        component = self.components.setdefault(key, Component(key))
        started(component, proc.pid, time.monotonic())
        return proc

    def _wait_ready(self, name: str, timeout: float = 60.0) -> None:
        """Until the service says "ready", it fails, our nats-server is gone or `timeout` is up.
        Its output is read as it comes (poll, not a blocking readline): a service that says
        nothing — one whose broker died before it connected — held `up` and `demo` for ever,
        the deadline looked at only between lines."""
        proc = self.procs[name]
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        ports_left = PORT_TRIES
        said = b""
        while time.monotonic() < deadline:
            if gone := self.nats_gone():
                raise SystemExit(f"{gone.replace(' exited', ' exited during start-up', 1)}\n"
                                 f"  (every service started is stopped)")  # fmt: skip
            fd = proc.stdout.fileno()
            if not _readable(fd, min(READY_POLL, max(0.0, deadline - time.monotonic()))):
                continue
            chunk = os.read(fd, 4096)
            said += chunk
            if b"ready" in said:
                return
            if chunk:
                said = said[said.rfind(b"\n") + 1:]  # only the line being written matters
                continue
            code = proc.wait()
            if code == PORT_TAKEN and ports_left > 1:
                # the free port we chose was taken before the service bound it (another
                # process on this machine probing ports too): another port, again
                ports_left -= 1
                proc.stdout.close()
                self.metrics_ports[name] = free_port()
                proc = self._spawn(name)
                assert proc.stdout is not None
                said = b""
                continue
            log_path = self.log_dir / f"{name}.log"
            cause = failure_cause(log_path, self._log_start.get(name, 0))
            raise SystemExit(f"{name} exited ({code}) before it was ready: {cause}\n"
                             f"  (full log: {log_path})")  # fmt: skip
        raise SystemExit(f"{name} not ready after {timeout}s")

    def nats_gone(self) -> str:
        """What became of our nats-server if it has exited ("" while it runs, or when it is
        not ours or was stopped on purpose: `kill_nats`), with the last line it wrote."""
        for server in self.servers:
            proc = server.process
            if proc is None or (code := proc.poll()) is None:
                continue
            if code < 0:
                how = f"killed by {signal.Signals(-code).name}"
            else:
                how = f"exited ({code}): {failure_cause(server._log(), 0)}"
            return f"{self._key(server)} (pid {proc.pid}) exited: {how}"
        return ""

    def add_replica(self, name: str) -> str:
        """Start one more process of service `name` on the same durable consumer — what a second
        replica of its Deployment is — and return its key (`allocator#2`) for kill/restart."""
        n = 1 + sum(1 for key in self.procs if service_of(key) == name)
        key = f"{name}#{n}"
        self._spawn(key)
        self._wait_ready(key)
        return key

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        proc.send_signal(sig)
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()

    def restart(self, name: str) -> None:
        self._spawn(name)
        self._wait_ready(name)

    def running(self) -> bool:
        """Every service and our own nats-server still up."""
        return all(p.poll() is None for p in self.procs.values()) and all(
            s.process is not None and s.process.poll() is None for s in self.servers
        )

    def supervise(self, now: float) -> bool:
        """One look at every process (`up`'s loop, foreground or detached): a service that
        ended is restarted after its backoff (or given up on, with the reason); so is our
        nats-server (or a cluster member), on its store and ports, saying how it ended — a
        kill -9 of the broker stopped every service for good, the only word "nats-server
        exited"; one that keeps dying at once (a corrupt store, a full disk, its port taken) was
        restarted every half second for ever. The services ride the outage out: they reconnect
        by themselves. False when the broker is given up on: nothing can run without it."""
        for server in self.servers:
            key = self._key(server)
            component = self.components[key]
            proc = server.process
            if proc is not None and proc.poll() is None:
                continue
            if component.state == "running":  # it has just ended
                code = proc.returncode if proc is not None else 0
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited ({code})"
                gone = self.nats_gone() or f"{key} {how}"
                server.process = None
                on_exit(component, how, now)
                if component.state == "failed":
                    print(f"error: {gone}; {component.last_error}", file=sys.stderr, flush=True)
                    return False
                print(f"{gone}: restarting it on the same store and port in {component.retry_at - now:.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
            if not due(component, now):
                continue
            component.restarts += 1
            try:
                server.start()
            except (NatsServerError, OSError) as exc:  # a quick failure like any other
                server.process = None
                component.started_at = now  # it failed at once: a quick failure
                on_exit(component, f"restarting it failed: {exc}", now)
                if component.state == "failed":
                    print(f"error: {key}: {component.last_error}", file=sys.stderr, flush=True)
                    return False
                print(f"{key}: restarting it failed ({exc}); again in {component.retry_at - now:.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
                continue
            started(component, server.pid or 0, now)
            print(f"{key}: restarted on the same store and port (pid {server.pid})",
                  file=sys.stderr, flush=True)  # fmt: skip
        for key, proc in list(self.procs.items()):
            component = self.components[key]
            if component.state == "running" and proc.poll() is not None:
                if proc.stdout is not None:
                    proc.stdout.close()
                on_exit(component, self._why(key, proc.returncode), now)
            if due(component, now):
                component.restarts += 1
                try:
                    self.restart(key)
                except SystemExit as exc:  # ended again before it was ready
                    on_exit(component, str(exc).split("\n")[0], time.monotonic())
        return True

    def kill_nats(self) -> None:
        """SIGKILL the embedded nats-server (no flush); `restart_nats` brings it back."""
        assert self.server is not None, "only the embedded server can be killed"
        self.server.kill()

    def restart_nats(self) -> None:
        """The same port and store directory: clients reconnect by themselves."""
        assert self.server is not None
        self.server.start()

    def exited(self) -> dict[str, int]:
        """Processes that ended without being told to (key -> exit code)."""
        return {k: rc for k, p in self.procs.items() if (rc := p.poll()) is not None}

    def _why(self, key: str, code: int) -> str:
        """A signal names itself (its log's last line would be some earlier, unrelated line);
        an exit of its own is said with the last line it wrote — but a clean one (0), which is
        no error: `get components` showed a clean stop's whole JSON log line as its LAST_ERROR."""
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        if code == 0:
            return "exited (0)"
        return f"exited ({code}): {failure_cause(self.log_dir / f'{key}.log', self._log_start.get(key, 0))}"

    def state(self) -> dict:
        for key, proc in self.procs.items():
            self.components[key].pid = proc.pid
        for server in self.servers:
            self.components[self._key(server)].pid = server.pid
        state = {
            "nats": self.url,
            "nats_pid": self.server.pid if self.server else None,
            "nats_pids": [s.pid for s in self.servers],
            "services": {n: p.pid for n, p in self.procs.items()},
            "credentials": str(self.credentials) if self.credentials else "",
            "ca": self.ca,
            "supervisor_pid": os.getpid(),
            "components": [c.record() for c in self.components.values()],
            "metrics": {n: self.metrics_ports[n] for n in self.procs},
        }
        # what `down` checks before it signals a PID: the PID of a process gone (up killed,
        # the machine rebooted) may name another process by then
        state["identities"] = identities(recorded_pids(state))
        return state

    def stop(self) -> None:
        """Every service (SIGTERM to all, SIGKILL to what is left 10 s later), then our
        nats-server. A stop signal meanwhile is ignored, as after the first one (`_interrupt`):
        the stop is what it asks for, and Ctrl-C raised inside `_stop_pids` during a normal stop
        (`demo`'s and `up`'s `finally`) skipped the nats-server — in a session of its own, it
        then ran on for good."""
        with _stop_signals_ignored():
            _stop_pids([proc.pid for proc in self.procs.values()])
            for proc in self.procs.values():
                if proc.stdout is not None:
                    proc.stdout.close()
                proc.poll()
            self.procs.clear()
            for server in self.servers:
                server.stop()
            self.servers.clear()


@contextlib.contextmanager
def _stop_signals_ignored() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored for the block, their handlers restored after (only
    the main thread may set them; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:  # None: set outside Python, cannot be put back from here
                signal.signal(sig, handler)


#: metrics ports tried per service start before its failure is reported
PORT_TRIES = 3
#: seconds between looks at our nats-server while a service starts
READY_POLL = 0.2


def _readable(fd: int, timeout: float) -> bool:
    """Whether `fd` has something to read (or its end) within `timeout` s. poll, not select:
    select raises ValueError for a descriptor of 1024 or more (a process with many open)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def distinct_ports(count: int) -> list[int]:
    """Free loopback ports, no two alike (the OS may hand one out twice while none is bound)."""
    ports: list[int] = []
    while len(ports) < count:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def failure_cause(log_path: Path, start: int) -> str:
    """The last line a failed start wrote to its log: for a Python traceback, the exception
    and its message (a configuration error carries its key path), without the module path."""
    try:
        with log_path.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "(it wrote nothing)"
    kind, sep, message = lines[-1].partition(": ")
    if sep and "." in kind and " " not in kind:  # services.core.x.ConfigError -> ConfigError
        return f"{kind.rsplit('.', 1)[1]}: {message}"
    return lines[-1]


def running(state_dir: Path) -> dict | None:
    """The state of a `tessera up` whose processes are still alive, or None (absent or stale)."""
    path = state_file(state_dir)
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state if any(ours(state, p) is not False for p in recorded_pids(state)) else None


def recorded_pids(state: dict) -> list[int]:
    """Every PID a state file names (supervisor, nats-servers, services), once each."""
    pids = [state.get("supervisor_pid"), state.get("nats_pid"), *(state.get("nats_pids") or []),
            *state.get("services", {}).values()]  # fmt: skip
    return list(dict.fromkeys(p for p in pids if p))


def identities(pids: list[int]) -> dict[str, str]:
    """PID -> what stays the same for the life of that process (`lifeline.identity`: its start
    time in /proc; without /proc only "alive", which any live process matches)."""
    return {str(pid): ident for pid in pids if (ident := identity(pid)) is not None}


def ours(state: dict, pid: int) -> bool | None:
    """Whether `pid` still runs the process the state file recorded: alive with the identity it
    had then. None when it runs but the file recorded no identities (an older tessera wrote
    it): whose process it is cannot be told."""
    recorded = state.get("identities")
    if recorded is None:
        return None if alive(pid) else False
    return str(pid) in recorded and identity(pid) == recorded[str(pid)]


def service_of(key: str) -> str:
    """The service a process key names: `allocator#2` is a second allocator."""
    return key.split("#", 1)[0]


#: How long a SIGKILLed process may take to exit before a stop returns anyway (a process in
#: uninterruptible sleep cannot be hurried; a caller reading `down` as done must not hang).
KILL_SETTLE = 5.0


def _stop_pid(pid: int, timeout: float = 10.0) -> None:
    _stop_pids([pid], timeout)


def _gone(pid: int) -> bool:
    """Reaped if it is our child (or kill(0) keeps finding the zombie); else `lifeline`'s look
    at /proc, where an exited process not yet reaped (Z) counts as gone: a service `up --detach`
    started is not `down`'s child, and in a container whose init does not reap it, `down`
    waited out its whole grace period for each of them."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
    except ChildProcessError:
        pass  # another's child, or no such process
    return not alive(pid)


def _stop_pids(pids: list[int], timeout: float = 10.0) -> None:
    """SIGTERM to all at once, then SIGKILL to whoever is left after `timeout`: one service
    after another, each taking its few tenths of a second to flush and close, made every stop
    of the five (a test's teardown, `tessera down`) wait for the sum."""
    left = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            left.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if not _gone(pid)]
        if left:
            time.sleep(0.05)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + KILL_SETTLE  # SIGKILL is delivered, not done: wait for the exit
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if not _gone(pid)]
        if left:
            time.sleep(0.01)


def check_config(args: argparse.Namespace) -> None:
    """Refuse a bad --scheduler-conf / --device-config here, on the terminal, before any
    service starts and fails with it in a log file."""
    from services.core.devices import load_catalogue
    from services.core.scheduling.config import not_run, parse_conf
    from services.core.scheduling.decide import plugin_names
    from services.runtime.bootstrap import config_file

    if args.scheduler_conf:
        conf = config_file("--scheduler-conf", args.scheduler_conf, parse_conf)
        for line in not_run(conf, plugin_names()):  # the scheduler logs it too, in a file seldom read
            print(f"warning: --scheduler-conf {args.scheduler_conf}: {line}", file=sys.stderr)
    if args.device_config:
        catalogue = config_file("--device-config", args.device_config, load_catalogue)
        for line in catalogue.not_acted_on:  # the services log it too, in files seldom read
            print(f"warning: --device-config {args.device_config}: {line}", file=sys.stderr)


def _exporter_argument(value: str) -> str:
    """`--trace-exporter` checked at parse time; "" (not given) leaves the services the
    variables, which `cmd_up` checks (a bad one crash-looped every service)."""
    from services.runtime.telemetry import exporter_argument

    return exporter_argument(value) if value else ""


def cmd_up(args: argparse.Namespace) -> int:
    check_config(args)
    if not args.trace_exporter:
        from services.runtime.telemetry import exporter_names, exporter_setting

        exporter_names(*exporter_setting())  # UnknownTraceExporter: main's one line, exit 2
    state_dir = Path(args.state_dir).absolute()  # up.json's paths must hold from any directory
    if args.kubeconfig and args.inventory:
        raise SystemExit("give --kubeconfig (a cluster's nodes) or --inventory (simulated nodes), not both")
    if args.nats and (args.nats_cluster > 1 or args.nats_tls):
        raise SystemExit("--nats-cluster and --nats-tls start our own NATS: not with --nats URL")
    state = running(state_dir)
    if state is not None:  # a second broker on the same store would orphan the first set
        pids = ", ".join(f"{n} {p}" for n, p in [("nats-server", state.get("nats_pid")),
                                                 *state["services"].items()] if p)  # fmt: skip
        print(f"error: tessera is already running (pid {pids}) on {state['nats']}; "
              f"`tessera down --state-dir {state_dir}` stops it", file=sys.stderr)  # fmt: skip
        return 1
    if args.kubeconfig and not args.skip_preflight and not os.environ.get(DETACHED):  # (the parent looked)
        if (refused := _preflight(args.kubeconfig, args.scheduler_name or ["volcano", "tessera"])) is not None:
            print(f"error: {refused}", file=sys.stderr)
            return 1
    if args.detach:
        return _detach(state_dir)
    if args.fresh and not args.nats:
        shutil.rmtree(state_dir / "nats", ignore_errors=True)
    extra = {"allocator": ["--hami-node-lock", args.hami_node_lock]} if args.kubeconfig else {}
    for name in ("admission", "queue", "allocator", "nodeagent"):
        for sched in args.scheduler_name:
            extra.setdefault(name, []).extend(["--scheduler-name", sched])
    plane = ControlPlane(state_dir, args.inventory, args.nats, args.scheduler_conf,
                         device_config=args.device_config,
                         kubeconfig=str(Path(args.kubeconfig).resolve()) if args.kubeconfig else "",
                         extra=extra, auth=not args.no_nats_auth and not args.nats,
                         nats_cluster=args.nats_cluster, tls=args.nats_tls,
                         credentials=str(Path(args.nats_creds_dir).absolute()) if args.nats_creds_dir else "",
                         env={"TESSERA_TRACE_EXPORTER": args.trace_exporter} if args.trace_exporter else None)  # fmt: skip
    if args.kubeconfig:
        print(f"scheduling the cluster of {args.kubeconfig} (pods with schedulerName "
              f"{', '.join(args.scheduler_name or ['volcano', 'tessera'])})")  # fmt: skip
    for name in SERVICES:
        if not available(name):
            print(f"  {name:10s} not built yet: skipped")
        elif name == "nodeagent" and not args.inventory and not args.kubeconfig:
            print(f"  {name:10s} no --inventory given: no simulated nodes, skipped")

    def on_nats(url: str) -> None:
        from services.cli.held import report_held
        from services.cli.streams import ensure_streams

        report_held(url, args.inventory, fresh=args.fresh and bool(args.nats))
        if plane.creds("admin"):  # the services may create a stream, not update one
            asyncio.run(ensure_streams(url, min(3, plane.cluster)))

    catch_stop_signals()  # `kill PID` of up, or its terminal closing, stops what it started, even mid-start
    try:
        plane.start(on_nats=on_nats)
        written = plane.state()
        write_state(state_dir, written)
        if os.environ.get(DETACHED):
            print("supervising in the background; `tessera down` stops it", flush=True)
        else:
            print("running (a crashed service is restarted); Ctrl-C stops everything", flush=True)
        while plane.supervise(time.monotonic()):
            if (now := plane.state()) != written:
                write_state(state_dir, now)
                written = now
            time.sleep(0.5)
        print("error: nats-server given up on (see above): stopping every service",
              file=sys.stderr, flush=True)  # fmt: skip
        return 1
    except KeyboardInterrupt:
        quiet_after_interrupt()
        return 0
    finally:
        plane.stop()
        state_file(state_dir).unlink(missing_ok=True)


def _preflight(kubeconfig: str, scheduler_names: list[str]) -> str | None:
    """Why `up` must not start against this cluster (`services.cli.preflight`), or None. A
    cluster that cannot be asked is a refusal too, as for the chart's lookup: what runs there is
    not known."""
    from services.cli import kubeverbs, preflight
    from services.cli.connection import Unreachable

    try:
        found = kubeverbs.run(kubeconfig, lambda kube: preflight.look(kube, scheduler_names))
    except (kubeverbs.Refused, Unreachable) as exc:
        return (f"cannot look for a running Volcano or HAMi scheduler (listing Deployments in every namespace: "
                f"{exc}); {preflight.SKIP_FLAG} starts without looking")  # fmt: skip
    for note in found.notes:  # what stays another's beside it: said, not refused
        print(f"note: {note}", file=sys.stderr, flush=True)
    return preflight.refusal(found, scheduler_names) if found.found else None


#: Set in the environment of the supervisor `up --detach` leaves running.
DETACHED = "TESSERA_UP_DETACHED"


def write_state(state_dir: Path, state: dict) -> None:
    """Whole or not at all (a rename): `up --detach` and `get components` read it meanwhile."""
    tmp = state_dir / "up.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(state_file(state_dir))


def _detach(state_dir: Path) -> int:
    """Leave a supervising `up` (this command without --detach) running in its own session,
    its output in `<state-dir>/logs/up.log`; return once it recorded a running system, or with
    its exit code and what it said when it could not start one."""
    state_file(state_dir).unlink(missing_ok=True)  # a stale one (checked above) would read as ready
    log_path = state_dir / "logs" / "up.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [a for a in sys.argv[1:] if a != "--detach"]
    start = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("a") as out:  # appended: a run's end (why it stopped) outlives the next `up`
        out.write(f"--- tessera up at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n")
        out.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", *argv], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, DETACHED: "1", "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    while True:
        rc = proc.poll()
        if rc is not None:
            print(_since(log_path, start), end="")
            return rc or 1
        path = state_file(state_dir)
        if path.exists() and json.loads(path.read_text()).get("supervisor_pid") == proc.pid:
            print(_since(log_path, start), end="")
            print(f"detached (supervisor pid {proc.pid}); `tessera down` stops it "
                  f"(state in {path}, output in {log_path})")  # fmt: skip
            return 0
        time.sleep(0.1)


def _since(path: Path, start: int) -> str:
    """What this run wrote to the appended `up.log` (after its `--- tessera up` line)."""
    with path.open("rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    return text.split("\n", 1)[1] if text.startswith("--- tessera up") else text


class Interrupted(KeyboardInterrupt):
    """SIGHUP, SIGTERM or SIGINT to `up` or `demo`: what they started is stopped on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: what ends a foreground `up` or a `demo`: Ctrl-C, `kill PID`, and the terminal closing
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: object) -> None:
    """Raise once: the stop that follows (SIGTERM to every service, then to nats-server) must
    not be cut short by the next signal — a terminal closing sends SIGHUP and then, perhaps,
    SIGTERM; a second Ctrl-C left a traceback from `_stop_pids`."""
    if deferred(signum):  # a process is being started: raised once it is recorded, and stopped
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def quiet_after_interrupt() -> None:
    """The signal may land anywhere: between making a request's coroutine and `asyncio.run`
    starting it (left unawaited), inside an event loop's construction (whose __del__ then fails
    on what it never made). Python reports those when they are collected, after the one line
    that says the stop is done: nothing was lost, so not a second message with a traceback.
    A task the interruption left pending is reported through asyncio's logger when collected
    ("Task was destroyed but it is pending!"), a client's broken connection through nats-py's."""
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    sys.unraisablehook = lambda unraisable: None
    for name in ("asyncio", "nats"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def catch_stop_signals() -> None:
    """SIGHUP and SIGTERM (and SIGINT) raise `Interrupted` in the main thread, so the `finally`
    that stops every process started runs: without a handler SIGHUP (the terminal closed on
    `make run`) ended the process at once, leaving the services, our nats-server and the
    temporary directory behind."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)


def cmd_down(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    if args.purge and not state_file(state_dir).exists():  # nothing running: just empty the store
        shutil.rmtree(state_dir / "nats", ignore_errors=True)
        print(f"  log purged ({state_dir / 'nats'} removed)")
        return 0
    if not state_file(state_dir).exists():  # stopped already: what was asked holds (exit 0)
        print(f"nothing running ({state_file(state_dir)} missing: no `tessera up` on {state_dir})")
        return 0
    state = read_state(state_dir)
    path = state_file(state_dir)
    # only a PID that still names the process `up` recorded is signalled: after `up` was
    # killed, or the machine rebooted, it may name anyone's (SIGTERM, then SIGKILL)
    unknown = [p for p in recorded_pids(state) if ours(state, p) is None]
    if unknown:  # an older tessera's file: no identities to check; signal nothing
        print(f"error: {path} records no process identities (an older tessera wrote it), so whether "
              f"pid {', '.join(map(str, unknown))} still run tessera's processes cannot be told: "
              f"nothing signalled. Stop them yourself if they are tessera's, then run `tessera down` "
              f"again", file=sys.stderr)  # fmt: skip
        return 1
    if not any(ours(state, p) for p in recorded_pids(state)):
        path.unlink(missing_ok=True)
        print(f"nothing running (stale state {path} removed: none of the processes it records runs)")
        if args.purge and state.get("nats_pid"):  # our own store: emptied as with nothing recorded
            shutil.rmtree(state_dir / "nats", ignore_errors=True)
            print(f"  log purged ({state_dir / 'nats'} removed)")
        return 0
    supervisor = state.get("supervisor_pid")
    if supervisor and supervisor != os.getpid() and ours(state, supervisor):
        _stop_pid(supervisor, timeout=60)  # it stops what it runs, then itself
    # gone already when the supervisor was there; by PID anyway
    _stop_pids([p for p in state["services"].values() if ours(state, p)])
    for name in state["services"]:
        print(f"  {name:10s} stopped")
    if args.purge and not state.get("nats_pid"):  # someone else's broker: delete our streams
        from services.cli.held import purge

        if admin := _creds_file(state, "admin"):
            remember(state["nats"], admin, state.get("ca", ""))
        print(f"  log purged ({purge(state['nats'])} streams deleted)")
    if state.get("nats_pid"):
        for pid in state.get("nats_pids") or [state["nats_pid"]]:
            if ours(state, pid):
                _stop_pid(pid)
        print("  nats-server stopped")
        if args.purge:
            shutil.rmtree(state_dir / "nats", ignore_errors=True)
            print(f"  log purged ({state_dir / 'nats'} removed)")
    state_file(state_dir).unlink(missing_ok=True)
    return 0


def _creds_file(state: dict, user: str) -> str:
    """A NATS user's credential file of the system `state` describes ("" without auth)."""
    directory = state.get("credentials", "")
    path = Path(directory) / f"{user}.json" if directory else None
    return str(path) if path is not None and path.exists() else ""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser("up", help="start NATS and the services as separate processes")
    up.add_argument("--nats", default="", help="use this NATS instead of the embedded one")
    up.add_argument("--inventory", default="", help="simulated nodes for the node-agent")
    up.add_argument("--scheduler-conf", default="", help="volcano-scheduler.conf for the scheduler")
    up.add_argument("--device-config", default="", help="HAMi device-config.yaml for all services")
    up.add_argument("--kubeconfig", default="",
                    help="schedule this cluster's pods and nodes (instead of simulated nodes)")
    up.add_argument("--scheduler-name", action="append", default=[],
                    help="with --kubeconfig: pods with this schedulerName are Tessera's "
                         "(repeatable; default volcano and tessera)")
    up.add_argument("--skip-preflight", action="store_true",
                    help="with --kubeconfig: start even beside a running Volcano or HAMi scheduler that "
                         "serves a scheduler name Tessera takes (refused otherwise, as the chart's preflight)")
    up.add_argument("--hami-node-lock", default="on", choices=("on", "off"),
                    help="with --kubeconfig: bind device pods under HAMi's node lock (on when "
                         "HAMi's device plugins run on the nodes)")
    up.add_argument("--detach", action="store_true",
                    help="return once ready, leaving a supervisor running; `tessera down` stops it")
    up.add_argument("--nats-cluster", type=int, default=1, metavar="N",
                    help="run N nats-servers routed on loopback ports, streams replicated on 3")
    up.add_argument("--nats-tls", action="store_true",
                    help="TLS between the clients and our NATS (a self-signed CA in <state-dir>/tls)")
    up.add_argument("--no-nats-auth", action="store_true",
                    help="our NATS without users (anyone on the port may append or purge)")
    up.add_argument("--nats-creds-dir", default="",
                    help="with --nats: the directory of the users' credential files (<user>.json)")
    up.add_argument("--trace-exporter", default="", type=_exporter_argument,
                    help="every service's spans: console (into its log) or otlp (OTEL_EXPORTER_OTLP_*; "
                         "Jaeger in docker-compose.yml), or a comma-separated list; default "
                         "TESSERA_TRACE_EXPORTER / OTEL_TRACES_EXPORTER")  # fmt: skip
    up.add_argument("--fresh", action="store_true", help="start with an empty log (drops what it holds)")
    up.add_argument("--state-dir", default=str(statedir.for_up()), help=statedir.UP_HELP)
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="stop what `tessera up --detach` started")
    down.add_argument("--purge", action="store_true", help="also delete the log, so the next `up` starts empty")
    down.add_argument("--state-dir", default=str(statedir.find()), help=statedir.HELP)
    down.set_defaults(func=cmd_down)
