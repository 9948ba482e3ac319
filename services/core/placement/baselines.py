"""Reference policies from the FGD paper's comparison (perf.md §1.5).

They exist to validate the replay against published numbers and to give the FGD/Tessera
policies a yardstick, so they copy the reference simulator's observable behaviour, including
its integer scores: kube-scheduler scores are int64 in 0..100, and truncation creates ties. The
simulator's scheduler fork resolves ties by node order (nodes get random name prefixes per run),
so ties act as a consistent first-fit. That implicit packing matters a lot: with ties broken at
random, or with unquantised scores, the published numbers are not reproduced.
"""

from __future__ import annotations

import random
from typing import ClassVar

from services.core.placement.model import (
    CARD_MILLI,
    NodeView,
    Request,
    lowest_free_cards,
    tightest_card,
)
from services.core.placement.policy import Choice, Policy

#: Normalisers the simulator uses for "leftover" terms (largest node: 128 cores, 8 cards).
MAX_SPEC_CPU = 128_000
MAX_SPEC_CARD_MILLI = 8 * CARD_MILLI


def default_cards(node: NodeView, request: Request) -> tuple[int, ...]:
    """Best-fit card for a slice, lowest-indexed sufficient cards otherwise."""
    if request.num_cards == 0:
        return ()
    if request.is_shared:
        return (tightest_card(node.cards, request.card_milli),)
    return lowest_free_cards(node.cards, request.num_cards, request.card_milli)


class RandomPolicy(Policy):
    """Any feasible node, any fitting card: the floor every other policy must clear."""

    name: ClassVar[str] = "random"
    random_ties: ClassVar[bool] = True

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        return Choice(0.0, ())

    def finalize_cards(
        self, node: NodeView, request: Request, choice: Choice, rng: random.Random | None
    ) -> tuple[int, ...]:
        if request.num_cards == 0:
            return ()
        fitting = [i for i, free in enumerate(node.cards) if free >= request.card_milli]
        if rng is None:
            return tuple(fitting[: request.num_cards])
        return tuple(sorted(rng.sample(fitting, request.num_cards)))


class BestFitPolicy(Policy):
    """Least leftover (CPU and card milli, equally weighted, normalised by the largest node)."""

    name: ClassVar[str] = "bestfit"

    def __init__(self, quantize: bool = True) -> None:
        self.quantize = quantize

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        left = (
            0.5 * (node.cpu_milli - request.cpu_milli) / MAX_SPEC_CPU
            + 0.5 * (node.free_card_milli - request.gpu_milli) / MAX_SPEC_CARD_MILLI
        )
        score = (1.0 - left) * 100.0
        return Choice(float(int(score)) if self.quantize else score, default_cards(node, request))


class PackingPolicy(Policy):
    """GpuPacking: partly used cards first, then free cards on used nodes, then empty nodes.

    Tiers are encoded in the simulator's integer bands (50..100, 33..50, 0..33) so that ties
    inside a band fall to the node-order tie-break exactly as there.
    """

    name: ClassVar[str] = "packing"

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        cards = default_cards(node, request)
        if request.num_cards == 0 or request.card_milli == 0:
            return Choice(0.0, cards)
        fully_free = sum(1 for c in node.cards if c == CARD_MILLI)
        if fully_free == len(node.cards):
            return Choice(float(max(100 // 3 - fully_free, fully_free)), cards)
        # Take the tightest sufficient cards; count how many of them are untouched.
        order = sorted(range(len(node.cards)), key=lambda i: (node.cards[i], i))
        take: list[int] = []
        for i in order:
            if node.cards[i] >= request.card_milli:
                take.append(i)
                if len(take) == request.num_cards:
                    break
        fresh = sum(1 for i in take if node.cards[i] == CARD_MILLI)
        if fresh > 0:
            return Choice(float(max(100 // 2 - fresh, 100 // 3)), cards)
        pct = sum(node.cards[i] * 100 // CARD_MILLI for i in take)
        return Choice(float(max(100 - pct // 10, 100 // 2)), cards)


class DotProductPolicy(Policy):
    """Tetris-style alignment as the simulator uses it: smallest normalised free·demand wins.

    Approximate (continuous rather than the simulator's exact normalisation); kept because it
    is cheap and shows how a pure packing heuristic fares.
    """

    name: ClassVar[str] = "dotproduct"

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        product = (node.cpu_milli / MAX_SPEC_CPU) * (request.cpu_milli / MAX_SPEC_CPU) + (
            node.free_card_milli / MAX_SPEC_CARD_MILLI
        ) * (request.gpu_milli / MAX_SPEC_CARD_MILLI)
        return Choice(-product, default_cards(node, request))
