"""`tessera compact [--keep-finished N]`: bound the log by what is live, once
(`services.runtime.compaction`; the queue service does it every `--compact-every` s)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from contracts.permissions import ADMIN
from services.cli.connection import open_log
from services.cli.control import connection_args, nats_url
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.runtime.compaction import Compaction, CompactionBusy, compact

__all__ = ["Compaction", "add_parsers", "compact"]


async def _run(args: argparse.Namespace) -> int:
    """Over the CLI's bounded connection, as the admin user unless `--nats-creds` names
    another: a user the server would refuse the purge is told so at once (the service's
    connection retried its stream checks for 30 s, then printed a timeout's traceback)."""
    url = nats_url(args, ADMIN)
    log = await open_log(url, args.root, create=False)
    try:
        user = log.nc.options.get("user") or ""
        purge = f"$JS.API.STREAM.PURGE.{log.stream}"
        if log.rights is not None and not log.rights.may_publish(purge):
            print(f"error: NATS user {user!r} may not purge the log ({purge}): `tessera compact` "
                  f"is the {ADMIN!r} user's — its credentials are where `tessera up` keeps them "
                  "(found by --state-dir), or give them with --nats-creds", file=sys.stderr)  # fmt: skip
            return 2
        try:
            done = await compact(log, args.keep_finished)
        except CompactionBusy as exc:  # compactions are exclusive: try again once it ended
            print(f"error: {exc}", file=sys.stderr)
            return 1
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
