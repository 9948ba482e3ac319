"""Card and node policies (hami.md §4.1 steps 5-6, §4.2).

Card order: the list is sorted, then tried **from the end**. binpack sorts ascending by device
score (so the fullest card is tried first), spread descending (emptiest first). Since v2.10
(#1806/#2011) ties break on NUMA ascending, not NUMA first. ``mutex`` keeps only idle cards
(a Fit filter) and, alone, sorts busy cards before idle ones. v2.10 chains such as
``mutex,binpack,numa`` apply the sort keys binpack/spread/numa in the order written, with the
filters (mutex, topology-aware) kept apart; a chain of only filters falls back to spread; under
``nvidia.com/numa-bind`` numa is forced to be the first key (higher NUMA earlier in the list).
A final Index key makes every order deterministic (ties: lower Index earlier, tried later).

A pod's policy annotation HAMi would not read (``binpak``, ``Binpack``, ``fgd``) is ignored
for the configured policy, as HAMi does (:func:`card_policy_problem`, :func:`node_policy_problem`);
admission warns of it. A bad *configured* policy is still an error.

Node order: spread sorts descending, anything else ascending, and the last node wins: binpack
picks the highest node score, spread the lowest.

``fgd``/``tessera`` (``services.core.placement``) rank *nodes* for a target workload, with their
own free-capacity model; they are not card sort keys. Callers that want them for card choice plug
a :class:`CardRanker` into the device config instead (the extension point).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from contracts.devices import CardSpec
from services.core.devices.score import PolicyError

CARD_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
NODE_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"

SORT_TOKENS = frozenset({"binpack", "spread", "numa"})
FILTER_TOKENS = frozenset({"mutex", "topology-aware"})
NODE_POLICIES = frozenset({"binpack", "spread"})
PLACEMENT_POLICIES = frozenset({"fgd", "fgd-exact", "tessera"})


@dataclass(frozen=True, slots=True)
class CardPolicy:
    """A parsed card policy: sort keys in order, the mutex filter, and whether it was a chain."""

    keys: tuple[str, ...]
    mutex: bool = False
    topology_aware: bool = False
    chain: bool = False

    @property
    def text(self) -> str:
        parts = list(self.keys)
        if self.mutex:
            parts.insert(0, "mutex")
        return ",".join(parts)


def parse_card_policy(text: str) -> CardPolicy:
    """``binpack`` | ``spread`` | ``mutex`` | ``numa`` | ``topology-aware`` | a comma chain."""
    tokens = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not tokens:
        raise PolicyError(f"{CARD_POLICY_ANNOTATION}={text!r}: empty policy")
    for t in tokens:
        if t in PLACEMENT_POLICIES:
            raise PolicyError(
                f"{CARD_POLICY_ANNOTATION}={text!r}: {t} is a node placement policy "
                "(services.core.placement), not a card order; configure a CardRanker for it"
            )
        if t not in SORT_TOKENS and t not in FILTER_TOKENS:
            raise PolicyError(
                f"{CARD_POLICY_ANNOTATION}={text!r}: unknown policy {t!r} "
                f"(known: {', '.join(sorted(SORT_TOKENS | FILTER_TOKENS))})"
            )
    keys = tuple(dict.fromkeys(t for t in tokens if t in SORT_TOKENS))
    mutex = "mutex" in tokens
    topo = "topology-aware" in tokens
    chain = len(tokens) > 1
    if not keys:
        keys = ("spread",)  # filter-only chain falls back to spread
    return CardPolicy(keys=keys, mutex=mutex, topology_aware=topo, chain=chain)


def card_policy_problem(text: str) -> str | None:
    """Why HAMi would not take `text` from a pod's ``hami.io/gpu-scheduler-policy``
    (``IsValidGPUSchedulerPolicy``: every comma item, trimmed and in its exact case, one of the
    five names; blank is not a policy), or None when it would. HAMi then ignores the value and
    keeps the configured policy (``GetGPUSchedulerPolicyByPod``), so the pod is scheduled."""
    if not text.strip():
        return "empty policy"
    for raw in text.split(","):
        t = raw.strip()
        if t in SORT_TOKENS or t in FILTER_TOKENS:
            continue
        if t.lower() in PLACEMENT_POLICIES:
            return f"{t} is a node placement policy (services.core.placement), not a card order"
        known = ", ".join(sorted(SORT_TOKENS | FILTER_TOKENS))
        return f"unknown policy {t!r} (known: {known}; lower case)"
    return None


def node_policy_problem(text: str) -> str | None:
    """Why HAMi would not take `text` from a pod's ``hami.io/node-scheduler-policy``
    (``IsValidNodeSchedulerPolicy``: binpack or spread, trimmed, exact case; no chain), or None.
    HAMi ignores such a value and keeps the configured node policy
    (``resolveNodeSchedulerPolicy``)."""
    if text.strip() in NODE_POLICIES:
        return None
    return "expected binpack or spread"


def parse_node_policy(text: str) -> str:
    t = text.strip().lower()
    if t not in NODE_POLICIES:
        raise PolicyError(f"{NODE_POLICY_ANNOTATION}={text!r}: expected binpack or spread")
    return t


#: One entry of a card order: (device score, used slots, card).
ScoredCard = tuple[float, int, CardSpec]


class CardRanker(Protocol):
    """Extension point: order cards (tried from the end) by a policy not built in here."""

    def __call__(self, scored: Sequence[ScoredCard], numa_bind: bool) -> list[ScoredCard]: ...


def card_sort_key(policy: CardPolicy, numa_bind: bool) -> Callable[[ScoredCard], tuple[float, ...]]:
    keys = policy.keys
    single = not policy.chain and len(keys) == 1 and not numa_bind
    if single and keys[0] == "binpack":
        return lambda e: (e[0], e[2].numa, e[2].index)
    if single and keys[0] == "spread" and not policy.mutex:
        return lambda e: (-e[0], e[2].numa, e[2].index)
    if single and keys[0] == "spread" and policy.mutex:
        # mutex alone: busy cards first, idle ones last (tried first), spread among them
        return lambda e: (0 if e[1] else 1, -e[0], e[2].numa, e[2].index)
    if numa_bind:
        keys = ("numa", *(k for k in keys if k != "numa"))

    def key(e: ScoredCard) -> tuple[float, ...]:
        out: list[float] = []
        for k in keys:
            if k == "binpack":
                out.append(e[0])
            elif k == "spread":
                out.append(-e[0])
            else:
                out.append(-e[2].numa)
        out.append(e[2].index)
        return tuple(out)

    return key


def order_cards(
    scored: Sequence[ScoredCard], policy: CardPolicy, numa_bind: bool = False
) -> list[ScoredCard]:
    """Cards in HAMi's sorted order; callers try them from the **end** of the list."""
    return sorted(scored, key=card_sort_key(policy, numa_bind))


def node_preference(policy: str, score: float) -> float:
    """Higher is better: binpack prefers the fullest node, spread the emptiest."""
    return -score if policy == "spread" else score
