"""`tessera compact [--keep-finished N]`: bound the log by what is live, once
(`services.runtime.compaction`; the queue service does it every `--compact-every` s)."""

from __future__ import annotations

import argparse
import asyncio

from contracts.permissions import ADMIN
from contracts.subjects import Subjects
from services.cli.control import connection_args, nats_url
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.runtime.compaction import Compaction, compact
from services.runtime.eventlog.jetstream import JetStreamLog

__all__ = ["Compaction", "add_parsers", "compact"]


async def _run(args: argparse.Namespace) -> int:
    log = await JetStreamLog.connect(nats_url(args, ADMIN), subjects=Subjects(args.root))
    try:
        done = await compact(log, args.keep_finished)
    finally:
        await log.close()
    print(f"forgot {done.jobs} finished jobs, kept the last event of {done.cards} cards: "
          f"{done.before} → {done.after} messages")  # fmt: skip
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compact", help="forget finished jobs and card history (bounded restarts)")
    connection_args(p)
    p.add_argument("--keep-finished", type=int, default=DEFAULT_KEEP_FINISHED,
                   help="finished jobs to keep (the most recent), for events/get")  # fmt: skip
    p.set_defaults(func=cmd_compact)
