"""`python -m services.allocator`: the allocator process."""

from __future__ import annotations

import asyncio
import sys

from services.allocator.service import Allocator
from services.runtime.bootstrap import App, common_parser, run_service


def main(argv: list[str] | None = None) -> int:
    args = common_parser("allocator").parse_args(argv)

    def api(app: App) -> dict:
        assert isinstance(app, Allocator)
        return {"cards": app.api_cards}

    return asyncio.run(run_service("allocator", args, Allocator, api))


if __name__ == "__main__":
    sys.exit(main())
