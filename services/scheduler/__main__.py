"""`python -m services.scheduler`: the scheduler process."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys

from services.core.devices import build_vendors
from services.core.scheduling.config import default_conf, parse_conf
from services.runtime.bootstrap import common_parser, config_file, device_catalogue, run_service
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import EventLog
from services.runtime.lease import Lease
from services.scheduler.service import Scheduler


def lease_of(log: EventLog, args: argparse.Namespace) -> Lease | None:
    """One leader among the scheduler replicas of this stream (`services.runtime.lease`)."""
    if not isinstance(log, JetStreamLog):
        return None
    return Lease(log.js, f"{log.stream}_leases", "scheduler", ttl=args.lease_ttl,
                 replicas=args.stream_replicas)


def main(argv: list[str] | None = None) -> int:
    parser = common_parser("scheduler")
    parser.add_argument("--scheduler-conf", default="", help="volcano-scheduler.conf YAML")
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--lease-ttl", type=float, default=float(os.environ.get("TESSERA_LEASE_TTL", "2")),
                        help="seconds a killed leader's lease outlives it (replicas take over after)")  # fmt: skip
    args = parser.parse_args(argv)
    conf = config_file("--scheduler-conf", args.scheduler_conf, parse_conf) if args.scheduler_conf else None
    catalogue = device_catalogue(args.device_config)
    if catalogue is not None:  # the scheduler fits on the same catalogue admission parses with
        conf = dataclasses.replace(conf or default_conf(), vendors=build_vendors(catalogue))
    return asyncio.run(
        run_service("scheduler", args, lambda log: Scheduler(log, conf, args.period, lease=lease_of(log, args)))
    )


if __name__ == "__main__":
    sys.exit(main())
