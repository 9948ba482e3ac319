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
    # two of the card's split count: HAMi counts a device per container, the kubelet sees
    # split-count devices per card
    assert (state.usage.memory_used, state.usage.cores_used, state.usage.slices_used) == (8000, 20, 2)
    assert plan.committed.placements[0].slices == proposal(3000, 5000).placements[0].slices  # per container
    (release,) = plan_release({"ns/j/p"}, {"GPU-0": state}, {"ns/j/p": frozenset({"GPU-0"})}, "finished")
    assert evolve(state, release.event).usage.memory_used == 0


def test_the_sum_is_held_to_the_cards_memory() -> None:
    cards = {"GPU-0": CardState(uuid="GPU-0", spec=CARD)}
    refused = plan_commit(proposal(30000, 20000), cards, {})
    assert isinstance(refused, Refusal) and "CardInsufficientMemory" in refused.reason, refused


def test_a_shared_card_counts_each_container_against_its_split_count() -> None:
    """Counted as one slot, a two-container pod left room for a third container on a card the
    kubelet advertises two devices of: bound, that pod failed the kubelet's admission."""
    two = CardSpec(uuid="GPU-0", node="n1", index=0, type="NVIDIA-A100", vendor="nvidia", memory=40960,
                   cores=100, split_count=2)  # fmt: skip
    plan = plan_commit(proposal(3000, 5000), {"GPU-0": CardState(uuid="GPU-0", spec=two)}, {})
    assert isinstance(plan, CommitPlan), plan
    state = evolve(CardState(uuid="GPU-0", spec=two), plan.writes[0].event)
    other = PlacementProposed(namespace="ns", name="k", based_on=0, placements=(TaskPlacement(
        task="q", node="n1", slices=(SliceAssignment(card="GPU-0", node="n1", slice=SliceSpec(kind="soft", memory=1000)),)),))  # fmt: skip
    refused = plan_commit(other, {"GPU-0": state}, {})
    assert isinstance(refused, Refusal) and "CardTimeSlicingExhausted: 2/2" in refused.reason, refused


def test_a_pod_hami_placed_is_booked_with_its_init_containers_at_their_peak() -> None:
    """HAMi books a card at max(init peak, app sum); its annotation lists the init containers'
    slots first. Summed with the app's, a 20000 MB init beside a 30000 MB app read as 50000: a
    whole card, refused beside another pod's 5000 MB — the running pod booked nothing."""
    from contracts import hami

    annotations = {hami.NVIDIA_ALLOCATED: "GPU-0,NVIDIA,20000,0:;GPU-0,NVIDIA,30000,0:;"}
    (a,) = hami.annotated_slices("n1", annotations, init_containers=1)
    assert (a.slice.memory, a.slice.slots) == (30000, 1)
    (b,) = hami.annotated_slices("n1", {hami.NVIDIA_ALLOCATED: "GPU-0,NVIDIA,3000,0:;GPU-0,NVIDIA,5000,0:;"})
    assert (b.slice.memory, b.slice.slots) == (8000, 2)
