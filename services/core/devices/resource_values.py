"""Reading one device resource from a container, the way HAMi does: limits first, then requests.

Every reader appends a :class:`Violation` instead of raising, so a container's parse can report
all broken rules at once.
"""

from __future__ import annotations

from services.core.devices.quantities import QuantityError, parse_int_quantity
from services.core.devices.vendor import ResourceList
from services.core.devices.violations import Violation

INT32_MAX = 2**31 - 1


def raw_value(limits: ResourceList, requests: ResourceList, name: str) -> str | int | None:
    """The resource's value from limits, else requests, else None (absent)."""
    if name in limits:
        return limits[name]
    if name in requests:
        return requests[name]
    return None


def read_int(
    limits: ResourceList,
    requests: ResourceList,
    name: str,
    violations: list[Violation],
    *,
    minimum: int = 0,
    maximum: int | None = INT32_MAX,
) -> int | None:
    """The integer value of ``name`` or None when absent; a bad value adds a violation."""
    raw = raw_value(limits, requests, name)
    if raw is None:
        return None
    try:
        value = parse_int_quantity(raw)
    except QuantityError as exc:
        violations.append(Violation(name, str(raw), exc.reason))
        return None
    if value < minimum:
        violations.append(Violation(name, str(raw), f"must be >= {minimum}"))
        return None
    if maximum is not None and value > maximum:
        violations.append(Violation(name, str(raw), f"exceeds the maximum {maximum}"))
        return None
    return value


def comma_list(value: str | None) -> tuple[str, ...]:
    """HAMi's comma lists in annotations; an empty value means "no constraint"."""
    if not value:
        return ()
    return tuple(sorted({part.strip() for part in value.split(",") if part.strip()}))
