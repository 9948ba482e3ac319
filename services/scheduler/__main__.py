"""`python -m services.scheduler`: the scheduler process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from services.core.scheduling.config import parse_conf
from services.runtime.bootstrap import common_parser, run_service
from services.scheduler.service import Scheduler


def main(argv: list[str] | None = None) -> int:
    parser = common_parser("scheduler")
    parser.add_argument("--scheduler-conf", default="", help="volcano-scheduler.conf YAML")
    parser.add_argument("--period", type=float, default=1.0)
    args = parser.parse_args(argv)
    conf = parse_conf(Path(args.scheduler_conf).read_text()) if args.scheduler_conf else None
    return asyncio.run(
        run_service("scheduler", args, lambda log: Scheduler(log, conf, args.period))
    )


if __name__ == "__main__":
    sys.exit(main())
