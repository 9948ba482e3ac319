"""Pods that already run are booked, not placed (issue: a restart, a migration from HAMi or
Volcano, pods placed before Tessera): an `existing` proposal names the node; its slices come
from HAMi's `-devices-allocated` annotations (memory and cores per card, decoded at the edge),
else from fitting the pod's requests on that node's free cards. Pure: ledgers in, a proposal with
every slice resolved (or the reason it cannot be booked) out; `plan_commit` then books it like
any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

import msgspec

from contracts import hami
from contracts.events import PlacementProposed, RunningTask, SliceAssignment, TaskPlacement
from contracts.owners import owner_key
from services.allocator.commit import Refusal
from services.core.devices import VendorRegistry
from services.core.devices.fit import DeviceConfig
from services.core.holdback import Unfitted, book_running, unfitted_warning
from services.core.ledger import CardState, Rejection, ReserveSlice, decide, evolve, per_card


def resolve_existing(
    proposal: PlacementProposed,
    cards: Mapping[str, CardState],
    node_cards: Mapping[str, Sequence[str]],
    vendors: VendorRegistry,
    holdings: Mapping[str, AbstractSet[str]] | None = None,
    config: DeviceConfig | None = None,
    annotations: Mapping[str, Mapping[str, str]] | None = None,
    warnings: list[Unfitted] | None = None,
) -> PlacementProposed | Refusal:
    """`holdings` (owner → cards): a pod booked already (with its node's registration) keeps
    exactly what it holds. `annotations` (node → its annotations): requests are fitted in the
    node's real mode (hami-core). A pod that runs but does not fit keeps its vendors' cards on
    its node out of use (`holdback_slices`), and `warnings` gets a line naming it and its node."""
    staged: dict[str, CardState] = {}
    placements: list[TaskPlacement] = []
    for p in proposal.placements:
        slices: list[SliceAssignment] = []
        held = (holdings or {}).get(owner_key(proposal.namespace, proposal.name, p.task), ())
        if held:
            for card in sorted(held):
                state = cards[card]
                s = state.slice_of(owner_key(proposal.namespace, proposal.name, p.task))
                if s is not None:
                    slices.append(SliceAssignment(card=card, node=p.node, slice=s))
            placements.append(msgspec.structs.replace(p, slices=tuple(slices), fit=()))
            continue
        if p.slices:
            for a in p.slices:
                state = staged.get(a.card) or cards.get(a.card)
                if state is None or state.spec is None:
                    if not _registered(p.node, cards, node_cards):
                        return Refusal(not_registered_yet(p.task, p.node))
                    return Refusal(f"pod {p.task}: card {a.card} is not registered on {p.node}")
                slices.append(msgspec.structs.replace(a, slice=hami.booked_slice(
                    state.spec, a.slice.memory, a.slice.cores, a.slice.template, a.slice.slots)))
        elif p.fit:
            here = [staged.get(u) or cards[u] for u in node_cards.get(p.node, ()) if u in cards]
            if not _registered(p.node, cards, node_cards):
                return Refusal(not_registered_yet(p.task, p.node))
            picked, failed = book_running(here, p.fit, registry=vendors, config=config,
                                          node_annotations=(annotations or {}).get(p.node))  # fmt: skip
            if failed is not None and warnings is not None:
                text = unfitted_warning(proposal.namespace, p.task, p.node, failed, [c for c, _ in picked])
                warnings.append(Unfitted(proposal.namespace, p.task, p.node, text))
            slices = [SliceAssignment(card=c, node=p.node, slice=sl) for c, sl in picked]
        owner = owner_key(proposal.namespace, proposal.name, p.task)
        for a in per_card(tuple(slices)):  # later pods of this proposal see these slices taken
            state = staged.get(a.card) or cards[a.card]
            got = decide(state, ReserveSlice(owner=owner, slice=a.slice))
            if not isinstance(got, Rejection):
                for e in got:
                    state = evolve(state, e)
                staged[a.card] = state
        placements.append(msgspec.structs.replace(p, slices=tuple(slices), fit=()))
    return msgspec.structs.replace(proposal, placements=tuple(placements))


#: the words of a refusal that is not final: the node's registration (which registers its cards,
#: and books its running pods) is still to come — the proposal waits for it
NOT_REGISTERED_YET = "has no registered cards yet"


def not_registered_yet(task: str, node: str) -> str:
    return f"pod {task}: node {node} {NOT_REGISTERED_YET}"


def _registered(node: str, cards: Mapping[str, CardState], node_cards: Mapping[str, Sequence[str]]) -> bool:
    """Whether `node`'s registration has reached the ledgers (one of its cards is registered).
    Admission's `existing` proposal and the node agent's registration are appended by two
    services, in either order: a proposal judged before the registration is not refused for
    cards the registration is about to register and book (refused, the job was never placed
    while its cards stayed booked by the registration — for good, issue rev-sre 1a)."""
    return any((s := cards.get(u)) is not None and s.spec is not None for u in node_cards.get(node, ()))


def running_proposal(node: str, task: RunningTask) -> PlacementProposed:
    """A pod reported running with its node's first registration, as an `existing` proposal."""
    return PlacementProposed(
        namespace=task.namespace, name=task.job, based_on=0, existing=True,
        placements=(TaskPlacement(task=task.task, node=node, slices=task.slices, fit=task.fit),),
    )  # fmt: skip
