"""`python -m services.queue`: the queue service process (hosts the node-liveness monitor)."""

from __future__ import annotations

import asyncio
import sys

from services.nodeagent.monitor import NodeMonitor
from services.queue.service import QueueService
from services.runtime.bootstrap import App, common_parser, run_service
from services.runtime.eventlog import EventLog


def main(argv: list[str] | None = None) -> int:
    parser = common_parser("queue")
    parser.add_argument("--node-timeout", type=float, default=10.0,
                        help="seconds without a heartbeat before a node is declared lost")  # fmt: skip
    parser.add_argument("--no-monitor", action="store_true", help="do not watch node heartbeats")
    args = parser.parse_args(argv)

    def build(event_log: EventLog) -> QueueService:
        monitor = None if args.no_monitor else NodeMonitor(event_log, timeout=args.node_timeout)
        return QueueService(event_log, monitor, getattr(event_log, "nc", None))

    def api(app: App) -> dict:
        assert isinstance(app, QueueService)
        return {"command": app.api_command}

    return asyncio.run(run_service("queue", args, build, api))


if __name__ == "__main__":
    sys.exit(main())
