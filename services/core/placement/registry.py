"""Name → factory table for the policies, built explicitly (no import-time registration).

Names are what ``deviceshare.SchedulePolicy`` and ``benchmarks.openb --policies`` accept.
"""

from __future__ import annotations

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


def _random(_: TargetWorkload) -> RandomPolicy:
    return RandomPolicy()


def _bestfit(_: TargetWorkload) -> BestFitPolicy:
    return BestFitPolicy()


def _packing(_: TargetWorkload) -> PackingPolicy:
    return PackingPolicy()


def _dotproduct(_: TargetWorkload) -> DotProductPolicy:
    return DotProductPolicy()


def _fgd_exact(w: TargetWorkload) -> FgdPolicy:
    return FgdPolicy(w, quantize=False)


def build_policies() -> dict[str, PolicyFactory]:
    """All known policies. ``fgd`` is the published algorithm with the simulator's integer
    scores; ``fgd-exact`` uses the unquantised gradient."""
    return {
        "random": _random,
        "bestfit": _bestfit,
        "packing": _packing,
        "dotproduct": _dotproduct,
        "fgd": FgdPolicy,
        "fgd-exact": _fgd_exact,
        "tessera": TesseraPolicy,
    }


POLICIES: dict[str, PolicyFactory] = build_policies()
