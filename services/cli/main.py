"""`tessera` command line: one entry point, subcommands grow as the services land."""

from __future__ import annotations

import argparse
import sys


def _cmd_nats(args: argparse.Namespace) -> int:
    from services.runtime.natsserver import main as nats_main

    return nats_main([args.data_dir, str(args.port)])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    nats = sub.add_parser("nats", help="run the embedded nats-server with JetStream")
    nats.add_argument("--data-dir", default=".tessera/nats")
    nats.add_argument("--port", type=int, default=4222)
    nats.set_defaults(func=_cmd_nats)
    from services.cli import control, demo, events, get, simulate, up

    demo.add_parsers(sub)
    up.add_parsers(sub)
    get.add_parsers(sub)
    control.add_parsers(sub)
    events.add_parser(sub)
    simulate.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
