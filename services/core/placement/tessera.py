"""Tessera placement policy (placeholder: FGD exact gradient, deterministic)."""

from __future__ import annotations

from typing import ClassVar

from services.core.placement.fgd import FgdPolicy
from services.core.placement.workload import TargetWorkload


class TesseraPolicy(FgdPolicy):
    name: ClassVar[str] = "tessera"
    random_ties: ClassVar[bool] = False

    def __init__(self, workload: TargetWorkload) -> None:
        super().__init__(workload, quantize=False)
