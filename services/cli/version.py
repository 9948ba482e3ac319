"""`tessera version`: what is installed, for bug reports (tessera, Python, nats-server)."""

from __future__ import annotations

import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version


def _package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _nats_server() -> str:
    """The binary `tessera up` would start, as it reports itself."""
    from services.runtime.natsserver import NatsServerError, find_binary

    try:
        out = subprocess.run([find_binary(), "--version"], capture_output=True, text=True, timeout=10)
    except (NatsServerError, OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    return (out.stdout.strip() or out.stderr.strip()).removeprefix("nats-server: ")


def versions() -> list[tuple[str, str]]:
    return [
        ("tessera", _package("tessera")),
        ("python", platform.python_version()),
        ("nats-py", _package("nats-py")),
        ("nats-server", _nats_server()),
    ]
