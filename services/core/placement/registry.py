"""Name → factory table for the policies, built explicitly (no import-time registration).

Names are what ``deviceshare.SchedulePolicy`` and ``benchmarks.openb --policies`` accept. A
factory takes the target workload and, optionally, the cluster's card count per model (only
Tessera's model-scarcity term reads it).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.core.placement.baselines import (
    BestFitPolicy,
    DotProductPolicy,
    PackingPolicy,
    RandomPolicy,
)
from services.core.placement.fgd import FgdPolicy
from services.core.placement.policy import PolicyFactory
from services.core.placement.tessera import TesseraPolicy
from services.core.placement.workload import TargetWorkload


def _random(_: TargetWorkload, inventory: Mapping[str, int] | None = None) -> RandomPolicy:
    return RandomPolicy()


def _bestfit(_: TargetWorkload, inventory: Mapping[str, int] | None = None) -> BestFitPolicy:
    return BestFitPolicy()


def _packing(_: TargetWorkload, inventory: Mapping[str, int] | None = None) -> PackingPolicy:
    return PackingPolicy()


def _dotproduct(_: TargetWorkload, inventory: Mapping[str, int] | None = None) -> DotProductPolicy:
    return DotProductPolicy()


def _fgd(w: TargetWorkload, inventory: Mapping[str, int] | None = None) -> FgdPolicy:
    return FgdPolicy(w)


def _fgd_exact(w: TargetWorkload, inventory: Mapping[str, int] | None = None) -> FgdPolicy:
    return FgdPolicy(w, quantize=False)


def _tessera(w: TargetWorkload, inventory: Mapping[str, int] | None = None) -> TesseraPolicy:
    return TesseraPolicy(w, inventory=inventory)


def build_policies() -> dict[str, PolicyFactory]:
    """All known policies. ``fgd`` is the published algorithm with the simulator's integer
    scores; ``fgd-exact`` uses the unquantised gradient."""
    return {
        "random": _random,
        "bestfit": _bestfit,
        "packing": _packing,
        "dotproduct": _dotproduct,
        "fgd": _fgd,
        "fgd-exact": _fgd_exact,
        "tessera": _tessera,
    }


POLICIES: dict[str, PolicyFactory] = build_policies()
