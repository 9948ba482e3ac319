"""`tessera ensure-streams [--stream-replicas N]`: the streams as this version configures them,
made or brought up to date by the operator's user.

A service may create a missing stream but never update one (issue 23: an update can set
`max_msgs`/`max_age`, an effective purge of the log), so a configuration an older version made,
or R1 where the operator now runs a 3-server cluster, is changed here, as `admin`: by `up`
before it starts the services, and by the chart's post-install/post-upgrade hook Job."""

from __future__ import annotations

import argparse
import asyncio
import sys

import nats.errors

from contracts.permissions import ADMIN
from contracts.subjects import Subjects
from services.cli.control import connection_args, nats_url
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import LogError
from services.runtime.waits import within


async def ensure_streams(url: str, replicas: int, root: str = "tessera") -> None:
    log = await JetStreamLog.connect(url, subjects=Subjects(root), replicas=replicas)
    await log.close()


async def _bounded(args: argparse.Namespace) -> str:
    """"" once the streams are ensured, else why not. The services' connection waits for a
    server forever (they outlive a broker restart); a command waits `--wait` seconds — the
    chart's hook Job retries it while NATS comes up, a person with a wrong URL is told."""
    url = nats_url(args, ADMIN)
    try:
        await within(ensure_streams(url, args.stream_replicas, args.root), args.wait)
    except TimeoutError:
        return f"NATS at {url} did not answer within {args.wait:g} s (is it running? --wait to wait longer)"
    except (LogError, nats.errors.Error) as exc:
        return f"streams not ensured at {url}: {exc}"
    return ""


def cmd_ensure_streams(args: argparse.Namespace) -> int:
    if why := asyncio.run(_bounded(args)):
        print(f"error: {why}", file=sys.stderr)
        return 2
    print(f"streams ensured ({args.stream_replicas} replica(s))")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ensure-streams", help="create or update the log's streams (as admin)")
    connection_args(p)
    p.add_argument("--stream-replicas", type=int, default=1, help="replicas of the streams (3: R3)")
    p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for NATS to answer (default: 60)")
    p.set_defaults(func=cmd_ensure_streams)
