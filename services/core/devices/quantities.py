"""Kubernetes quantity strings, for the device resources that must be plain integers.

HAMi reads device resources with ``Quantity.Value()``/``AsInt64``: counts, MB and percentages
are integers. ``"2"``, ``2``, ``"1k"`` and ``"2e3"`` are integers; ``"16Gi"`` is a byte quantity
and ``"0.5"``/``"500m"`` are fractions, which HAMi's Ascend parser rejects (§2.4: "byte
quantities such as 16Gi are rejected") and which we reject for every device resource.
"""

from __future__ import annotations

import re
from decimal import Decimal

_DECIMAL_SUFFIX = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(k|M|G|T|P|E|m|u|n)?)$")
_INT64_DIGITS = 18  # 2^63-1 has 19 digits: a larger decimal exponent cannot be an int64
_BINARY = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei)$")


class QuantityError(ValueError):
    """The value is not an integer quantity; ``reason`` is a short human phrase."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def parse_int_quantity(value: str | int) -> int:
    """The integer a device quantity denotes, or :class:`QuantityError`."""
    if isinstance(value, bool):
        raise QuantityError("is not an integer")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if _BINARY.match(text):
        raise QuantityError("is a byte quantity; device resources are plain integers (MB, %)")
    m = _QUANTITY.match(text)
    if m is None:
        raise QuantityError("is not a Kubernetes quantity")
    number, exponent, suffix = m.group(1), m.group(2), m.group(3) or ""
    try:
        amount = Decimal(number + (exponent or ""))
        if not exponent:
            amount = amount.scaleb({"m": -3, "u": -6, "n": -9}.get(suffix, 0) or
                                   _DECIMAL_SUFFIX.get(suffix, 0))  # fmt: skip
    except ArithmeticError as exc:  # InvalidOperation, Overflow: not a number we can hold
        raise QuantityError("is not a Kubernetes quantity") from exc
    if not amount.is_finite() or amount.adjusted() > _INT64_DIGITS:
        # refused before `int()`: `1e999999999` would build a billion-digit integer
        raise QuantityError("is larger than any Kubernetes quantity (2^63-1)")
    if amount != amount.to_integral_value():
        raise QuantityError("is not an integer")
    return int(amount)
