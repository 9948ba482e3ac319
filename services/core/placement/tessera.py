"""Tessera: FGD's fragmentation gradient plus CPU stranding and card-residual lookahead.

What the openb replays taught us (benchmarks/results/openb.md):

* FGD's gradient alone barely separates nodes for whole-card pods: allocating a card lowers
  every node's F by the same CPU-only share. What makes FGD work is that its integer score turns
  near-equal gradients into ties, and ties go to the first node in a fixed order, i.e. a
  consistent first-fit that packs. The exact, unquantised gradient is ~2x worse. So Tessera keeps
  a coarse (bucketed) cost and first-in-order ties on purpose.
* The openb clusters run out of CPU on the 8-card nodes (12 cores per card) long before cards
  run out, while the 2-card T4 nodes have 50 cores per card. F only notices CPU once a typical
  shape stops fitting, which is too late. Tessera adds the change in *stranded card milli*:
  the card capacity a node cannot feed with CPU at the workload's average CPU-per-card ratio.
  This steers CPU-only and CPU-heavy pods to CPU-rich nodes before the damage is done.
* For shared cards, a one-step lookahead over the residual slice: W(r) is the expected milli a
  card with r free ends up wasting when filled by the workload's single-card shapes; the change
  in W steers slices toward combinations that close cards exactly — it leads the node cost
  (weight 5) and picks the card on the node (then best fit). Slices are compared on a fine
  cost bucket (2 milli), whole cards on the coarse one that keeps first-fit packing. W is
  judged against the competition a hole really faces: the tiny slices that fit an 810-milli
  slice's 190-milli hole are 12-24x rarer than those holes, so they all go there and W does
  not count on them for any other hole (taking them into account made a 210-milli hole look
  as good as closed, and 470 + 320 cards stayed 21 % empty); and frequencies are flattened,
  because the policy routes a rare exact fit to the hole it fits.
* Model scarcity (only when the workload has model-constrained shapes and the cluster's card
  count per model is known): a pod that could run on any model pays for the capacity it takes
  on a model that constrained shapes claim beyond the average load. Its weight was fixed before
  looking at any model-constrained trace (they are held out), and it is exactly zero on the
  traces Tessera was tuned on, which have no such shapes.

Everything is a pure function of (node, request, workload), so the engine can cache it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

from services.core.placement.fgd import FgdPolicy, what_if_cards
from services.core.placement.model import CARD_MILLI, NodeView, Request, lowest_free_cards
from services.core.placement.policy import Choice
from services.core.placement.workload import TargetWorkload

#: Weight of stranded card milli relative to fragment milli (both are "idle card milli").
STRANDING_WEIGHT = 1.0
#: Weight of the card-residual lookahead term. For slices it is what separates nodes: 5 makes
#: ΔW lead and ΔF + stranding break its near-ties (10 and more lets milli-sized W differences
#: override real CPU damage; openb.md has the sweep).
RESIDUAL_WEIGHT = 5.0
#: Exponent applied to slice frequencies in the residual lookahead (1 = draw the next slice by
#: frequency, 0 = every fitting size equally likely).
SIZE_FLATTENING = 0.25
#: Weight of the model-scarcity term (card milli taken from a claimed model, per unit of claim).
SCARCITY_WEIGHT = 1.0
#: Cost bucket (milli). Finer buckets lose FGD's packing-by-ties; coarser ones blur real
#: differences. 40 milli is also about where FGD's integer sigmoid score quantises.
COST_QUANTUM = 40.0
#: Bucket for slices (pods sharing a card). Their costs differ by a few milli between nodes
#: whose cards would close exactly and nodes that would keep a sliver, and that difference is
#: the whole point for them; packing-by-ties matters for whole cards. (gpushare40: 5.51 → 5.42.)
SHARED_QUANTUM = 2.0


def cpu_per_card_milli(workload: TargetWorkload) -> float:
    """CPU milli the card-using shapes bring per card milli, on average (0 if none use cards)."""
    cpu = sum(p * s.cpu_milli for s, p in workload.shapes if s.num_cards)
    cards = sum(p * s.num_cards * s.card_milli for s, p in workload.shapes if s.num_cards)
    return cpu / cards if cards else 0.0


def slice_sizes(workload: TargetWorkload) -> dict[int, float]:
    """Single-card shares (whole single cards included) and how often each occurs."""
    sizes: dict[int, float] = {}
    for shape, p in workload.shapes:
        if shape.num_cards == 1:
            sizes[shape.card_milli] = sizes.get(shape.card_milli, 0.0) + p
    return sizes


def claimed_below(sizes: Mapping[int, float]) -> int:
    """Largest hole left by a slice whose possible fillers are rarer than the slice itself.

    Such a slice (810 milli on every openb trace: only 50-160-milli slices fit its 190-milli
    hole, and they are 12-24 times rarer) leaves more holes than there will ever be slices to
    fill them, so every slice small enough to fit one ends up in one. Those sizes are therefore
    not available to fill any other hole. Returns 0 when no slice is in that position.
    """
    cut = 0
    for d, p in sizes.items():
        if d >= CARD_MILLI:
            continue
        hole = CARD_MILLI - d
        if sum(q for e, q in sizes.items() if e <= hole) < p:
            cut = max(cut, hole)
    return cut


def residual_waste(workload: TargetWorkload, flattening: float = SIZE_FLATTENING) -> list[float]:
    """W(r) for r in 0..1000: expected milli wasted by a card with r free.

    Recursion: if no single-card size fits in r, all of r is wasted; otherwise the next slice
    to land there is drawn from the fitting sizes. Two corrections to "draw by frequency", both
    because in a large cluster a hole competes with many others for the slices that fit it:
    sizes claimed by the holes of bigger slices (:func:`claimed_below`) are left out, and
    frequencies are flattened (``p ** flattening``) because the policy steers a rare exact fit
    to the hole it fits rather than leaving it to chance.
    """
    sizes = slice_sizes(workload)
    cut = claimed_below(sizes)
    weights = {d: p**flattening for d, p in sizes.items() if d > cut}
    waste = [0.0] * (CARD_MILLI + 1)
    for r in range(1, CARD_MILLI + 1):
        total = acc = 0.0
        for d, p in weights.items():
            if d <= r:
                total += p
                acc += p * waste[r - d]
        waste[r] = acc / total if total else float(r)
    return waste


def model_claims(workload: TargetWorkload, inventory: Mapping[str, int]) -> dict[str, float]:
    """Per card model: how much of its capacity the model-constrained shapes claim, relative to
    the average load of the cluster, capped at 1 (1 = they alone would load it as much as the
    whole workload loads an average card). Each constrained shape's demand is spread over the
    models it accepts in proportion to their card counts. Empty when nothing is constrained."""
    total_cards = sum(inventory.values())
    demand = sum(p * s.num_cards * s.card_milli for s, p in workload.shapes)
    if total_cards <= 0 or demand <= 0:
        return {}
    claimed: dict[str, float] = {}
    for s, p in workload.shapes:
        if s.models is None or not s.num_cards:
            continue
        cards = sum(inventory.get(m, 0) for m in s.models)
        for m in s.models:
            if inventory.get(m, 0) and cards:
                share = p * s.num_cards * s.card_milli * inventory[m] / cards
                claimed[m] = claimed.get(m, 0.0) + share
    average = demand / total_cards
    return {m: min(1.0, c / inventory[m] / average) for m, c in claimed.items()}


class TesseraPolicy(FgdPolicy):
    """Lowest bucketed cost ΔF + a·Δstranded + b·ΔW (+ c·claim·footprint for unconstrained pods
    on claimed models); ties to the first node in order."""

    name: ClassVar[str] = "tessera"

    def __init__(
        self,
        workload: TargetWorkload,
        stranding_weight: float = STRANDING_WEIGHT,
        residual_weight: float = RESIDUAL_WEIGHT,
        quantum: float = COST_QUANTUM,
        inventory: Mapping[str, int] | None = None,
        scarcity_weight: float = SCARCITY_WEIGHT,
    ) -> None:
        super().__init__(workload, quantize=False)
        self.claims = model_claims(workload, inventory) if inventory else {}
        self.scarcity_weight = scarcity_weight
        self.rho = cpu_per_card_milli(workload)
        self.stranding_weight = stranding_weight
        self.residual_weight = residual_weight
        self.quantum = quantum
        self.shared_quantum = min(quantum, SHARED_QUANTUM) if quantum > 0 else 0.0
        self.score_step = 1.0 if quantum > 0 else None
        self.waste = residual_waste(workload)

    def stranded(self, cpu_free: int, card_free: int) -> float:
        """Card milli this node cannot feed with CPU at the workload's CPU-per-card ratio."""
        if self.rho <= 0:
            return 0.0
        return max(0.0, card_free - cpu_free / self.rho)

    def _shared_card(self, node: NodeView, request: Request, cpu_after: int) -> tuple[int, float]:
        """The card for a slice: the one whose residual is expected to waste the least once the
        workload's slices fill it (ΔW), then the fullest that fits (best fit), then the first.
        Returns the card and the node's fragmentation after the placement."""
        d = request.card_milli
        best: tuple[float, int, int] | None = None
        for i, free in enumerate(node.cards):
            if free < d:
                continue
            key = (self.waste[free - d] - self.waste[free], free, i)
            if best is None or key < best:
                best = key
        if best is None:
            return -1, math.inf
        i = best[2]
        after = list(node.cards)
        after[i] -= d
        return i, self.frag.amount(node.model, cpu_after, tuple(after))

    def cost(self, node: NodeView, request: Request) -> tuple[float, tuple[int, ...]]:
        """Unbucketed cost of placing ``request`` on ``node`` and the cards it would use."""
        frag = self.frag
        cpu_after = node.cpu_milli - request.cpu_milli
        cards: tuple[int, ...]
        if request.is_shared:
            i, after_f = self._shared_card(node, request, cpu_after)
            cards = (i,)
        elif request.num_cards:
            after_f = frag.amount(node.model, cpu_after, what_if_cards(node.cards, request))
            cards = lowest_free_cards(node.cards, request.num_cards, request.card_milli)
        else:
            after_f = frag.amount(node.model, cpu_after, node.cards)
            cards = ()
        free = node.free_card_milli
        d_stranded = self.stranded(cpu_after, free - request.gpu_milli) - self.stranded(
            node.cpu_milli, free
        )
        d_waste = 0.0
        for i in cards:
            r = node.cards[i]
            d_waste += self.waste[r - request.card_milli] - self.waste[r]
        total = (
            (after_f - frag.of(node))
            + self.stranding_weight * d_stranded
            + self.residual_weight * d_waste
        )
        if self.claims and request.models is None:
            claim = self.claims.get(node.model, 0.0)
            if claim:
                footprint = max(
                    float(request.gpu_milli), request.cpu_milli / self.rho if self.rho else 0.0
                )
                total += self.scarcity_weight * claim * footprint
        return total, cards

    def evaluate(self, node: NodeView, request: Request) -> Choice:
        total, cards = self.cost(node, request)
        quantum = self.shared_quantum if request.is_shared else self.quantum
        score = -float(math.floor(total / quantum)) if quantum > 0 else -total
        return Choice(score, cards)
