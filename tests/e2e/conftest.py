"""The control plane of the end-to-end tests: NATS + every service as its own process on
`examples/inventory.yaml`, stopped by PID when the test ends (pass or fail)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.up import ControlPlane
from tests.processes import ROOT


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path / "state", inventory=str(ROOT / "examples" / "inventory.yaml"))
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()
