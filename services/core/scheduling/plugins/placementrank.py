"""`deviceshare.SchedulePolicy: fgd | tessera` — card order borrowed from the placement package.

Within one node, FGD and the Tessera policy (`services.core.placement`) put a shared slice on
the tightest card that still fits (`placement.model.tightest_card`: best fit keeps whole cards
free for whole-card requests). As a `CardRanker` that is: most-used card tried first, lowest
index on ties. Node choice stays with the session's node order (binpack/nodeorder/deviceshare).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.core.devices.policies import CardRanker, ScoredCard


def placement_ranker(policy: str) -> CardRanker:
    def rank(scored: Sequence[ScoredCard], numa_bind: bool) -> list[ScoredCard]:
        # tried from the END: put the fullest card (highest score, most slices) last
        return sorted(scored, key=lambda e: (e[0], e[1], -e[2].index))

    rank.__name__ = f"{policy}_ranker"
    return rank
