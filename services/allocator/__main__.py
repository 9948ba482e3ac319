"""`python -m services.allocator`: the allocator process."""

from __future__ import annotations

import sys

from services.allocator.service import Allocator
from services.core.devices import build_vendors
from services.runtime import eventloop
from services.runtime.bootstrap import App, common_parser, device_catalogue, run_service
from services.runtime.eventlog import EventLog


def main(argv: list[str] | None = None) -> int:
    parser = common_parser("allocator")
    parser.add_argument("--hami-node-lock", default="on", choices=("on", "off"),
                        help="bind device pods one at a time per node under HAMi's node lock "
                             "(on: HAMi's device plugins run on the nodes)")  # fmt: skip
    parser.add_argument("--bind-workers", type=int, default=64, help="bindings in flight at once")
    args = parser.parse_args(argv)

    def api(app: App) -> dict:
        assert isinstance(app, Allocator)
        return {"cards": app.api_cards}

    def edge(app: App, event_log: EventLog, kube: object) -> object:
        from services.kube.binder import Binder
        from services.kube.storagesource import StorageSource

        binder = Binder(event_log, kube, node_lock=args.hami_node_lock == "on",  # type: ignore[arg-type]
                        workers=args.bind_workers, storage=StorageSource(event_log, kube))  # type: ignore[arg-type]  # fmt: skip
        assert isinstance(app, Allocator)
        app.on_unfitted = binder.warn_unfitted
        return binder

    catalogue = device_catalogue(args.device_config)
    vendors = build_vendors(catalogue) if catalogue else None
    return eventloop.run(run_service(
        "allocator", args, lambda log: Allocator(log, vendors=vendors), api, edge))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
