"""`tessera ensure-streams [--stream-replicas N]`: the streams as this version configures them,
made or brought up to date by the operator's user.

A service may create a missing stream but never update one (issue 23: an update can set
`max_msgs`/`max_age`, an effective purge of the log), so a configuration an older version made,
or R1 where the operator now runs a 3-server cluster, is changed here, as `admin`: by `up`
before it starts the services, and by the chart's post-install/post-upgrade hook Job."""

from __future__ import annotations

import argparse
import asyncio

from contracts.permissions import ADMIN
from contracts.subjects import Subjects
from services.cli.control import connection_args, nats_url
from services.runtime.eventlog.jetstream import JetStreamLog


async def ensure_streams(url: str, replicas: int, root: str = "tessera") -> None:
    log = await JetStreamLog.connect(url, subjects=Subjects(root), replicas=replicas)
    await log.close()


def cmd_ensure_streams(args: argparse.Namespace) -> int:
    asyncio.run(ensure_streams(nats_url(args, ADMIN), args.stream_replicas, args.root))
    print(f"streams ensured ({args.stream_replicas} replica(s))")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ensure-streams", help="create or update the log's streams (as admin)")
    connection_args(p)
    p.add_argument("--stream-replicas", type=int, default=1, help="replicas of the streams (3: R3)")
    p.set_defaults(func=cmd_ensure_streams)
