"""The policy interface: a score per node plus a card choice per node.

This is the contract the scheduler's ``deviceshare`` plugin will program against. A policy is
asked about one node at a time, on a node that already passed the filter (``model.fits``), and
answers with a :class:`Choice`. Scores must be pure functions of (node state, request): the
engine caches them per node and only re-asks after that node changed, which is what makes a
1,200-node replay affordable in pure Python.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from services.core.placement.model import NodeView, Request
from services.core.placement.workload import TargetWorkload

#: Higher is better. A tuple lets a policy express lexicographic tie-breakers exactly instead of
#: folding them into a float with magic weights.
Score = float | tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Choice:
    """A policy's answer for one node: how good it is and which cards it would take there."""

    score: Score
    cards: tuple[int, ...]


class Policy(ABC):
    """A card/node placement policy.

    Ties between equally scored nodes go to the first node in the caller's order, as in the
    reference simulator's scheduler; a policy sets ``random_ties`` to pick uniformly among them
    instead (only the random baseline does), which then needs an RNG to be deterministic.
    """

    name: ClassVar[str]
    random_ties: ClassVar[bool] = False
    #: Smallest difference between two unequal scores when scores are quantised (None: they are
    #: continuous). The scheduler, which adds scores of several plugins and sees nodes in a
    #: rotating order, uses it to break ties towards the earlier node without reordering
    #: unequal scores.
    score_step: float | None = None

    @abstractmethod
    def evaluate(self, node: NodeView, request: Request) -> Choice:
        """Score ``node`` for ``request`` and choose its cards; ``node`` is known to fit."""

    def finalize_cards(
        self, node: NodeView, request: Request, choice: Choice, rng: random.Random | None
    ) -> tuple[int, ...]:
        """Card indices to bind on the chosen node; only the random baseline needs the RNG."""
        return choice.cards


#: Policies are built for a target workload, because fragmentation-aware ones need it, and
#: optionally the cluster's card count per model (``{"G2": 4392, ...}``).
PolicyFactory = Callable[[TargetWorkload, Mapping[str, int] | None], Policy]
