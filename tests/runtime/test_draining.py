"""The tests' drain (tests/draining.py) on both backends: it ends once the durable has settled
everything its filter holds, without a wait for nothing, and otherwise reads on as the drains
before it did — a redelivery due within `quiet` is handled, one due later is left."""

from __future__ import annotations

import asyncio

import pytest

from contracts.events import NodeLost
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService, Received, TransientError
from tests.allocator.scenario import put
from tests.draining import drain

LONG = 30.0  # a `quiet` no test here may wait out: it ends under `asyncio.timeout(10)` first


def service(log: EventLog, failures: int, retry_delay: float, seen: list[str]) -> EventService:
    """Notes the nodes it handles; its first `failures` deliveries fail (a nak after `retry_delay`);
    node `a`'s loss is followed by an append of node `b`'s, which it handles too."""

    async def on_lost(event: NodeLost, rx: Received) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise TransientError("not now")
        seen.append(event.node)
        if event.node == "a":
            await put(log, log.subjects.node("b"), NodeLost(node="b"), mid="b")

    return EventService("drained", log, [log.subjects.all_nodes()], {NodeLost: on_lost},
                        retry_delay=retry_delay)  # fmt: skip


async def test_a_drain_handles_its_own_appends_and_ends_without_waiting(
    event_log: EventLog,
) -> None:
    seen: list[str] = []
    svc = service(event_log, 0, 0.5, seen)
    async with asyncio.timeout(10):
        assert await drain(svc, quiet=LONG) == []  # nothing in the log
        await put(event_log, event_log.subjects.node("a"), NodeLost(node="a"))
        assert await drain(svc, quiet=LONG) == ["handled", "handled"]
        assert await drain(svc, quiet=LONG) == []  # all settled: nothing again, no wait
    assert seen == ["a", "b"]


@pytest.mark.parametrize("delay", [0.0, 0.05])  # a nak at once, and one with a delay
async def test_a_drain_handles_a_redelivery_due_within_quiet(
    event_log: EventLog, delay: float
) -> None:
    seen: list[str] = []
    svc = service(event_log, 1, delay, seen)
    await put(event_log, event_log.subjects.node("a"), NodeLost(node="a"))
    async with asyncio.timeout(10):
        assert await drain(svc, quiet=LONG) == ["retried", "handled", "handled"]
    assert seen == ["a", "b"]


async def test_a_drain_leaves_a_redelivery_due_after_quiet(event_log: EventLog) -> None:
    seen: list[str] = []
    svc = service(event_log, 1, LONG, seen)
    await put(event_log, event_log.subjects.node("a"), NodeLost(node="a"))
    async with asyncio.timeout(10):
        assert await drain(svc, quiet=0.2) == ["retried"]
        assert seen == []
        # a durable reopened is given what it left unsettled at once (as a restart would be)
        assert await drain(svc, quiet=LONG) == ["handled", "handled"]
    assert seen == ["a", "b"]
