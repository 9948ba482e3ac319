"""Wiring in one place (STYLE §14): config → connection → log → app → consume loop + API.

Every service process is `python -m services.<name>`; this module turns common flags and
environment into a running service, so a service module only says how to build its app.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

from opentelemetry import trace

from contracts.subjects import Subjects
from services.core.devices import Catalogue, load_catalogue
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import EventLog
from services.runtime.service import EventService, install_stop_signals, serve_api
from services.runtime.telemetry import configure_logging, make_provider

log = logging.getLogger(__name__)


class App(Protocol):
    service: EventService

    async def recover(self) -> None: ...


def device_catalogue(path: str) -> Catalogue | None:
    """A HAMi device-config.yaml (`--device-config`), or None for the built-in catalogue."""
    if not path:
        return None
    return load_catalogue(Path(path).read_text())


def common_parser(name: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m services.{name}")
    env = os.environ.get
    parser.add_argument("--nats", default=env("TESSERA_NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--root", default=env("TESSERA_SUBJECT_ROOT", "tessera"))
    parser.add_argument("--stream", default=env("TESSERA_STREAM", "TESSERA"))
    parser.add_argument("--metrics-port", type=int, default=int(env("TESSERA_METRICS_PORT", "0")))
    parser.add_argument("--trace-exporter", default=env("TESSERA_TRACE_EXPORTER", "none"))
    parser.add_argument("--log-level", default=env("TESSERA_LOG_LEVEL", "INFO"))
    parser.add_argument("--durable", default=env("TESSERA_DURABLE", name))
    parser.add_argument("--ack-wait", type=float, default=float(env("TESSERA_ACK_WAIT", "30")))
    parser.add_argument("--duplicate-window", type=float,
                        default=float(env("TESSERA_DUPLICATE_WINDOW", "120")),
                        help="the stream's Nats-Msg-Id window, s (tests shorten it to show that "
                             "nothing relies on it)")  # fmt: skip
    parser.add_argument("--device-config", default=env("TESSERA_DEVICE_CONFIG", ""),
                        help="HAMi device-config.yaml (default: HAMi's chart values)")  # fmt: skip
    return parser


async def run_service(
    name: str,
    args: argparse.Namespace,
    build: Callable[[EventLog], App],
    api: Callable[[App], Mapping[str, Callable[[bytes], Awaitable[bytes]]]] | None = None,
) -> int:
    profile_dir = os.environ.get("TESSERA_PROFILE_DIR", "")  # performance work: cProfile
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return await _run_service(name, args, build, api)
        finally:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"{name}.prof"))
    return await _run_service(name, args, build, api)


async def _run_service(
    name: str,
    args: argparse.Namespace,
    build: Callable[[EventLog], App],
    api: Callable[[App], Mapping[str, Callable[[bytes], Awaitable[bytes]]]] | None = None,
) -> int:
    configure_logging(name, args.log_level)
    trace.set_tracer_provider(make_provider(name, args.trace_exporter))
    event_log = await JetStreamLog.connect(
        args.nats, subjects=Subjects(args.root), stream=args.stream, ack_wait=args.ack_wait,
        duplicate_window=args.duplicate_window,
    )
    app = build(event_log)
    app.service.durable = args.durable
    if args.metrics_port:
        assert app.service.metrics is not None
        app.service.metrics.serve(args.metrics_port)
    await app.recover()
    if api is not None:
        await serve_api(event_log.nc, name, event_log.subjects.api(name), api(app))
    stopping = asyncio.Event()
    install_stop_signals(stopping)

    def ready() -> None:
        log.info("%s running on %s", name, args.nats)
        print(f"{name} ready", flush=True)  # the line supervisors and tests wait for

    background = getattr(app, "background", None)  # e.g. the scheduler's session loop
    tasks = [app.service.run(stopping, on_ready=ready)]
    if background is not None:
        tasks.append(background(stopping))
    await asyncio.gather(*tasks)
    await event_log.close()
    log.info("%s stopped", name)
    return 0
