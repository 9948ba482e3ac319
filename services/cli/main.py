"""`tessera`: run Tessera's services (`up`, `down`, `demo`), submit and inspect work (`apply`, `get`,
`describe`, `explain`, `events`) and check the scheduler offline (`simulate`, `replay`)."""

from __future__ import annotations

import argparse
import os
import sys

#: A reader that went away (`tessera get pods | head`): what a shell reports for SIGPIPE.
BROKEN_PIPE_EXIT = 141


def _cmd_nats(args: argparse.Namespace) -> int:
    from services.runtime.natsserver import main as nats_main

    return nats_main([args.data_dir, str(args.port)])


def _cmd_version(args: argparse.Namespace) -> int:
    from services.cli.version import versions

    for name, version in versions():
        print(f"{name}: {version}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    nats = sub.add_parser("nats", help="run the embedded nats-server with JetStream")
    from services.cli.statedir import for_up

    nats.add_argument("--data-dir", default=str(for_up() / "nats"), help="JetStream store directory")
    nats.add_argument("--port", type=int, default=4222, help="client port (default: 4222)")
    nats.set_defaults(func=_cmd_nats)
    version = sub.add_parser("version", help="print the versions of tessera and its nats-server")
    version.set_defaults(func=_cmd_version)
    from services.cli import (
        compact,
        control,
        demo,
        describe,
        events,
        explain,
        get,
        replay,
        simulate,
        streams,
        up,
    )

    demo.add_parsers(sub)
    up.add_parsers(sub)
    get.add_parsers(sub)
    describe.add_parser(sub)
    control.add_parsers(sub)
    events.add_parser(sub)
    explain.add_parser(sub)
    simulate.add_parser(sub)
    replay.add_parser(sub)
    compact.add_parsers(sub)
    streams.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, run; an unreachable system is one line on stderr (exit 2), not a traceback."""
    from services.cli.connection import Unreachable

    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        # a bad TESSERA_TRACE_EXPORTER / OTEL_TRACES_EXPORTER, met where the command first
        # traces (its first request): the name, the variable and what is accepted, no traceback
        from services.runtime.telemetry import UnknownTraceExporter  # (loaded only now)

        if not isinstance(exc, UnknownTraceExporter):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Python's documented recipe: point stdout at /dev/null so the final flush is silent.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
