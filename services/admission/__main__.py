"""`python -m services.admission`: the admission process (request/reply `apply`)."""

from __future__ import annotations

import argparse
import sys

from services.admission.service import AdmissionService
from services.core.devices import build_vendors
from services.core.workload.limits import NATS_DEFAULT_MAX_PAYLOAD
from services.runtime import eventloop
from services.runtime.bootstrap import (
    App,
    Edges,
    common_parser,
    device_catalogue,
    run_service,
    scheduler_names,
)
from services.runtime.eventlog import EventLog


def parser() -> argparse.ArgumentParser:
    out = common_parser("admission")
    out.add_argument("--plugins-off", default="", metavar="NAMES",
                     help="Volcano job plugins not run here (comma-separated: `ssh`, when the queue "
                          "service may not make Secrets): Jobs naming them, or mpi for ssh, are refused")  # fmt: skip
    return out


def plugins_off(args: argparse.Namespace) -> frozenset[str]:
    return frozenset(n.strip() for n in args.plugins_off.split(",") if n.strip())


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    off = plugins_off(args)

    def api(app: App) -> dict:
        assert isinstance(app, AdmissionService)
        return {"apply": app.api_apply}

    catalogue = device_catalogue(args.device_config)
    vendors = build_vendors(catalogue) if catalogue else None

    def build(log: EventLog) -> AdmissionService:
        # the connection's max_payload bounds every event admission appends and every reply
        nc = getattr(log, "nc", None)
        return AdmissionService(log, vendors, max_payload=getattr(nc, "max_payload", None)
                                or NATS_DEFAULT_MAX_PAYLOAD, plugins_off=off,
                                scheduler_names=scheduler_names(args))  # fmt: skip

    def edge(app: App, event_log: EventLog, kube: object) -> object:
        from services.kube.budgetsource import BudgetSource
        from services.kube.podsource import PodSource
        from services.kube.quotasource import QuotaSource

        assert isinstance(app, AdmissionService)
        return Edges(PodSource(app, kube, scheduler_names=scheduler_names(args)),  # type: ignore[arg-type]
                     QuotaSource(event_log, kube), BudgetSource(event_log, kube))  # type: ignore[arg-type]  # fmt: skip

    return eventloop.run(run_service("admission", args, build, api, edge))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
