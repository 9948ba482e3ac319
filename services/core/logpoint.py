"""The log's clocks, read one way by `tessera replay --until` and `tessera explain --at`.

A log carries one of two clocks: a simulated one (`Tessera-Time`, seconds, on every event
`tessera simulate` writes) or the store's (`Nats-Time-Stamp`, JetStream's RFC 3339 time of each
append, on every event a live control plane's log holds). Both commands must cut the same log at
the same point for the same words, so they share this module.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

VIRTUAL_TIME = "Tessera-Time"
STORE_TIME = "Nats-Time-Stamp"

#: RFC 3339 as JetStream writes it (`2026-12-07T15:07:05.915720638Z`, nanoseconds), and Go's
#: `time.Time.String()` form some clients pass on (`2026-12-07 15:07:05.915720638 +0000 UTC`)
_STAMP = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?"
    r" ?(?P<zone>Z|[+-]\d{2}:?\d{2})?(?: UTC)?",
    re.IGNORECASE,
)


def store_time(stamp: str) -> datetime | None:
    """A stamp as an aware UTC datetime, None when it is not one. Python keeps microseconds, so
    the fraction is cut to 6 digits apart from the zone: joining every digit after the dot took
    a `+00:00` zone's digits into the fraction and left the result naive, which cannot be
    compared with an aware time."""
    m = _STAMP.fullmatch(stamp.strip())
    if m is None:
        return None
    fraction = (m["fraction"] or "")[:6].ljust(6, "0")
    try:
        when = datetime.fromisoformat(f"{m['date']}T{m['time']}.{fraction}")
    except ValueError:  # (a 13th month, a 61st second)
        return None
    return when.replace(tzinfo=_zone(m["zone"])).astimezone(UTC)


def _zone(text: str | None) -> timezone:
    """No zone is UTC: the store writes UTC, and a time given without a zone means the store's."""
    if text is None or text.upper() == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def user_time(text: str) -> datetime | None:
    """A time a person typed, as an aware UTC datetime: a store stamp's forms, or anything else
    ISO 8601 allows (`2026-12-07`, `2026-12-07T15:07`); without a zone it is UTC."""
    when = store_time(text)
    if when is not None:
        return when
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
