"""`/healthz` and `/readyz` beside `/metrics`, so a kubelet can probe every service on one port.

Liveness and readiness answer different questions, and a probe that confuses them restarts a
service that is merely busy, or sends traffic to one that is not caught up:

- **live** (`/healthz`): the asyncio loop still turns. The HTTP server runs on a thread of its
  own (so `/metrics` answers during a long scheduling session), which means "the server
  answered" proves nothing about the service; a task on the loop stamps a clock every second
  and the probe fails only when that stamp is older than `stall` seconds. A replay of a long log
  at start keeps the loop turning (it awaits NATS), so recovery alone never fails liveness.
- **ready** (`/readyz`): the service rebuilt its state from the log, started consuming, its
  NATS connection is up, and (against a cluster) the API server has not been unreachable for
  longer than `--kube-unready-after`. Until then a rollout does not count the pod as available.
  An API-server outage fails readiness only: restarting the service would not end it.

The checks take a clock so tests need neither sleeps nor timing asserts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from services.runtime.waits import within

#: exit status of a service whose --metrics-port another process holds: whoever chose the port
#: (`tessera up` probes free ports before its services bind them) may choose another
PORT_TAKEN = 98

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Health:
    """What the probes read: the loop's last tick, whether the service is ready, and extra
    readiness checks (e.g. "the NATS connection is up") that are asked on every probe."""

    def __init__(self, stall: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall, self.clock = stall, clock
        self.last_tick = clock()
        self.ready = False
        self.checks: dict[str, Callable[[], bool]] = {}
        #: checks that say why: '' while fine, else the words `/readyz` answers with
        self.problems: list[Callable[[], str]] = []

    def tick(self) -> None:
        self.last_tick = self.clock()

    def live(self) -> tuple[bool, str]:
        lag = self.clock() - self.last_tick
        if lag > self.stall:
            return False, f"event loop stalled for {lag:.0f}s (limit {self.stall:.0f}s)"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        if not self.ready:
            return False, "recovering from the log"
        failed = [name for name, check in self.checks.items() if not check()]
        failed += [why for problem in self.problems if (why := problem())]
        if failed:
            return False, "not ready: " + ", ".join(failed)
        return True, "ok"

    async def beat(self, stopping: asyncio.Event, every: float = 1.0) -> None:
        """Stamp the clock from the loop until the service stops (the liveness signal)."""
        while not stopping.is_set():
            self.tick()
            try:
                await within(stopping.wait(), every)
            except TimeoutError:
                pass


def probes_app(health: Health, exposition: Callable[[], bytes]) -> Callable[..., Iterable[bytes]]:
    """A WSGI app: the two probe paths, and Prometheus' text exposition (`exposition()`, the
    format every Prometheus reads; the service's own gauges are written in it) for the rest."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok, why = health.live() if path == "/healthz" else health.readiness()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8")])  # fmt: skip
            return [why.encode() + b"\n"]
        body = exposition()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4),
                                  ("Content-Length", str(len(body)))])  # fmt: skip
        return [body]

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a hung scrape must not keep the process from exiting


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # a probe every few seconds
        pass


def serve_probes(health: Health, exposition: Callable[[], bytes], port: int,
                 addr: str = "127.0.0.1") -> WSGIServer:  # fmt: skip
    """Start the server on a daemon thread; returns it (tests read its port and shut it down)."""
    server = make_server(addr, port, probes_app(health, exposition), _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
