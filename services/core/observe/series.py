"""One exported sample and the family it belongs to, independent of any metrics library."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["gauge", "counter", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric family: its exact name, help text, label names in order, and kind."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    kind: Kind = "gauge"


@dataclass(frozen=True, slots=True)
class Series:
    """One gauge sample: `labels` are the values of its family's label names, in order."""

    name: str
    labels: tuple[str, ...]
    value: float
