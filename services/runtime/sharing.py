"""One durable consumer for every reader of one process (issue 29).

The queue process ran three consumers over the same job events (the queue service, the pod
status writer, the Volcano job controller), the allocator two (itself and the binder): every
event was delivered, parsed, decoded and acknowledged three times over in one process — 15
deliveries per pod for a log of 7 messages per pod. Here the process's main service consumes,
and the other readers ("riders") are handed the same delivery.

Each reader settles its own part as before (ack, nak for a retry, term when it parked the
message on its own dead-letter subject); the message itself is settled once every part is: a
retry wanted by any one redelivers it to all (every handler is idempotent under redelivery —
the kill tests hold them to it), otherwise it is acknowledged. Riders handle in tasks of their
own, so one that waits on the API server (the status writer's first pod list, an eviction)
delays only its own parts, never the main service's; the message stays unacknowledged until it
is done, as it was on the rider's own consumer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from services.runtime.eventlog.model import Delivery, StoredMessage, matcher

log = logging.getLogger(__name__)

Handle = Callable[[Delivery], Awaitable[str]]


class Shared:
    """One delivery and its readers' parts; settles the delivery when the last part does."""

    __slots__ = ("_delay", "_delivery", "_left", "_retry", "decoded")

    def __init__(self, delivery: Delivery, parts: int) -> None:
        self._delivery = delivery
        self._left = parts
        self._retry = False
        self._delay = 0.0
        #: (registry, type, event) of the first reader's decode: events are frozen, so the
        #: others take the same object instead of decoding the body again (a tenth of a
        #: rider's handling in issue 29's profile)
        self.decoded: tuple[object, str, object] | None = None

    def part(self) -> Part:
        return Part(self)

    async def _settled(self, retry: bool, delay: float) -> None:
        self._retry |= retry
        self._delay = max(self._delay, delay)
        self._left -= 1
        if self._left:
            return
        try:
            if self._retry:
                await self._delivery.nak(self._delay)
            else:
                await self._delivery.ack()
        except Exception as exc:  # a connection hiccup: redelivered after ack_wait, harmless
            log.warning("could not settle a shared delivery (%s): it will be redelivered", exc)


class Part:
    """What one reader sees of a shared delivery: a `Delivery` it settles exactly once."""

    __slots__ = ("_done", "_shared", "attempt", "message")

    @property
    def shared(self) -> Shared:
        return self._shared

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._done = False
        self.message: StoredMessage = shared._delivery.message
        self.attempt: int = shared._delivery.attempt

    async def _settle(self, retry: bool, delay: float = 0.0) -> None:
        if not self._done:
            self._done = True
            await self._shared._settled(retry, delay)

    async def ack(self) -> None:
        await self._settle(False)

    async def nak(self, delay: float = 0.0) -> None:
        await self._settle(True, delay)

    async def term(self) -> None:
        await self._settle(False)  # parked by this reader; the others decide for themselves


class Rider:
    """A reader carried by another's consumer: its parts queue up for a task of its own."""

    def __init__(
        self, name: str, handle: Handle, filters: Sequence[str], carrier: Sequence[str]
    ) -> None:
        self.name = name
        self._handle = handle
        self._filters = tuple(filters)
        #: the carrier reads subjects this reader does not: those parts are settled unread
        self._narrower = set(filters) != set(carrier)
        self._matches = matcher(self._filters)
        self._parts: asyncio.Queue[Part] = asyncio.Queue()

    def wants(self, message: StoredMessage) -> bool:
        return not self._narrower or self._matches(message.subject)

    def give(self, part: Part) -> None:
        self._parts.put_nowait(part)

    async def run(self) -> None:
        while True:
            part = await self._parts.get()
            try:
                await self._handle(part)
            except Exception:  # handle() settles and never raises; a bug here must not stop us
                log.exception("%s: a shared delivery failed; it will be redelivered", self.name)
                await part.nak(1.0)
            finally:
                await part.ack()  # no-op when handle settled it


def carriable(filters: Sequence[str], carrier: Sequence[str]) -> bool:
    """A reader can ride on a consumer that reads at least all of its subject patterns."""
    return set(filters) <= set(carrier)
