"""NVIDIA GPUs in MIG mode: kept off until Tessera carves MIG instances.

HAMi's NVIDIA plugin registers a GPU with MIG enabled as ``"mode": "mig"``
(``hami.io/node-nvidia-register``). HAMi's scheduler fits such a card differently from a soft
(hami-core) card: ``Fit`` picks, from the configured ``knownMigGeometries``, the smallest MIG
profile whose memory holds the request and that has a free hardware placement on the card; it
books the profile's memory and cores, and the binding carries ``hami.io/vgpu-mig-allocations``
(profile + placement per container device), which the node's device plugin needs to create the
instance: without it ``Allocate`` fails ("container … has 0 MIG reservations") and the kubelet
refuses the pod.

Tessera implements none of that yet. Booking a MIG card by memory and cores like a soft card
over-packs it (9 × 12000 MB asks: 6 booked where 3 ``2g.20gb`` instances fit) and writes a
binding HAMi's plugin cannot serve. So a MIG card is kept off: the fit refuses it per card
(:data:`CARD_IN_MIG_MODE`), the allocator's ledger refuses any slice on it, and every view of the
card (``get cards``, ``describe card``, ``explain``, the pod's waiting words, a cluster node's
problems) says :data:`MIG_WORDS`.
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.devices import CardSpec

#: the mode HAMi's NVIDIA plugin registers a MIG-enabled GPU with
MIG_MODE = "mig"
#: the per-card fit reason (HAMi style: a code, aggregated as "1/1 CardInMigMode")
CARD_IN_MIG_MODE = "CardInMigMode"
#: what a user reads wherever a MIG card is shown or refused
MIG_WORDS = "MIG mode: Tessera does not carve MIG instances yet"


def in_mig_mode(card: CardSpec) -> bool:
    """A card HAMi's plugin registered with MIG enabled."""
    return card.mode == MIG_MODE


def mig_reason(card: CardSpec) -> str | None:
    """The fit's reason to keep a pod off ``card`` (None: not a MIG card)."""
    return CARD_IN_MIG_MODE if in_mig_mode(card) else None


def ledger_refusal(card: CardSpec) -> str | None:
    """Why the allocator's ledger books no slice on ``card`` (None: not a MIG card): a proposal
    made by an older scheduler, or one that ignored the fit, must not over-pack the card."""
    if not in_mig_mode(card):
        return None
    return f"{CARD_IN_MIG_MODE}: card {card.uuid} is in {MIG_WORDS}"


def card_note(card: CardSpec) -> str:
    """The note a card row carries ("" for an ordinary card)."""
    return MIG_WORDS if in_mig_mode(card) else ""


def mig_words(kind: str, cards: Sequence[CardSpec], codes: str) -> tuple[str, str, float]:
    """Explain's words for a node whose matching cards are all in MIG mode: what keeps the pod
    off and what would let it land (no freeing helps: infinite distance)."""
    mig = [c for c in cards if in_mig_mode(c)]
    types = ", ".join(sorted({c.type for c in mig}))
    n = len(mig)
    return (f"{kind}: the node's {n} card{'s' if n > 1 else ''} ({types}) {'are' if n > 1 else 'is'} "
            f"in {MIG_WORDS} [{codes}]",
            "run the pod on a node whose GPUs are not in MIG mode, or turn MIG off on this node's "
            "GPUs (HAMi's plugin then registers them for sharing)", float("inf"))  # fmt: skip
