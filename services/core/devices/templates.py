"""Ascend vNPU template rounding: HAMi ``Devices.trimMemory`` (pkg/device/ascend/device.go).

The rule (hami.md §2.3): the smallest template whose memory is >= the request; a request between
the largest template and ``memoryCapacity`` becomes the whole card (``memoryAllocatable``, no
template name); a request above ``memoryCapacity`` cannot be served at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.devices.catalogue import AscendChip


@dataclass(frozen=True, slots=True)
class Trimmed:
    """The booked memory and the template carrying it (``None`` = the whole card)."""

    memory: int
    template: str | None
    ai_core: int


def trim_memory(chip: AscendChip, request_mb: int) -> Trimmed | None:
    """Round ``request_mb`` up to a template of ``chip``; ``None`` when it exceeds the capacity."""
    for t in chip.templates:  # sorted by memory ascending
        if t.memory >= request_mb:
            return Trimmed(t.memory, t.name, t.ai_core)
    if request_mb <= chip.memory_capacity:
        return Trimmed(chip.memory_allocatable, None, chip.ai_core)
    return None
