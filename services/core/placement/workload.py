"""The target workload M: the distribution of "typical" pod shapes the fragmentation measure
is taken against (perf.md §1.3).

Fragmentation only means something relative to what will arrive next; a free half card is a
fragment for a whole-card task but useful for a 0.4-card one. FGD estimates "what arrives next"
from the trace's own shape histogram, truncated to the shapes covering 95% of pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from services.core.placement.model import Request


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """A request reduced to what fragmentation depends on: memory is deliberately dropped."""

    cpu_milli: int
    num_cards: int
    card_milli: int
    models: tuple[str, ...] | None = None

    @classmethod
    def of(cls, request: Request) -> Shape:
        models = tuple(sorted(request.models)) if request.models is not None else None
        return cls(request.cpu_milli, request.num_cards, request.card_milli, models)


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Typical shapes with their probabilities (summing to 1)."""

    shapes: tuple[tuple[Shape, float], ...]

    @classmethod
    def from_requests(cls, requests: Iterable[Request], coverage: float = 0.95) -> TargetWorkload:
        """Keep the most frequent shapes until they cover ``coverage`` of the pods.

        Ties in frequency are ordered by the shape itself so the result never depends on input
        order (the reference simulator iterates a Go map here, which is not reproducible).
        """
        counts = Counter(Shape.of(r) for r in requests)
        if not counts:
            raise ValueError("cannot build a target workload from no requests")
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], _shape_sort_key(kv[0])))
        kept: list[tuple[Shape, int]] = []
        covered = 0
        for shape, n in ranked:
            if covered >= coverage * total:
                break
            kept.append((shape, n))
            covered += n
        return cls(tuple((s, n / covered) for s, n in kept))

    @classmethod
    def uniform(cls, shapes: Iterable[Shape]) -> TargetWorkload:
        """Equal weights; handy for hand-built tests and for a scheduler with no history yet."""
        ss = tuple(shapes)
        return cls(tuple((s, 1.0 / len(ss)) for s in ss))


def _shape_sort_key(s: Shape) -> tuple[int, int, int, tuple[str, ...]]:
    return (s.cpu_milli, s.num_cards, s.card_milli, s.models or ())
