"""A pod already bound when Tessera starts (a migration from HAMi, a log lost) reaches the
allocator twice: admission's `existing` proposal (its job subject) and the node agent's first
registration of its node, which books the node's running pods with its cards (`running`). The
two services append them in either order. Whatever the order, the pod is booked once, on the
cards its annotations name, and its job is placed (`PlacementCommitted`, existing) — so its end
frees them. Judged before the registration, the proposal was refused ("card … is not
registered"); the registration then booked the cards anyway, and nothing ever placed the job:
Pending for good, every later proposal refused "already placed on cards", the cards held after
the pod ended (issue rev-sre 1a: 4 whole cards leaked)."""

from __future__ import annotations

import msgspec
import pytest

from contracts.events import (
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    RunningTask,
    SliceAssignment,
    TaskFinished,
    TaskPlacement,
)
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import WHOLE, ascend_node, decoded, proposal, put
from tests.allocator.test_allocator import drain
from tests.draining import drain as drained

CARDS = ("n1-Ascend910B3-0", "n1-Ascend910B3-1")


def _annotated() -> tuple[SliceAssignment, ...]:
    """Two whole cards as HAMi's `-devices-allocated` annotation names them (memory, cores)."""
    return tuple(SliceAssignment(card=c, node="n1", slice=WHOLE) for c in CARDS)


def _existing() -> PlacementProposed:
    return PlacementProposed(namespace="default", name="w-9", based_on=0, existing=True,
                             placements=(TaskPlacement(task="w-9", node="n1", slices=_annotated()),))  # fmt: skip


@pytest.mark.parametrize("in_registration", [True, False], ids=["booked-by-registration", "pod-ended-before"])
@pytest.mark.parametrize("order", ["proposal-first", "registration-first"])
async def test_a_bound_pod_is_placed_once_whatever_comes_first(
    event_log: EventLog, order: str, in_registration: bool
) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    alloc.service.retry_delay = 0.002  # the proposal waiting for its node comes back at once
    running = (RunningTask(namespace="default", job="w-9", task="w-9", slices=_annotated()),)
    node = msgspec.structs.replace(ascend_node("n1", cards=4), running=running if in_registration else ())
    if order == "proposal-first":
        await put(event_log, s.job("default", "w-9"), _existing())
        # judged while n1 is not registered: not answered, it waits for the registration
        await drained(alloc.service, quiet=0.05)
        assert decoded([m async for m in event_log.replay(1, s.all_jobs())]) == [_existing()]
        await put(event_log, s.node("n1"), node)
    else:
        await put(event_log, s.node("n1"), node)
        await put(event_log, s.job("default", "w-9"), _existing())
    await drain(alloc)
    jobs = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    assert not [e for e in jobs if isinstance(e, PlacementRejected)], jobs
    committed = [e for e in jobs if isinstance(e, PlacementCommitted)]
    assert [(c.name, c.existing) for c in committed] == [("w-9", True)]
    assert {a.card for a in committed[0].placements[0].slices} == set(CARDS)
    for card in CARDS:
        assert alloc.cards[card].usage.owners == ("default/w-9/w-9",)
    # a scheduler's proposal for the job elsewhere is refused: it is placed already
    await put(event_log, s.job("default", "w-9"), msgspec.structs.replace(proposal("w-9", "n1", [2]), placements=(
        TaskPlacement(task="w-9", node="n1", slices=(SliceAssignment(card="n1-Ascend910B3-2", node="n1", slice=WHOLE),)),)))  # fmt: skip
    await drain(alloc)
    assert alloc.cards["n1-Ascend910B3-2"].usage.owners == ()
    # its end frees the cards
    await put(event_log, s.job("default", "w-9"),
              TaskFinished(namespace="default", name="w-9", task="w-9", node="n1", exit_code=0))  # fmt: skip
    await drain(alloc)
    for card in CARDS:
        assert alloc.cards[card].usage.owners == (), card
