"""Wiring in one place (STYLE §14): config → connection → log → app → consume loop + API.

Every service process is `python -m services.<name>`; this module turns common flags and
environment into a running service, so a service module only says how to build its app.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from opentelemetry import trace

from contracts.permissions import APPENDS
from contracts.subjects import Subjects
from services.core.devices import Catalogue, load_catalogue
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.kube.reach import UNREADY_AFTER
from services.runtime import collector, lifeline, liveness
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import EventLog
from services.runtime.health import PORT_TAKEN, Health
from services.runtime.service import EventService, install_stop_signals, serve_api
from services.runtime.snapshot import ObjectStoreSnapshots, Retention, Snapshots
from services.runtime.tasks import cancel_all
from services.runtime.telemetry import (
    UnknownTraceExporter,
    configure_logging,
    default_exporter,
    exporter_argument,
    make_provider,
)

log = logging.getLogger(__name__)


class App(Protocol):
    service: EventService

    async def recover(self) -> None: ...


class Edge(Protocol):
    """A service's part at the Kubernetes edge (DESIGN §8), beside its own consumer."""

    async def recover(self) -> None: ...

    async def run(self, stopping: asyncio.Event) -> None: ...


class Edges:
    """Several parts at the edge of one service, recovered in order and run together."""

    def __init__(self, *parts: Edge) -> None:
        self.parts = parts

    async def recover(self) -> None:
        for part in self.parts:
            await part.recover()

    async def run(self, stopping: asyncio.Event) -> None:
        await asyncio.gather(*(part.run(stopping) for part in self.parts))


EdgeFactory = Callable[[App, EventLog, object], Edge]


def carry_edges(app: App, at_edge: Edge) -> list[str]:
    """Let the service's consumer deliver to its edge parts' readers too: one delivery per
    message in the process instead of one per reader (services/runtime/sharing.py)."""
    parts = at_edge.parts if isinstance(at_edge, Edges) else (at_edge,)
    carried = []
    for part in parts:
        svc = getattr(part, "service", None)
        if isinstance(svc, EventService) and svc is not app.service and app.service.carry(svc):
            carried.append(svc.name)
    if carried:
        log.info("%s's consumer also delivers to %s", app.service.name, ", ".join(carried))
    return carried
T = TypeVar("T")


def config_file(flag: str, path: str, parse: Callable[[str], T]) -> T:
    """Read and parse a configuration file named by `flag`. A bad one ends the process with
    one line (flag, file, key path, rule) and no traceback: that line is what an operator
    sees in `kubectl logs` or on the terminal, and a traceback would bury it."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SystemExit(f"{flag} {path}: {exc.strerror or exc}") from None
    try:
        return parse(text)
    except ValueError as exc:  # ConfigError, CatalogueError: the path is in the message
        raise SystemExit(f"{flag} {path}: {exc}") from None


def device_catalogue(path: str) -> Catalogue | None:
    """A HAMi device-config.yaml (`--device-config`), or None for the built-in catalogue."""
    if not path:
        return None
    catalogue = config_file("--device-config", path, load_catalogue)
    for line in catalogue.not_acted_on:
        log.warning("--device-config %s: %s", path, line)
    return catalogue


def common_parser(name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m services.{name}")
    env = os.environ.get
    parser.add_argument("--nats", default=env("TESSERA_NATS_URL", "nats://127.0.0.1:4222"),
                        help="NATS URL, or a cluster's URLs comma-separated")  # fmt: skip
    parser.add_argument("--nats-creds", default=env("TESSERA_NATS_CREDS", ""),
                        help="this service's NATS credential file ({\"user\", \"password\"})")  # fmt: skip
    parser.add_argument("--nats-ca", default=env("TESSERA_NATS_CA", ""),
                        help="CA bundle that signed the NATS server's TLS certificate")  # fmt: skip
    parser.add_argument("--root", default=env("TESSERA_SUBJECT_ROOT", "tessera"))
    parser.add_argument("--stream", default=env("TESSERA_STREAM", "TESSERA"))
    parser.add_argument("--metrics-port", type=int, default=int(env("TESSERA_METRICS_PORT", "0")),
                        help="serve /metrics, /healthz and /readyz on this port (0: off)")  # fmt: skip
    parser.add_argument("--metrics-addr", default=env("TESSERA_METRICS_ADDR", "127.0.0.1"),
                        help="address of that server (0.0.0.0 in a pod, for the kubelet's "
                             "probes and Prometheus)")  # fmt: skip
    parser.add_argument("--health-stall", type=float,
                        default=float(env("TESSERA_HEALTH_STALL", "60")),
                        help="/healthz fails when the event loop has not turned for this long, s")  # fmt: skip
    parser.add_argument("--trace-exporter", default=None, type=exporter_argument,
                        help="where spans go: none, console (stderr) or otlp (OTEL_EXPORTER_OTLP_*), "
                             "or a comma-separated list; default TESSERA_TRACE_EXPORTER, else "
                             "OTEL_TRACES_EXPORTER")  # fmt: skip
    parser.add_argument("--log-level", default=env("TESSERA_LOG_LEVEL", "INFO"))
    parser.add_argument("--durable", default=env("TESSERA_DURABLE", name))
    parser.add_argument("--ack-wait", type=float, default=float(env("TESSERA_ACK_WAIT", "30")))
    parser.add_argument("--duplicate-window", type=float,
                        default=float(env("TESSERA_DUPLICATE_WINDOW", "120")),
                        help="the stream's Nats-Msg-Id window, s (tests shorten it to show that "
                             "nothing relies on it)")  # fmt: skip
    parser.add_argument("--stream-replicas", type=int,
                        default=int(env("TESSERA_STREAM_REPLICAS", "1")),
                        help="replicas of the event streams (3 on a 3-node NATS cluster: R3)")  # fmt: skip
    parser.add_argument("--device-config", default=env("TESSERA_DEVICE_CONFIG", ""),
                        help="HAMi device-config.yaml (default: HAMi's chart values)")  # fmt: skip
    parser.add_argument("--exit-with-pid", type=int, default=0,
                        help="stop when this process (the nats-server `tessera up` started) ends")  # fmt: skip
    keep = parser.add_argument_group("restart cost and memory (issue 12 item 7)")
    keep.add_argument("--snapshot-every", type=int,
                      default=int(env("TESSERA_SNAPSHOT_EVERY", "500")),
                      help="store a snapshot of the service's projection once the log moved this "
                           "many messages past the last one; a start folds only what follows it "
                           "(0: off, every start replays from #1)")  # fmt: skip
    keep.add_argument("--keep-finished", type=int,
                      default=int(env("TESSERA_KEEP_FINISHED", str(DEFAULT_KEEP_FINISHED))),
                      help="finished jobs a service remembers (the most recent); older ones are "
                           "forgotten")  # fmt: skip
    kube = parser.add_argument_group("Kubernetes (without these the service runs on the log only)")
    kube.add_argument("--kubeconfig", default=env("TESSERA_KUBECONFIG", ""),
                      help="schedule the cluster of this kubeconfig")  # fmt: skip
    kube.add_argument("--in-cluster", action="store_true",
                      default=env("TESSERA_IN_CLUSTER", "") == "true",
                      help="schedule the cluster this pod runs in (service account)")  # fmt: skip
    kube.add_argument("--scheduler-name", action="append", default=[],
                      help="pods with this schedulerName are Tessera's (repeatable; "
                           "default: volcano and tessera)")  # fmt: skip
    kube.add_argument("--kube-qps", type=float, default=float(env("TESSERA_KUBE_QPS", "50")),
                      help="client-side API request rate limit per service (0: none; default "
                           "kube-scheduler's 50); Events have a limit of their own alike, as "
                           "kube-scheduler's event client does")  # fmt: skip
    kube.add_argument("--kube-burst", type=int, default=int(env("TESSERA_KUBE_BURST", "100")),
                      help="requests allowed at once above the rate (default kube-scheduler's 100)")  # fmt: skip
    kube.add_argument("--kube-unready-after", type=float,
                      default=float(env("TESSERA_KUBE_UNREADY_AFTER", str(UNREADY_AFTER))),
                      help="seconds the API server may go unanswered before /readyz fails (default "
                           "%(default)s; /healthz never does for it: a restart would not bring it back)")  # fmt: skip
    return parser


def scheduler_names(args: argparse.Namespace) -> tuple[str, ...]:
    names = args.scheduler_name or os.environ.get("TESSERA_SCHEDULER_NAMES", "volcano,tessera").split(",")
    return tuple(n.strip() for n in names if n.strip())


async def connect_kube(args: argparse.Namespace, name: str = "") -> object | None:
    """The API client when the service runs against a cluster (`--kubeconfig`/`--in-cluster`),
    naming the service in its User-Agent (`tessera-scheduler`…)."""
    if not (args.kubeconfig or args.in_cluster):
        return None
    from services.kube.client import Kube, Limits, agent_of

    return await Kube.connect(args.kubeconfig, Limits(qps=args.kube_qps, burst=args.kube_burst), agent_of(name))


async def run_service(
    name: str,
    args: argparse.Namespace,
    build: Callable[[EventLog], App],
    api: Callable[[App], Mapping[str, Callable[[bytes], Awaitable[bytes]]]] | None = None,
    edge: EdgeFactory | None = None,
) -> int:
    profile_dir = os.environ.get("TESSERA_PROFILE_DIR", "")  # performance work: cProfile
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return await _run_service(name, args, build, api, edge)
        finally:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"{name}.prof"))
    return await _run_service(name, args, build, api, edge)


#: seconds a stopping service's tasks are given to end by themselves before they are cancelled
STOP_GRACE = 5.0
#: seconds after a stop began when the process exits whatever is still running (below the 10 s
#: after which `tessera down` and `up` send SIGKILL)
STOP_LIMIT = 8.0


async def _run_service(
    name: str,
    args: argparse.Namespace,
    build: Callable[[EventLog], App],
    api: Callable[[App], Mapping[str, Callable[[bytes], Awaitable[bytes]]]] | None = None,
    edge: EdgeFactory | None = None,
) -> int:
    """`_serve` under a stop that holds from the first line: SIGTERM/SIGINT and the lifeline
    (`--exit-with-pid`) are watched from before the connection to NATS, which retries for ever
    — a service whose broker was gone before it connected waited for it for ever — and a stop
    is bounded: what has not ended `STOP_GRACE` s after it is cancelled, and the process exits
    at `STOP_LIMIT` s whatever still runs. A task that did not end when asked (nats-py swallows
    a cancellation in places, and a reader retrying a dead broker then loops for ever) kept the
    scheduler running through SIGTERM until SIGKILL."""
    configure_logging(name, args.log_level)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    install_stop_signals(stopping)
    watching = [asyncio.create_task(lifeline.watch(args.exit_with_pid, stopping))] if args.exit_with_pid else []
    running = asyncio.Event()  # set once `_serve` runs its tasks, which end by `stopping` themselves
    serving = asyncio.create_task(_serve(name, args, build, api, edge, stopping, running))
    stop = asyncio.create_task(stopping.wait())
    limit: list[asyncio.TimerHandle] = []
    code = 1  # what the process ends with: what `_serve` returned, unless it failed
    try:
        await asyncio.wait({serving, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not serving.done():
            limit.append(loop.call_later(STOP_LIMIT, _exit_now, name, _stop_code(args) or 1))
            if running.is_set():  # its tasks end by themselves: let them, for a while
                await asyncio.wait({serving}, timeout=STOP_GRACE)
            if not serving.done():
                if running.is_set():
                    log.warning("%s: not stopped within %g s: cancelling what still runs", name, STOP_GRACE)
                await cancel_all([serving])
                if not running.is_set():
                    log.info("%s stopped before it was ready%s", name,
                             ": its nats-server is gone" if _stop_code(args) else "")  # fmt: skip
                    code = _stop_code(args)
                    return code
        code = serving.result()
        return code
    finally:
        stopping.set()
        await cancel_all([stop, *watching])
        # the loop's own shutdown follows (it cancels what is left, and waits for it): bounded
        # too, by the limit of a stop that began (else STOP_LIMIT from now), but ending with the
        # code returned — the limit armed as the stop began said 1, and a service that stopped
        # cleanly within the grace exited 1 when that shutdown outlasted it
        when = limit[0].when() if limit else loop.time() + STOP_LIMIT
        for handle in limit:
            handle.cancel()
        loop.call_at(when, _exit_now, name, code)


def _stop_code(args: argparse.Namespace) -> int:
    """3 when the service ends because its nats-server is gone, else 0."""
    return 3 if args.exit_with_pid and not lifeline.alive(args.exit_with_pid) else 0


def _exit_now(name: str, code: int) -> None:
    log.error("%s: still running %g s after its stop began: exiting", name, STOP_LIMIT)
    logging.shutdown()
    os._exit(code)


def _say_ready(name: str) -> None:
    """The line supervisors and tests wait for. Whoever read it may be gone (a terminal closed
    on `tessera demo`): a closed pipe is not the service's failure — it raised out of the
    consume loop and left the process hanging — so it runs on, its output dropped."""
    try:
        print(f"{name} ready", flush=True)
    except OSError as exc:
        log.warning("%s: standard output is gone (%s): whoever started it has ended", name, exc)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


async def _serve(
    name: str,
    args: argparse.Namespace,
    build: Callable[[EventLog], App],
    api: Callable[[App], Mapping[str, Callable[[bytes], Awaitable[bytes]]]] | None,
    edge: EdgeFactory | None,
    stopping: asyncio.Event,
    running: asyncio.Event,
) -> int:
    collector.tune()
    try:  # (the variables are read here, not as the option's default: a bad one is one line)
        exporter = args.trace_exporter or default_exporter()
    except UnknownTraceExporter as exc:
        log.error("%s", exc)
        return 2
    if exporter != "none":
        trace.set_tracer_provider(make_provider(name, exporter))
    # else OpenTelemetry's no-op tracer: a span per message handled, with its ids, attributes
    # and context switches, cost 6-11 % of a busy service's CPU to export nowhere (issue 29's
    # profile); the trace context still travels (a non-recording span carries its parent's)
    event_log = await JetStreamLog.connect(
        args.nats, credentials=args.nats_creds, ca=args.nats_ca, subjects=Subjects(args.root),
        stream=args.stream, ack_wait=args.ack_wait, duplicate_window=args.duplicate_window,
        replicas=args.stream_replicas, writer=name if name in APPENDS else "",
    )
    args.kube = await connect_kube(args, name)
    app = build(event_log)
    app.service.durable = args.durable
    retain = getattr(app, "retain", None)  # before recovery: the fold depends on the retention
    if retain is not None:
        store = ObjectStoreSnapshots(event_log) if args.snapshot_every > 0 else None
        retain(Retention(store, args.snapshot_every, args.keep_finished))
    health = Health(stall=args.health_stall)
    health.checks["nats connected"] = lambda: event_log.nc.is_connected
    liveness.watch(app.service, lambda: event_log.nc.is_connected)  # stuck or idle, at scrape time
    if args.kube is not None:  # one line per outage, /readyz, tessera_kube_api_reachable
        liveness.watch_reach(app.service, args.kube.reach, health, args.kube_unready_after)
    beat = asyncio.create_task(health.beat(stopping))  # from the start: recovery is alive too
    if args.metrics_port:  # before recovery: a long replay is live but not ready
        assert app.service.metrics is not None
        try:
            app.service.metrics.serve(args.metrics_port, args.metrics_addr, health)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            log.error("%s: --metrics-port %d is taken (%s)", name, args.metrics_port, exc)
            beat.cancel()
            if args.kube is not None:
                await args.kube.close()
            await event_log.close()
            return PORT_TAKEN
    await app.recover()
    collector.freeze()
    snapshots = getattr(app, "snapshots", None)
    if isinstance(snapshots, Snapshots) and snapshots.ride(app.service.filter_subjects, app.service.in_order()):
        app.service.observers.append(snapshots.see)
    at_edge = edge(app, event_log, args.kube) if edge is not None and args.kube is not None else None
    if at_edge is not None:
        await at_edge.recover()
        carry_edges(app, at_edge)
    if api is not None:
        await serve_api(event_log.nc, name, event_log.subjects.api(name), api(app))

    def ready() -> None:
        health.ready = True
        log.info("%s running on %s", name, args.nats)
        _say_ready(name)

    background = getattr(app, "background", None)  # e.g. the scheduler's session loop
    tasks = [app.service.run(stopping, on_ready=ready), beat]
    if background is not None:
        tasks.append(background(stopping))
    if isinstance(snapshots, Snapshots):
        tasks.append(snapshots.keep(stopping))
    if at_edge is not None:
        tasks.append(at_edge.run(stopping))
    running.set()
    started = [asyncio.ensure_future(t) for t in tasks]
    try:
        await asyncio.gather(*started)
    finally:  # one failed (or we are cancelled): the others stop too, not left to run on
        stopping.set()
        if pending := [t for t in started if not t.done()]:
            try:
                task = asyncio.current_task()
                if task is not None and not task.cancelling():  # not already past the grace
                    await asyncio.wait(pending, timeout=STOP_GRACE)
            finally:
                await cancel_all(pending)
    if args.kube is not None:
        await args.kube.close()
    if _stop_code(args):
        log.info("%s stopped: its nats-server is gone", name)
        return 3  # nothing to flush to: closing would wait for a broker that is not coming back
    await event_log.close()
    log.info("%s stopped", name)
    return 0
