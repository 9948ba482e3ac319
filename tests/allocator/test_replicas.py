"""Two allocators on one durable (two replicas of one Deployment) share its deliveries: the one
that did not commit a pod may be the one that hears it finished, and neither writes every ledger
event (issue 12 item 6). Each follows the log, so the release applies and both views are the
log's. Both backends; the deliveries are handed to the replicas by hand, in the bad order."""

from __future__ import annotations

import asyncio

from contracts.events import SliceReleased, TaskFinished
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import VIR05, ascend_node, decoded, proposal, put
from tests.draining import drain_consumer
from tests.processes import wait_until


async def log_cards(event_log: EventLog) -> dict[str, list[str]]:
    last = await event_log.last_per_subject(event_log.subjects.all_cards())
    return {e.card.uuid if hasattr(e.card, "uuid") else e.card: list(e.usage.owners)  # type: ignore[union-attr]
            for e in decoded(last)}  # fmt: skip


def view(alloc: Allocator) -> dict[str, list[str]]:
    return {c["uuid"]: c["owners"] for c in alloc.card_records()}  # type: ignore[misc]


async def test_a_replica_releases_what_the_other_committed(event_log: EventLog) -> None:
    s = event_log.subjects
    a, b = Allocator(event_log), Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    stopping = asyncio.Event()
    for replica in (a, b):
        await replica.recover()
    followers = [asyncio.create_task(r.background(stopping)) for r in (a, b)]

    async def following() -> bool:
        return a.following and b.following

    await wait_until(following, timeout=5, what="both replicas following the log")
    consumer = await event_log.consumer("allocator", a.service.filter_subjects)
    try:
        assert await a.service.handle(await consumer.next()) == "handled"  # the node's cards
        await put(event_log, s.job("default", "inf"), proposal("inf", "n1", [0], VIR05))
        assert await a.service.handle(await consumer.next()) == "handled"  # a commits
        await put(event_log, s.job("default", "inf"),
                  TaskFinished(namespace="default", name="inf", task="worker-0", node="n1"))  # fmt: skip
        outcomes = await drain_consumer(event_log, consumer, a.service.durable, a.service.filter_subjects,
                                        b.service.handle, quiet=0.5)  # fmt: skip
        assert all(o == "handled" for o in outcomes)  # b: the commit, then the finish

        released = [e for e in decoded([m async for m in event_log.replay()])
                    if isinstance(e, SliceReleased)]  # fmt: skip
        assert [e.owner for e in released] == ["default/inf/worker-0"]

        async def views_are_the_log() -> bool:
            truth = await log_cards(event_log)
            return view(a) == truth and view(b) == truth

        await wait_until(views_are_the_log, timeout=10, what="both replicas' cards = the log's")
    finally:
        stopping.set()
        await asyncio.gather(*followers)
        await consumer.close()
