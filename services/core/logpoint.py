"""The log's clocks, read one way by `tessera replay --until` and `tessera explain --at`.

A log carries one of two clocks: a simulated one (`Tessera-Time`, seconds, on every event
`tessera simulate` writes) or the store's (`Nats-Time-Stamp`, JetStream's RFC 3339 time of each
append, on every event a live control plane's log holds). Both commands must cut the same log at
the same point for the same words, so they share this module.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import TypeVar

from services.core.stamps import RFC3339_SECONDS
from services.runtime.eventlog.model import StoredMessage

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


class PointError(ValueError):
    """A point (`--until`, `--at`) this log cannot answer; the message says why and what to give."""


#: what a point may be, said in every refusal of one
FORMS = "a log sequence (#40 or 40), seconds on a simulated log's clock (12.5s) or an ISO 8601 time"
_SEQ = re.compile(r"#?(\d+)")
_SECONDS = re.compile(r"-?(?:\d+\.?\d*|\.\d+)s")
_T = TypeVar("_T", float, datetime)


def virtual_time(msg: StoredMessage) -> float | None:
    try:
        return float(msg.headers[VIRTUAL_TIME])
    except (KeyError, ValueError):
        return None


def _stored_time(msg: StoredMessage) -> datetime | None:
    return store_time(msg.headers.get(STORE_TIME, ""))


def cut(messages: Sequence[StoredMessage], point: str, flag: str = "--at") -> list[StoredMessage]:
    """The log up to `point`: a sequence, or the last event at or before a time on the clock the
    log carries (`12.5s` the simulated one, an ISO time the store's). A time on a clock the log
    does not carry, or before its first event, is refused: answering with the whole log, or with
    a state nobody asked for, reads as an answer when it is none (`flag` names the option)."""
    text = point.strip()
    if not messages:
        return []
    if m := _SEQ.fullmatch(text):
        seq = int(m[1])
        if seq < messages[0].seq:
            raise PointError(f"{flag} {point}: #{seq} is before the log's first event (#{messages[0].seq})")
        return [msg for msg in messages if msg.seq <= seq]
    if _SECONDS.fullmatch(text):
        limit = float(text[:-1])
        if not any(virtual_time(msg) is not None for msg in messages):
            raise PointError(f"{flag} {point}: this log has no simulated clock (written by a live control "
                             "plane): give a sequence (#N or N) or an ISO time")  # fmt: skip
        return _prefix(messages, virtual_time, limit, point, flag, lambda t: f"t={t:g}s")
    when = user_time(text)
    if when is None:
        raise PointError(f"{flag} {point!r}: not a point of the log: give {FORMS}")
    if not any(_stored_time(msg) is not None for msg in messages):
        raise PointError(f"{flag} {point}: this log has no store times (written by `tessera simulate`): "
                         "give a sequence (#N or N) or seconds on its clock (90s)")  # fmt: skip
    return _prefix(messages, _stored_time, when, point, flag, lambda t: t.strftime(RFC3339_SECONDS))


def _prefix(
    messages: Sequence[StoredMessage],
    time_of: Callable[[StoredMessage], _T | None],
    limit: _T,
    point: str,
    flag: str,
    show: Callable[[_T], str],
) -> list[StoredMessage]:
    """The messages before the first whose time is past `limit` (a message without a time keeps
    the one before it): a prefix of the log, as a state at a time must be."""
    out: list[StoredMessage] = []
    for msg in messages:
        at = time_of(msg)
        if at is not None and at > limit:
            break
        out.append(msg)
    if not out:
        first = next((t for t in map(time_of, messages) if t is not None), limit)
        raise PointError(f"{flag} {point}: before the log's first event (#{messages[0].seq}, {show(first)}): "
                         "nothing had happened yet")  # fmt: skip
    return out


def past_the_end(messages: Sequence[StoredMessage], point: str) -> str:
    """A note when a sequence lies beyond the log's last event (the state printed is the last
    one, which a reader took for the one asked), else ""."""
    m = _SEQ.fullmatch(point.strip())
    if m and messages and int(m[1]) > messages[-1].seq:
        return f"note: the log ends at #{messages[-1].seq}"
    return ""
