"""`python -m services.queue`: the queue service process (hosts the node-liveness monitor)."""

from __future__ import annotations

import os
import sys

from services.nodeagent.monitor import NodeMonitor
from services.queue.service import QueueService
from services.runtime import eventloop
from services.runtime.bootstrap import App, Edges, common_parser, run_service, scheduler_names
from services.runtime.eventlog import EventLog


def main(argv: list[str] | None = None) -> int:
    parser = common_parser("queue")
    parser.add_argument("--node-timeout", type=float, default=40.0,
                        help="seconds without a heartbeat before a node is declared lost (kube-controller-manager's node-monitor-grace-period: an agent restart must not fail its pods)")  # fmt: skip
    parser.add_argument("--no-monitor", action="store_true", help="do not watch node heartbeats")
    parser.add_argument("--compact-every", type=float,
                        default=float(os.environ.get("TESSERA_COMPACT_EVERY", "300")),
                        help="every this many seconds, purge the subjects of finished jobs beyond "
                             "--keep-finished and every card's history but its last event "
                             "(`tessera compact`; 0: off)")  # fmt: skip
    args = parser.parse_args(argv)

    def build(event_log: EventLog) -> QueueService:
        watch = not args.no_monitor and not (args.kubeconfig or args.in_cluster)  # a cluster says
        monitor = NodeMonitor(event_log, timeout=args.node_timeout) if watch else None  # Ready
        svc = QueueService(event_log, monitor, getattr(event_log, "nc", None))
        svc.compact_every = args.compact_every
        return svc

    def api(app: App) -> dict:
        assert isinstance(app, QueueService)
        return {"command": app.api_command}

    def edge(app: App, event_log: EventLog, kube: object) -> object:
        from services.kube.jobcontroller import JobController
        from services.kube.jobflows import JobFlowController
        from services.kube.status import PodStatusWriter

        assert isinstance(app, QueueService)
        return Edges(PodStatusWriter(event_log, kube, scheduler_names=scheduler_names(args)),  # type: ignore[arg-type]
                     JobController(event_log, kube, app.command, scheduler_names=scheduler_names(args)),  # type: ignore[arg-type]
                     JobFlowController(kube, scheduler_names=scheduler_names(args)))  # type: ignore[arg-type]

    return eventloop.run(run_service("queue", args, build, api, edge))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
