"""Choosing a node: the part every policy shares, with the per-node score cache.

A pod changes exactly one node, so the scores of all other nodes for a given request shape are
still valid at the next decision. :class:`Placer` keeps them per node and invalidates only the
node that changed; that turns a replay of ~10^4 pods over ~10^3 nodes into mostly dictionary
lookups. :func:`choose` is the stateless form for callers that hold their own node list (the
scheduler plugin) and want one decision.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from services.core.placement.model import (
    NodeView,
    Placement,
    Request,
    apply,
    cards_by_model,
    fits,
)
from services.core.placement.policy import Choice, Policy
from services.core.placement.registry import POLICIES
from services.core.placement.workload import TargetWorkload

#: Sentinel stored in the cache for "this node fails the filter for this request".
_INFEASIBLE = Choice(float("-inf"), ())


class _Slot:
    __slots__ = ("cache", "pods", "view")

    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.pods = 0
        self.cache: dict[int, Choice] = {}


class Placer:
    """Sequential placement over a mutable cluster; the state lives here, policies stay pure.

    Tie-breaking: the first best node in input order, or a uniformly random best node when the
    policy asks for random ties and an RNG is given.
    """

    def __init__(
        self,
        nodes: Iterable[NodeView],
        policy: Policy,
        rng: random.Random | None = None,
        max_pods_per_node: int | None = None,
    ) -> None:
        self.policy = policy
        self.rng = rng
        self.max_pods = max_pods_per_node
        self._slots = [_Slot(v) for v in nodes]
        self._index = {s.view.name: i for i, s in enumerate(self._slots)}
        if len(self._index) != len(self._slots):
            raise ValueError("node names must be unique")
        self._request_ids: dict[Request, int] = {}

    @property
    def nodes(self) -> list[NodeView]:
        return [s.view for s in self._slots]

    def node(self, name: str) -> NodeView:
        return self._slots[self._index[name]].view

    def pods_on(self, name: str) -> int:
        return self._slots[self._index[name]].pods

    def _evaluate(self, slot: _Slot, request: Request) -> Choice:
        if (self.max_pods is not None and slot.pods >= self.max_pods) or not fits(
            slot.view, request
        ):
            return _INFEASIBLE
        return self.policy.evaluate(slot.view, request)

    def choose(self, request: Request) -> Placement | None:
        """Best node and cards for ``request``, or None if it fits nowhere; changes nothing."""
        rid = self._request_ids.get(request)
        if rid is None:
            rid = self._request_ids[request] = len(self._request_ids)
        best: Choice = _INFEASIBLE
        ties: list[_Slot] = []
        random_ties = self.policy.random_ties and self.rng is not None
        for slot in self._slots:
            c = slot.cache.get(rid)
            if c is None:
                c = slot.cache[rid] = self._evaluate(slot, request)
            if c is _INFEASIBLE:
                continue
            if best is _INFEASIBLE or c.score > best.score:
                best, ties = c, [slot]
            elif random_ties and c.score == best.score:
                ties.append(slot)
        if best is _INFEASIBLE:
            return None
        slot = ties[0] if len(ties) == 1 or self.rng is None else self.rng.choice(ties)
        choice = slot.cache[rid]
        cards = self.policy.finalize_cards(slot.view, request, choice, self.rng)
        return Placement(slot.view.name, cards)

    def bind(self, placement: Placement, request: Request) -> NodeView:
        """Commit a placement; returns the node's new state."""
        slot = self._slots[self._index[placement.node]]
        slot.view = apply(slot.view, request, placement.cards)
        slot.pods += 1
        slot.cache.clear()
        return slot.view

    def place(self, request: Request) -> Placement | None:
        """Choose and bind in one step; None (and no change) if the request fits nowhere."""
        placement = self.choose(request)
        if placement is not None:
            self.bind(placement, request)
        return placement


def choose(
    request: Request,
    nodes: Sequence[NodeView],
    workload: TargetWorkload,
    policy: str | Policy = "tessera",
    rng: random.Random | None = None,
) -> Placement | None:
    """One placement decision over ``nodes`` against target workload ``workload``.

    The entry point for the scheduler plugin (``deviceshare.SchedulePolicy``). Pass a built
    :class:`Policy` to reuse its fragmentation memo across calls; a name builds a fresh one
    (with ``nodes`` as the card inventory).
    """
    built = POLICIES[policy](workload, cards_by_model(nodes)) if isinstance(policy, str) else policy
    return Placer(nodes, built, rng).choose(request)
