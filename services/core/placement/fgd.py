"""Fragmentation Gradient Descent (Weng et al., ATC'23; perf.md §1.4).

Place each pod where it increases expected fragmentation F_n(M) the least. Only the chosen
node's F changes, so the node score is the local gradient F_n - F_n' and the whole decision is
O(nodes × shapes × cards).
"""

from __future__ import annotations

import math
from typing import ClassVar

from services.core.placement.baselines import default_cards
from services.core.placement.fragmentation import FragmentationModel
from services.core.placement.model import NodeView, Request, lowest_free_cards
from services.core.placement.policy import Choice, Policy
from services.core.placement.workload import TargetWorkload


def what_if_cards(cards: tuple[int, ...], request: Request) -> tuple[int, ...]:
    """Free card milli after a whole/multi-card request, packing onto the tightest sufficient cards.

    For whole cards this is simply "k fully free cards"; the tightest-first rule only matters for
    multi-card slices, which the traces do not contain but the model allows.
    """
    free = list(cards)
    order = sorted(range(len(free)), key=lambda i: (free[i], i))
    need = request.num_cards
    for i in order:
        if need == 0:
            break
        if free[i] >= request.card_milli:
            free[i] -= request.card_milli
            need -= 1
    return tuple(free)


class FgdPolicy(Policy):
    """FGD with the reference simulator's scoring.

    ``quantize=True`` reproduces ``int(100·sigmoid(ΔF/1000))``, what the published numbers were
    produced with: fragmentation changes below roughly 40 milli are invisible to it, and the
    resulting ties go to the first node in order. That matters more than it looks: for a
    whole-card pod almost every node lowers F by the same amount (the CPU-only shapes' share of
    the allocated card), so the tie-break *is* the placement, and a consistent first-in-order
    choice packs nodes. ``quantize=False`` (the exact gradient) loses that and does much worse on
    the openb traces (≈9.6% vs ≈4.8% unallocated on ``default``).
    """

    name: ClassVar[str] = "fgd"

    def __init__(self, workload: TargetWorkload, quantize: bool = True) -> None:
        self.frag = FragmentationModel(workload)
        self.quantize = quantize
        self.score_step = 1.0 if quantize else None

    def _score(self, gain: float) -> float:
        if not self.quantize:
            return gain
        return float(int(100.0 / (1.0 + math.exp(-gain / 1000.0))))

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        frag = self.frag
        before = frag.of(node)
        cpu_after = node.cpu_milli - request.cpu_milli
        if request.is_shared:
            d = request.card_milli
            best: float | None = None
            best_i = -1
            seen: dict[int, float] = {}
            for i, free in enumerate(node.cards):
                if free < d:
                    continue
                s = seen.get(free)
                if s is None:
                    after = list(node.cards)
                    after[i] = free - d
                    s = self._score(before - frag.amount(node.model, cpu_after, tuple(after)))
                    seen[free] = s
                if best is None or s > best:
                    best, best_i = s, i
            assert best is not None, "evaluate() called on a node that does not fit"
            return Choice(best, (best_i,))
        after_cards = what_if_cards(node.cards, request) if request.num_cards else node.cards
        gain = before - frag.amount(node.model, cpu_after, after_cards)
        cards = (
            lowest_free_cards(node.cards, request.num_cards, request.card_milli)
            if request.num_cards
            else default_cards(node, request)
        )
        return Choice(self._score(gain), cards)
