"""`python -m services.scheduler`: the scheduler process."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from services.core.devices import load_catalogue
from services.core.scheduling.config import parse_conf
from services.core.scheduling.record import configured
from services.runtime import eventloop
from services.runtime.bootstrap import common_parser, config_file, run_service
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
    parser.add_argument("--period", type=float, default=1.0,
                        help="seconds between sessions while jobs wait (none on a log unchanged since "
                        "one that concluded nothing, until a time rule turns)")
    parser.add_argument("--lease-ttl", type=float, default=float(os.environ.get("TESSERA_LEASE_TTL", "2")),
                        help="seconds a killed leader's lease outlives it (replicas take over after)")  # fmt: skip
    parser.add_argument("--await-inventory", action="store_true",
                        help="no session before a node agent's NodesListed is in the log (deployed with one)")
    args = parser.parse_args(argv)
    conf_text = config_file("--scheduler-conf", args.scheduler_conf, _valid(parse_conf)) if args.scheduler_conf else ""
    # the scheduler fits on the same catalogue admission parses with
    device_text = config_file("--device-config", args.device_config, _valid(load_catalogue)) if args.device_config else ""
    config = configured(conf_text, device_text)  # recorded in the log for `replay --verify`
    return eventloop.run(
        run_service("scheduler", args, lambda log: Scheduler(log, config, args.period, lease=lease_of(log, args),
                                                          await_inventory=args.await_inventory))
    )


def _valid(parse: Callable[[str], object]) -> Callable[[str], str]:
    """The text itself once `parse` accepts it (the scheduler records the text)."""

    def check(text: str) -> str:
        parse(text)
        return text

    return check


if __name__ == "__main__":
    sys.exit(main())
