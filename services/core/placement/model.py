"""The small, scheduler-agnostic resource model the placement policies work on.

Policies only ever see free capacity: what the node has left, and what the request asks for.
Keeping the model this narrow is what lets the same scoring code serve the trace replay in
``benchmarks/openb.py`` and, later, the scheduler's ``deviceshare`` plugin, which will build
these views from its own node/device ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Milli-units per card: a request of 1000 takes a whole card.
CARD_MILLI = 1000


@dataclass(frozen=True, slots=True)
class NodeView:
    """Free capacity of one node at one instant.

    ``cards`` is per-card free milli (0..1000), indexed like the node's devices, so a card
    choice can be reported back as indices the device plugin understands.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    model: str
    cards: tuple[int, ...]

    @property
    def free_card_milli(self) -> int:
        return sum(self.cards)


@dataclass(frozen=True, slots=True)
class Request:
    """What one pod asks for.

    ``card_milli`` is the share of *each* requested card (HAMi-style soft slice: memory % and
    core % both equal ``card_milli / 10``); ``models`` is a filter on the node's card model,
    ``None`` meaning any model.
    """

    cpu_milli: int
    memory_mib: int
    num_cards: int = 0
    card_milli: int = 0
    models: frozenset[str] | None = None

    @property
    def gpu_milli(self) -> int:
        """Total card milli asked for; the unit the allocation metrics are counted in."""
        return self.num_cards * self.card_milli

    @property
    def is_shared(self) -> bool:
        """A fractional single-card request: the only kind whose card choice is a real choice."""
        return self.num_cards == 1 and 0 < self.card_milli < CARD_MILLI


@dataclass(frozen=True, slots=True)
class Placement:
    """A decision: which node, and which of its cards (indices into ``NodeView.cards``)."""

    node: str
    cards: tuple[int, ...]


def model_allowed(models: frozenset[str] | None, model: str) -> bool:
    """Model filter; a request without card demand is never restricted by it."""
    return models is None or model in models


def fits(node: NodeView, request: Request) -> bool:
    """The scheduler's filter stage: CPU, memory, card model and per-card free milli.

    Separated from scoring because every policy shares it and the scheduler runs it before any
    score plugin; policies may assume the node they score passes it.
    """
    if node.cpu_milli < request.cpu_milli or node.memory_mib < request.memory_mib:
        return False
    k = request.num_cards
    if k == 0:
        return True
    if request.models is not None and node.model not in request.models:
        return False
    d = request.card_milli
    n = 0
    for free in node.cards:
        if free >= d:
            n += 1
            if n >= k:
                return True
    return False


def apply(node: NodeView, request: Request, cards: tuple[int, ...]) -> NodeView:
    """The node after binding ``request`` to ``cards``; used by both the engine and what-if scoring."""
    if len(cards) != request.num_cards:
        raise ValueError(f"request wants {request.num_cards} cards, got {cards!r}")
    free = list(node.cards)
    for i in cards:
        if free[i] < request.card_milli:
            raise ValueError(f"card {i} of {node.name} has {free[i]} milli free")
        free[i] -= request.card_milli
    return NodeView(
        node.name,
        node.cpu_milli - request.cpu_milli,
        node.memory_mib - request.memory_mib,
        node.model,
        tuple(free),
    )


def lowest_free_cards(cards: tuple[int, ...], k: int, milli: int) -> tuple[int, ...]:
    """The first ``k`` card indices with at least ``milli`` free.

    This is how the reference simulator binds whole-card pods, so it is the default choice
    wherever a policy has no opinion about which card to take.
    """
    out: list[int] = []
    for i, free in enumerate(cards):
        if free >= milli:
            out.append(i)
            if len(out) == k:
                break
    return tuple(out)


def tightest_card(cards: tuple[int, ...], milli: int) -> int:
    """Index of the card with the least free milli that still fits ``milli`` (lowest index on ties).

    Best-fit inside the node keeps larger holes for larger future slices.
    """
    best = -1
    best_free = CARD_MILLI + 1
    for i, free in enumerate(cards):
        if milli <= free < best_free:
            best, best_free = i, free
    return best


def cards_by_model(nodes: Iterable[NodeView]) -> dict[str, int]:
    """The cluster's card count per card model: the inventory model-aware policies weigh
    constrained demand against."""
    out: dict[str, int] = {}
    for n in nodes:
        if n.cards:
            out[n.model] = out.get(n.model, 0) + len(n.cards)
    return out
