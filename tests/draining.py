"""Handle a service's durable deliveries until its consumer owes nothing more.

The tests' drains read until an empty read of 0.3-0.5 s, so every drain ended on a wait for
nothing (~74 s of tests/queue alone). A drain here ends as soon as the durable's ack floor is at
or past every message of its filter the log holds (the service's own appends while handling
included): each was delivered and settled, so none can come. Until then — a message not yet
delivered, one nak'd (at once or with a delay), an ack the server has not counted yet — it reads
on as those drains did, until nothing came for `quiet` seconds: a redelivery due within that is
handled, one due later is left for the next drain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing

from services.runtime.eventlog import Consumer, Delivery, EventLog
from services.runtime.service import EventService

#: how long a drain reads on while the log still holds something unsettled for it
QUIET = 0.3
#: the short reads it does that in, asking for the ack floor again after each
POLL = 0.02


async def settled(log: EventLog, durable: str, filter_subjects: Sequence[str]) -> bool:
    """Whether `durable` has acknowledged every message of its filter the log holds."""
    floor = await log.ack_floor(durable)
    for pattern in filter_subjects:
        async with aclosing(log.replay(floor + 1, pattern)) as later:
            async for _ in later:
                return False
    return True


async def drain_consumer(
    log: EventLog,
    consumer: Consumer,
    durable: str,
    filter_subjects: Sequence[str],
    handle: Callable[[Delivery], Awaitable[str]],
    quiet: float = QUIET,
) -> list[str]:
    """Hand every delivery of an open `consumer` to `handle` until the log holds nothing more
    for `durable`, or nothing came for `quiet` seconds; the outcomes, in order."""
    loop = asyncio.get_running_loop()
    outcomes: list[str] = []
    while True:
        # `next(timeout=0)`: what already arrived, and the acks the consumer holds sent
        # (JetStream's wait for the next message's) so that the ack floor can count them
        d = consumer.ready() or await consumer.next(timeout=0)
        quiet_until = loop.time() + quiet
        # the server takes in acks apart from answering for the floor: just sent, the last one
        # may not count yet, so the floor is asked again after each short read
        while d is None and not await settled(log, durable, filter_subjects):
            left = quiet_until - loop.time()
            if left <= 0:
                return outcomes  # as before: nothing came for `quiet` seconds
            d = await consumer.next(timeout=min(POLL, left))
        if d is None:
            return outcomes
        outcomes.append(await handle(d))


async def drain(
    service: EventService,
    durable: str | None = None,
    handle: Callable[[Delivery], Awaitable[str]] | None = None,
    quiet: float = QUIET,
) -> list[str]:
    """Drain `service`'s durable (or another `durable` on its filter, as a new replica or a
    fresh process would read) with its own `handle` (or the one given); closes the consumer."""
    durable = durable or service.durable
    consumer = await service.log.consumer(durable, service.filter_subjects)
    try:
        return await drain_consumer(service.log, consumer, durable, service.filter_subjects,
                                    handle or service.handle, quiet)  # fmt: skip
    finally:
        await consumer.close()
