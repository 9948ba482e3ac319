"""`tessera` command line: one entry point, subcommands grow as the services land."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path


def _cmd_nats(args: argparse.Namespace) -> int:
    from services.runtime.natsserver import main as nats_main

    return nats_main([args.data_dir, str(args.port)])


async def _demo_placeholder(data_dir: Path) -> int:
    from contracts.events import NodeLost
    from contracts.registry import default_registry
    from services.runtime.eventlog import Appended, Entry
    from services.runtime.eventlog.jetstream import JetStreamLog
    from services.runtime.natsserver import NatsServer

    with NatsServer(data_dir=data_dir) as server:
        print(f"[1/3] embedded nats-server (JetStream) up on {server.url} (pid {server.pid})")
        log = await JetStreamLog.connect(server.url)
        reg = default_registry()
        probe = NodeLost(node="demo-probe", reason="log round-trip check")
        result = await log.append(
            Entry(
                log.subjects.node("demo-probe"), reg.encode(probe), reg.envelope(probe).to_headers()
            )
        )
        ok = isinstance(result, Appended)
        print(f"[2/3] stream {log.stream} ready; probe event appended: {result}")
        await log.close()
    print("[3/3] nats-server stopped")
    print(
        "\nThe demo scenario (admission, queue, scheduler, allocator and node-agent placing the\n"
        "article's Ascend workloads) is not built yet: this run only proves the embedded NATS\n"
        "and the event log work on this machine."
    )
    return 0 if ok else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="tessera-demo-") as tmp:
        return asyncio.run(_demo_placeholder(Path(tmp)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    nats = sub.add_parser("nats", help="run the embedded nats-server with JetStream")
    nats.add_argument("--data-dir", default=".tessera/nats")
    nats.add_argument("--port", type=int, default=4222)
    nats.set_defaults(func=_cmd_nats)
    demo = sub.add_parser("demo", help="the all-in-one local demo (what `make run` runs)")
    demo.set_defaults(func=_cmd_demo)
    from services.cli import get, up

    up.add_parsers(sub)
    get.add_parsers(sub)
    __import__("services.cli.simulate", fromlist=["add_parser"]).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
