"""Kubernetes resource quantities → the integer units the scheduler counts in.

Units (one convention for the whole core): CPU in milli-cores, memory in MiB, every other
resource in milli-units (Volcano multiplies scalar resources by 1000; `pods` is a plain count).
Memory and ephemeral-storage are counted in bytes by kube: in MiB an ask is rounded up (a
request never shrinks) and what holds asks — a node's allocatable, a quota's hard limit — down
(`capacity_units`), so a pod Tessera fits is never one the kubelet or the API server refuses.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from services.core.workload.limits import QUANTITY_MAX

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}  # fmt: skip

MIB = 2**20
_MAX_DIGITS = 19  # decimal exponent of QUANTITY_MAX: anything larger is refused unscaled
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?"
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity (e.g. `"4 GB"`, `"abc"`)."""


def parse_quantity(raw: object) -> Decimal:
    """Parse `"500m"`, `"16Gi"`, `"2"`, `4`, `"1e3"` exactly (Decimal, never float)."""
    if isinstance(raw, bool) or raw is None:
        raise QuantityError(f"{_shown(raw)} is not a quantity")
    if isinstance(raw, int):
        if abs(raw) > QUANTITY_MAX:
            raise QuantityError(f"{_shown(raw)} is not a quantity: must be no more than {QUANTITY_MAX}")
        return Decimal(raw)
    if isinstance(raw, float):
        raw = str(raw)
    m = _QUANTITY.fullmatch(str(raw).strip())
    if m is None:
        raise QuantityError(f"{_shown(raw)} is not a quantity")
    number, exponent, suffix = m.group(1), m.group(2) or "", m.group(3) or ""
    try:
        value = Decimal(number + exponent)
    except InvalidOperation:
        raise QuantityError(f"{_shown(raw)} is not a quantity") from None
    if not value.is_finite() or value.adjusted() > _MAX_DIGITS:
        raise QuantityError(f"{_shown(raw)} is not a quantity: must be no more than {QUANTITY_MAX}")
    value = value * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])
    if abs(value) > QUANTITY_MAX:
        # checked before any integer is built from it: `1e999999999` would be a billion digits
        raise QuantityError(f"{_shown(raw)} is not a quantity: must be no more than {QUANTITY_MAX}")
    return value


def _shown(raw: object) -> str:
    text = repr(raw)
    return text if len(text) <= 64 else text[:64] + "..."


def cpu_milli(raw: object) -> int:
    return math.ceil(parse_quantity(raw) * 1000)


def memory_mib(raw: object) -> int:
    return math.ceil(parse_quantity(raw) / MIB)


def memory_mib_down(raw: object) -> int:
    """Bytes that hold asks in whole MiB: a node of `1000M` (953.67 MiB) holds 953, not 954."""
    return math.floor(parse_quantity(raw) / MIB)


def scalar_milli(raw: object) -> int:
    return math.ceil(parse_quantity(raw) * 1000)


def to_units(name: str, raw: object) -> int:
    """One resource value in the core's unit for that resource name."""
    if name == "cpu":
        return cpu_milli(raw)
    if name in ("memory", "ephemeral-storage"):
        return memory_mib(raw)
    if name == "pods":
        return math.ceil(parse_quantity(raw))
    return scalar_milli(raw)


def capacity_units(name: str, raw: object) -> int:
    """`to_units` for what holds asks (a node's allocatable, a quota's hard limit): byte amounts
    rounded down to whole MiB where asks are rounded up. The core counts memory in MiB, so an
    amount off the MiB grid errs one way: this way a pod may wait where kube-scheduler, counting
    bytes, fits it to the byte (a 1G ask on a node of exactly 1G left); rounded up, a pod was
    bound the kubelet then refused (OutOfmemory: 954Mi on a node of 1000M). Counting bytes
    throughout would end both (the contracts' `memory_mib` fields)."""
    if name in ("memory", "ephemeral-storage"):
        return memory_mib_down(raw)
    return to_units(name, raw)


def from_units(name: str, units: int) -> str:
    """The inverse of `to_units`, exactly: a quantity string that parses back to `units`
    (for writing a stored spec back as a manifest, e.g. `tessera queue update`, `get -o yaml`),
    in the form a person wrote it: whole cards and cores plain (`4`, not `4000m`), memory in
    the largest binary unit that holds it exactly (`256Gi`)."""
    if name in ("memory", "ephemeral-storage"):
        for suffix, size in (("Ti", 1 << 20), ("Gi", 1 << 10)):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
        return f"{units}Mi"
    if name == "pods":
        return str(units)
    # cpu and every scalar (device) resource are held in milli-units
    return str(units // 1000) if units % 1000 == 0 else f"{units}m"
