"""The allocator over both log backends: commits, refusals, releases, redelivery, recovery."""

from __future__ import annotations

import pytest

from contracts.events import (
    BindingFailed,
    JobDeleted,
    PlacementCommitted,
    PlacementRejected,
    SliceReleased,
    SliceReserved,
    TaskFinished,
)
from services.allocator.service import Allocator
from services.core.ledger import check_invariants, encode_state
from services.runtime.eventlog import EventLog
from services.runtime.eventlog.memory import MemoryLog
from tests.allocator.scenario import VIR05, ascend_node, decoded, proposal, put
from tests.draining import drain as drained


async def drain(alloc: Allocator) -> list[str]:
    return await drained(alloc.service)


async def test_gang_commit_is_one_batch_and_conflicts_are_refused_with_the_rule(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.job("default", "train"), proposal("train", "n1", [0, 1]))
    await put(event_log, s.job("default", "late"), proposal("late", "n1", [1]))
    outcomes = await drain(alloc)
    # node, two proposals, and its own commit and rejection coming back (folded as answers)
    assert outcomes.count("handled") == 5
    assert set(outcomes) == {"handled"}
    jobs = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    committed = [e for e in jobs if isinstance(e, PlacementCommitted)]
    rejected = [e for e in jobs if isinstance(e, PlacementRejected)]
    assert [c.name for c in committed] == ["train"]
    assert [r.name for r in rejected] == ["late"]
    assert (
        "ExclusiveDeviceAllocateConflict" in rejected[0].reason
        and "n1-Ascend910B3-1" in rejected[0].reason
    )
    # The two card events and the commit are contiguous: they went in as one atomic batch.
    tail = [m async for m in event_log.replay(1)]
    kinds = [m.headers["Tessera-Type"] for m in tail]
    i = kinds.index("SliceReserved")
    assert kinds[i : i + 3] == ["SliceReserved", "SliceReserved", "PlacementCommitted"]
    cards = {c["uuid"]: c for c in alloc.card_records()}
    assert cards["n1-Ascend910B3-0"]["memory_used"] == 65536
    assert cards["n1-Ascend910B3-1"]["owners"] == ["default/train/worker-1"]


async def test_repeated_proposal_commits_once(event_log: EventLog) -> None:
    """The same placement proposed twice: booked once; the second copy is answered (rejected,
    "already placed") rather than left unanswered, which would keep the job outstanding in the
    scheduler for ever."""
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.job("default", "inf"), proposal("inf", "n1", [0, 0, 0], VIR05))
    await put(event_log, s.job("default", "inf"), proposal("inf", "n1", [0, 0, 0], VIR05))  # again
    await drain(alloc)
    events = decoded([m async for m in event_log.replay()])
    assert sum(isinstance(e, PlacementCommitted) for e in events) == 1
    assert sum(isinstance(e, SliceReserved) for e in events) == 3
    rejected = [e for e in events if isinstance(e, PlacementRejected)]
    assert [r.reason for r in rejected] == ["already placed as proposed"]
    card = alloc.cards["n1-Ascend910B3-0"]
    assert card.usage.memory_used == 3 * 16384 and card.usage.cores_used == 15
    assert check_invariants(card) == []


async def test_releases_are_idempotent_and_recovery_rebuilds_identical_ledgers(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.job("default", "inf"), proposal("inf", "n1", [0, 0, 1], VIR05))
    await drain(alloc)  # committed before any task can finish
    done = TaskFinished(namespace="default", name="inf", task="worker-0", node="n1", exit_code=0)
    await put(event_log, s.job("default", "inf"), done, mid="fin-1")
    await put(event_log, s.job("default", "inf"), done, mid="fin-2")  # reported twice
    await drain(alloc)
    assert alloc.cards["n1-Ascend910B3-0"].usage.owners == ("default/inf/worker-1",)
    await put(event_log, s.job("default", "inf"), JobDeleted(namespace="default", name="inf"))
    await drain(alloc)
    events = decoded([m async for m in event_log.replay()])
    assert sum(isinstance(e, SliceReleased) for e in events) == 3
    assert all(c.usage.slices_used == 0 for c in alloc.cards.values())
    fresh = Allocator(event_log)
    await fresh.recover()
    assert {u: encode_state(c) for u, c in fresh.cards.items()} == {
        u: encode_state(c) for u, c in alloc.cards.items()
    }


async def test_a_proposal_superseded_by_an_answered_one_is_rejected_not_committed(
    event_log: EventLog,
) -> None:
    """P1 was never answered, P2 of the same job was (by another allocator): P1 is stale. It is
    answered with a rejection — the scheduler re-plans — and never booked."""
    s = event_log.subjects
    await put(event_log, s.node("n1"), ascend_node("n1"))
    p1 = await put(event_log, s.job("default", "j"), proposal("j", "n1", [0]))
    p2_event = proposal("j", "n1", [1])
    p2 = await put(event_log, s.job("default", "j"), p2_event)
    answer = PlacementRejected(namespace="default", name="j", reason="elsewhere", proposal_seq=p2)
    await put(event_log, s.job("default", "j"), answer)
    alloc = Allocator(event_log)
    await alloc.recover()
    await drain(alloc)
    events = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    assert not any(isinstance(e, PlacementCommitted) for e in events)
    rejected = [e for e in events if isinstance(e, PlacementRejected)]
    assert [r.proposal_seq for r in rejected] == [p2, p1]
    assert "answered after it" in rejected[-1].reason
    assert all(c.usage.slices_used == 0 for c in alloc.cards.values())


async def test_a_deleted_job_releases_its_own_slices_and_no_other_jobs(event_log: EventLog) -> None:
    """Two jobs share a card: deleting one releases exactly its owners (found by the job
    index, kept in step with every card's owners), the other keeps its slices."""
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.job("default", "inf"), proposal("inf", "n1", [0, 0, 1], VIR05))
    await put(event_log, s.job("default", "inf2"), proposal("inf2", "n1", [1, 1], VIR05))
    await drain(alloc)

    def by_job() -> dict[str, set[str]]:
        grouped: dict[str, set[str]] = {}
        for owner in alloc.holdings:
            grouped.setdefault(owner.rsplit("/", 1)[0] + "/", set()).add(owner)
        return grouped

    assert alloc.job_holders == by_job() and set(by_job()) == {"default/inf/", "default/inf2/"}
    await put(event_log, s.job("default", "inf"), JobDeleted(namespace="default", name="inf"))
    await drain(alloc)
    assert alloc.job_holders == by_job() == {"default/inf2/": {"default/inf2/worker-0", "default/inf2/worker-1"}}
    assert sorted(alloc.holdings) == ["default/inf2/worker-0", "default/inf2/worker-1"]


async def test_a_refusal_on_a_card_that_moved_after_the_proposals_view_says_so(event_log: EventLog) -> None:
    """Two proposals decided on one view of a card: the first commits, the second is refused
    — a race, told as a stale view (the scheduler then remembers no refusal of those nodes).
    A proposal decided on the card as it is now and refused still says only the rule."""
    import msgspec

    from contracts.events import STALE_VIEW

    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await drain(alloc)
    card = "n1-Ascend910B3-1"
    seen = alloc.card_seq[card]

    def on_view(job: str, expected: int) -> object:
        p = proposal(job, "n1", [1])
        placements = tuple(msgspec.structs.replace(t, slices=tuple(
            msgspec.structs.replace(a, expected_seq=expected) for a in t.slices)) for t in p.placements)  # fmt: skip
        return msgspec.structs.replace(p, placements=placements)

    await put(event_log, s.job("default", "first"), on_view("first", seen))
    await put(event_log, s.job("default", "raced"), on_view("raced", seen))
    await drain(alloc)
    now = alloc.card_seq[card]
    await put(event_log, s.job("default", "fresh"), on_view("fresh", now))
    await drain(alloc)
    jobs = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    rejected = {e.name: e.reason for e in jobs if isinstance(e, PlacementRejected)}
    assert [e.name for e in jobs if isinstance(e, PlacementCommitted)] == ["first"]
    assert rejected["raced"].startswith(f"{STALE_VIEW}: card {card} changed after the proposal's view (#{seen} → #{now})")
    assert "ExclusiveDeviceAllocateConflict" in rejected["raced"]
    assert not rejected["fresh"].startswith(STALE_VIEW) and "ExclusiveDeviceAllocateConflict" in rejected["fresh"]


async def test_a_binding_failure_delivered_again_after_the_task_was_placed_anew_releases_nothing() -> None:
    """A `BindingFailed` handled, then the task placed again (a new commit), then the failure
    delivered once more — a consumer reset from an ack floor below it, a replica's ack_wait —
    past the duplicate window (this log keeps none): it is about the earlier run, and must not
    free the new commit's slices, which the next proposal would then book over."""
    log = MemoryLog(dedup=False)
    s = log.subjects
    alloc = Allocator(log)
    await put(log, s.node("n1"), ascend_node("n1"))
    await put(log, s.job("default", "j"), proposal("j", "n1", [0]))
    await drain(alloc)
    failed = BindingFailed(namespace="default", name="j", task="worker-0", node="n1", reason="pod gone")
    at = await put(log, s.job("default", "j"), failed, mid="binder:failed")
    await drain(alloc)
    await put(log, s.job("default", "j"), proposal("j", "n1", [1]))
    await drain(alloc)
    assert alloc.cards["n1-Ascend910B3-1"].usage.owners == ("default/j/worker-0",)
    before = await log.last_sequence()
    again = await log.consumer("redelivery", [s.job("default", "j")])
    while (d := await again.next(timeout=0.3)) is not None and d.message.seq != at:
        await d.ack()
    assert d is not None
    assert await alloc.service.handle(d) == "handled"
    assert alloc.cards["n1-Ascend910B3-1"].usage.owners == ("default/j/worker-0",)
    assert not [e for e in decoded([m async for m in log.replay(before + 1)]) if isinstance(e, SliceReleased)]
    assert not [p for c in alloc.cards.values() for p in check_invariants(c)]


async def test_a_gang_over_one_batch_is_answered_and_a_release_over_one_goes_in_several(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nats-server takes at most `max_msgs` messages in one atomic batch (1000 by default): a
    gang needing more card writes than that with its commit could never be committed — the
    refused batch failed its handler, the proposal was parked and the job never answered. It is
    rejected now, naming the limit. A release (a deleted job placed by several commits) needs
    no atomicity across owners: it goes in batches within the limit. Here the limit is 3 (set
    after the first job was committed: as a job placed by several commits comes to hold more)."""
    from services.allocator import service as allocator_service
    from services.runtime.eventlog import memory as memory_log

    log = MemoryLog()
    s = log.subjects
    alloc = Allocator(log)
    await put(log, s.node("n1"), ascend_node("n1", cards=8))
    await put(log, s.job("default", "a"), proposal("a", "n1", [0, 1, 2, 3]))  # committed within the limit
    await drain(alloc)
    assert sum(len(c.usage.owners) for c in alloc.cards.values()) == 4
    monkeypatch.setattr(allocator_service, "MAX_BATCH", 3)
    monkeypatch.setattr(memory_log, "MAX_BATCH", 3)
    await put(log, s.job("default", "big"), proposal("big", "n1", [4, 5, 6]))
    assert set(await drain(alloc)) == {"handled"}  # not parked
    answers = decoded([m async for m in log.replay(1, s.job("default", "big"))])
    rejected = [e for e in answers if isinstance(e, PlacementRejected)]
    assert len(rejected) == 1 and "needs 3 card ledger writes and its commit" in rejected[0].reason
    assert "max_msgs" in rejected[0].reason
    assert await log.dead_letters(alloc.service.durable) == []
    await put(log, s.job("default", "a"), JobDeleted(namespace="default", name="a"))
    assert set(await drain(alloc)) == {"handled"}
    assert all(c.usage.slices_used == 0 for c in alloc.cards.values())
    released = [e for e in decoded([m async for m in log.replay(1)]) if isinstance(e, SliceReleased)]
    assert sorted(e.card for e in released) == [f"n1-Ascend910B3-{i}" for i in range(4)]
