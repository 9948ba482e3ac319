"""Card/node placement policies for GPU-sharing workloads (FGD and Tessera), as pure functions.

No I/O, no clock: everything here is a deterministic function of (nodes, request, target
workload[, RNG]) so the scheduler and the trace-replay benchmark run the very same code.
"""

from services.core.placement.engine import Placer, choose
from services.core.placement.fragmentation import FragmentationModel, shape_fragmentation
from services.core.placement.model import (
    CARD_MILLI,
    NodeView,
    Placement,
    Request,
    apply,
    cards_by_model,
    fits,
)
from services.core.placement.policy import Choice, Policy, PolicyFactory, Score
from services.core.placement.registry import POLICIES, build_policies
from services.core.placement.workload import Shape, TargetWorkload

__all__ = [
    "CARD_MILLI",
    "POLICIES",
    "Choice",
    "FragmentationModel",
    "NodeView",
    "Placement",
    "Placer",
    "Policy",
    "PolicyFactory",
    "Request",
    "Score",
    "Shape",
    "TargetWorkload",
    "apply",
    "build_policies",
    "cards_by_model",
    "choose",
    "fits",
    "shape_fragmentation",
]
