"""Pure gang-commit decision: a proposal against the authoritative ledgers → events or a reason.

Every slice of every task is re-checked with the card ledger's own `decide`, on a staged copy so
that several tasks of one gang on one card see each other. The result is the complete set of
ledger events plus `PlacementCommitted`, to be appended as ONE atomic batch; nothing is written
for a proposal that fails anywhere (DESIGN §6, invariant "a gang is bound whole or not at all").
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from contracts.base import Event
from contracts.events import PlacementCommitted, PlacementProposed, SliceReleased
from contracts.owners import owner_key
from services.core.ledger import (
    CardState,
    Rejection,
    ReleaseSlice,
    ReserveSlice,
    decide,
    evolve,
    per_card,
)


@dataclass(frozen=True, slots=True)
class CardWrite:
    card: str
    node: str
    event: Event


@dataclass(frozen=True, slots=True)
class CommitPlan:
    writes: tuple[CardWrite, ...]
    committed: PlacementCommitted
    #: every task already holds what is proposed — its slices (the ledgers) or, with no slices,
    #: its node (the log: `placed_on`) — so committing again would start the pods twice
    already_done: bool = False


#: task → the node the log has it placed on now (committed, not ended), or None
PlacedOn = Callable[[str], "str | None"]


def _nowhere(_task: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    card: str = ""  # the card whose ledger refused a slice (none: another rule)


def plan_commit(
    proposal: PlacementProposed,
    cards: Mapping[str, CardState],
    holdings: Mapping[str, AbstractSet[str]],
    proposal_seq: int = 0,
    placed_on: PlacedOn = _nowhere,
) -> CommitPlan | Refusal:
    """Decide a proposal. `holdings`: owner → cards it holds now (to refuse double placement);
    `placed_on`: where the log has a task of this job placed now (cardless tasks hold no card,
    so only the log knows)."""
    staged: dict[str, CardState] = {}
    writes: list[CardWrite] = []
    proposed_owners: dict[str, set[str]] = {}
    done = bool(proposal.placements)
    for placement in proposal.placements:
        owner = owner_key(proposal.namespace, proposal.name, placement.task)
        if not placement.slices:
            node = placed_on(placement.task)
            if node is not None and node != placement.node:
                return Refusal(f"{owner} is already placed on node {node}")
            done = done and node is not None
        wanted = proposed_owners.setdefault(owner, set())
        for assignment in per_card(placement.slices):
            wanted.add(assignment.card)
            state = staged.get(assignment.card) or cards.get(assignment.card)
            if state is None or state.spec is None:
                return Refusal(f"card {assignment.card} on {assignment.node} is not registered")
            if state.spec.node != placement.node or assignment.node != placement.node:
                return Refusal(
                    f"card {assignment.card} is on node {state.spec.node}, not {placement.node}"
                )
            result = decide(state, ReserveSlice(owner=owner, slice=assignment.slice))
            if isinstance(result, Rejection):
                return Refusal(f"task {placement.task} on card {assignment.card}: {result.reason}", assignment.card)
            for event in result:
                state = evolve(state, event)
                writes.append(
                    CardWrite(assignment.card, state.spec.node if state.spec else "", event)
                )
            staged[assignment.card] = state
    for owner, wanted in proposed_owners.items():
        held = holdings.get(owner, frozenset())
        if held and held != wanted:
            return Refusal(f"{owner} is already placed on cards {sorted(held)}")
    committed = PlacementCommitted(
        namespace=proposal.namespace,
        name=proposal.name,
        placements=proposal.placements,
        proposal_seq=proposal_seq,
        sets_phase=True,
    )
    already = (
        done
        and not writes
        and all(holdings.get(o, frozenset()) == w for o, w in proposed_owners.items() if w)
    )
    return CommitPlan(tuple(writes), committed, already_done=already)


def plan_release(
    owners: set[str],
    cards: Mapping[str, CardState],
    holdings: Mapping[str, AbstractSet[str]],
    reason: str,
) -> list[CardWrite]:
    """Release every slice the owners hold; idempotent (nothing held → no writes)."""
    writes: list[CardWrite] = []
    for owner in sorted(owners):
        for card in sorted(holdings.get(owner, frozenset())):
            state = cards.get(card)
            if state is None:
                continue
            result = decide(state, ReleaseSlice(owner=owner, reason=reason))
            if isinstance(result, Rejection):
                continue
            for event in result:
                assert isinstance(event, SliceReleased)
                writes.append(CardWrite(card, event.node, event))
    return writes


def plan_commits(
    proposals: list[tuple[PlacementProposed, int]],
    cards: Mapping[str, CardState],
    holdings: Mapping[str, AbstractSet[str]],
    max_messages: int = 900,
    placed_on: Callable[[PlacementProposed], PlacedOn] | None = None,
) -> list[CommitPlan]:
    """Plan consecutive proposals as if committed one after another (each sees the slices the
    earlier ones took), for ONE atomic batch. Stops before the first proposal that would be
    refused or is already done, or that would overflow the batch: the caller decides those
    one at a time, on a fresh read, exactly as before."""
    staged: dict[str, CardState] = {}
    taken: dict[str, frozenset[str]] = {}
    view_cards = ChainMap(staged, cards)  # type: ignore[arg-type]
    view_holdings = ChainMap(taken, holdings)  # type: ignore[arg-type]
    plans: list[CommitPlan] = []
    size = 0
    for proposal, seq in proposals:
        where = placed_on(proposal) if placed_on is not None else _nowhere
        plan = plan_commit(proposal, view_cards, view_holdings, seq, where)
        if isinstance(plan, Refusal) or plan.already_done:
            break
        size += len(plan.writes) + 1
        if size > max_messages and plans:
            break
        for w in plan.writes:
            staged[w.card] = evolve(view_cards[w.card], w.event)  # type: ignore[arg-type]
        for p in proposal.placements:
            owner = owner_key(proposal.namespace, proposal.name, p.task)
            taken[owner] = frozenset({a.card for a in p.slices})
        plans.append(plan)
    return plans
