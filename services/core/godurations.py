"""Go's `time.ParseDuration` strings ("3m", "1h30m", "600s"), as Volcano's annotations and
plugin arguments give them (sla's waiting time, cdp's cooldown time)."""

from __future__ import annotations

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|h|m|s)")


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string; None when it is not one."""
    text = text.strip()
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)
