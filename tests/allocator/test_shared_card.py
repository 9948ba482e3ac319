"""Two containers of one pod on one card (HAMi fits each container on its own): the proposal
carries a slice per container — the binding's annotation gives each its own — and the card's
ledger books them as one slice of their sum, checked against the card as any slice is, and
released whole when the task ends."""

from __future__ import annotations

from contracts.devices import CardSpec, SliceSpec
from contracts.events import PlacementProposed, SliceAssignment, SliceReserved, TaskPlacement
from services.allocator.commit import CommitPlan, Refusal, plan_commit, plan_release
from services.core.ledger import CardState, evolve

CARD = CardSpec(uuid="GPU-0", node="n1", index=0, type="NVIDIA-A100", vendor="nvidia", memory=40960,
                cores=100, split_count=10)  # fmt: skip


def proposal(*memories: int) -> PlacementProposed:
    slices = tuple(SliceAssignment(card="GPU-0", node="n1", slice=SliceSpec(kind="soft", memory=m, cores=10))
                   for m in memories)  # fmt: skip
    return PlacementProposed(namespace="ns", name="j", based_on=0, placements=(TaskPlacement(task="p", node="n1", slices=slices),))


def test_two_containers_on_one_card_are_booked_as_their_sum_and_released_whole() -> None:
    cards = {"GPU-0": CardState(uuid="GPU-0", spec=CARD)}
    plan = plan_commit(proposal(3000, 5000), cards, {})
    assert isinstance(plan, CommitPlan), plan
    (write,) = plan.writes
    assert isinstance(write.event, SliceReserved) and write.event.slice.memory == 8000
    state = evolve(cards["GPU-0"], write.event)
    assert (state.usage.memory_used, state.usage.cores_used, state.usage.slices_used) == (8000, 20, 1)
    assert plan.committed.placements[0].slices == proposal(3000, 5000).placements[0].slices  # per container
    (release,) = plan_release({"ns/j/p"}, {"GPU-0": state}, {"ns/j/p": frozenset({"GPU-0"})}, "finished")
    assert evolve(state, release.event).usage.memory_used == 0


def test_the_sum_is_held_to_the_cards_memory() -> None:
    cards = {"GPU-0": CardState(uuid="GPU-0", spec=CARD)}
    refused = plan_commit(proposal(30000, 20000), cards, {})
    assert isinstance(refused, Refusal) and "CardInsufficientMemory" in refused.reason, refused
