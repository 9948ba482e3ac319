"""`python -m services.admission`: the admission process (request/reply `apply`)."""

from __future__ import annotations

import asyncio
import sys

from services.admission.service import AdmissionService
from services.core.devices import build_vendors
from services.runtime.bootstrap import (
    App,
    common_parser,
    device_catalogue,
    run_service,
    scheduler_names,
)


def main(argv: list[str] | None = None) -> int:
    args = common_parser("admission").parse_args(argv)

    def api(app: App) -> dict:
        assert isinstance(app, AdmissionService)
        return {"apply": app.api_apply}

    catalogue = device_catalogue(args.device_config)
    vendors = build_vendors(catalogue) if catalogue else None
    def edge(app: App, _log: object, kube: object) -> object:
        from services.kube.podsource import PodSource

        assert isinstance(app, AdmissionService)
        return PodSource(app, kube, scheduler_names=scheduler_names(args))  # type: ignore[arg-type]

    return asyncio.run(run_service(
        "admission", args, lambda log: AdmissionService(log, vendors), api, edge))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
