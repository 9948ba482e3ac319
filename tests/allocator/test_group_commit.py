"""Runs of proposals commit in one atomic batch, with the same outcome as one at a time: every
fitting proposal committed once, the over-subscribing one refused, ledgers sound."""

from __future__ import annotations

import asyncio

from contracts.events import CardRegistered, PlacementCommitted, PlacementRejected, SliceReserved
from services.allocator.service import Allocator
from services.core.ledger import check_invariants
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import VIR05, ascend_node, decoded, proposal, put


async def run_until_answered(alloc: Allocator, answers: int) -> list:
    log = alloc.log
    stopping = asyncio.Event()
    task = asyncio.create_task(alloc.service.run(stopping, poll=0.05))
    try:
        async with asyncio.timeout(30):
            while True:
                jobs = decoded([m async for m in log.replay(1, log.subjects.all_jobs())])
                done = [e for e in jobs if isinstance(e, PlacementCommitted | PlacementRejected)]
                if len(done) >= answers:
                    return jobs
                await asyncio.sleep(0.02)  # polling the log, the observable outcome
    finally:
        stopping.set()
        await task


async def test_a_run_of_proposals_commits_in_one_batch(event_log: EventLog) -> None:
    s = event_log.subjects
    await put(event_log, s.node("n1"), ascend_node("n1", cards=2))
    # 8 vir05 slots on two cards: 8 one-slot jobs fit, the 9th (card 0 again) does not
    for i in range(9):
        await put(event_log, s.job("default", f"j{i}"), proposal(f"j{i}", "n1", [i % 2 if i < 8 else 0], VIR05))
    alloc = Allocator(event_log)
    await alloc.recover()
    events = await run_until_answered(alloc, 9)
    committed = [e.name for e in events if isinstance(e, PlacementCommitted)]
    rejected = [e for e in events if isinstance(e, PlacementRejected)]
    assert sorted(committed) == [f"j{i}" for i in range(8)]
    assert [r.name for r in rejected] == ["j8"] and "n1-Ascend910B3-0" in rejected[0].reason
    assert alloc.commits == 8
    assert alloc.group_commits >= 2  # at least one batch carried several gangs
    cards = decoded([m async for m in event_log.replay(1, s.all_cards())])
    reserved = [e for e in cards if isinstance(e, SliceReserved)]
    assert len(reserved) == 8 and len({e.owner for e in reserved}) == 8
    for state in alloc.cards.values():
        assert check_invariants(state) == []
        assert state.usage.slices_used == 4


async def test_a_burst_of_registrations_registers_each_card_once_in_few_batches(event_log: EventLog) -> None:
    """A cluster's start: node after node registered, one of them again with a card more (the
    run ends there; it goes one by one). Every card is registered exactly once."""
    s = event_log.subjects
    for i in range(6):
        await put(event_log, s.node(f"n{i}"), ascend_node(f"n{i}", cards=2))
    await put(event_log, s.node("n1"), ascend_node("n1", cards=3))
    alloc = Allocator(event_log)
    await alloc.recover()
    stopping = asyncio.Event()
    task = asyncio.create_task(alloc.service.run(stopping, poll=0.05))
    cards = []
    try:
        async with asyncio.timeout(30):
            async for msg in event_log.follow(1, s.all_cards()):  # the log's own news, awaited
                cards += decoded([msg])
                if len(cards) == 13:
                    break
    finally:
        stopping.set()
        await task
    cards += decoded([m async for m in event_log.replay(cards and 1, s.all_cards())][13:])  # none more
    registered = [e.card.uuid for e in cards if isinstance(e, CardRegistered)]
    assert len(registered) == len(set(registered)) == 13
    assert "n1-Ascend910B3-2" in registered
    assert alloc.group_registrations >= 2
    assert all(alloc.cards[u].spec is not None and check_invariants(alloc.cards[u]) == [] for u in registered)
