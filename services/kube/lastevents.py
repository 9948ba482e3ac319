"""Appending an object's state to its subject only when the log says otherwise: the subject's
last event is kept (read at recovery, then what we wrote) and compared, as the node agent
compares nodes, so a restart or a relist appends only what changed, with an id derived from
the sequence it follows. Used by the sources that mirror API objects onto the log (storage,
quotas)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from contracts.envelope import TYPE, content_id
from contracts.registry import default_registry
from services.runtime.eventlog import Conflict, EventLog
from services.runtime.eventlog.model import StoredMessage
from services.runtime.service import EventService, Outgoing, decode_stored

log = logging.getLogger(__name__)

#: a subject's last event that does not decode: something is there, whatever it says
UNDECODED = object()


class LastEvents:
    def __init__(self, event_log: EventLog, service: EventService, prefix: str) -> None:
        self.log = event_log
        self.service = service
        self.prefix = prefix  # of the message ids (`kube-vol`, `kube-quota`)
        self.registry = default_registry()
        self.last: dict[str, tuple[Any, int]] = {}  # subject -> (its last event, seq)

    async def recover(self, subjects: str) -> int:
        for msg in await self.log.last_per_subject(subjects):
            if msg.headers.get(TYPE, "") in self.registry:
                self.last[msg.subject] = (await self._decoded(msg), msg.seq)
        return len(self.last)

    async def _decoded(self, msg: StoredMessage) -> Any:
        """The event, or `UNDECODED` for a body that does not decode: one bad message raised
        here and failed the service's start, again at every restart. Known by its sequence, the
        next write of its object — its deletion too — follows it."""
        got = await decode_stored(msg, registry=self.registry)
        return UNDECODED if got is None else got

    async def write(self, subject: str, event: Any, kind: str, gone: bool) -> None:
        """Append `event` unless the subject ends with it (or it says `gone` of nothing)."""
        for _attempt in range(5):
            last, after = self.last.get(subject, (None, 0))
            if last == event or (last is None and gone):
                return
            body = self.registry.encode(event)
            mid = f"{self.prefix}:{subject}:{after}:{content_id(kind, body)}"
            result = await self.service.publish(Outgoing(subject, event, after, mid))
            if not isinstance(result, Conflict):
                self.last[subject] = (event, getattr(result, "seq", after))
                return
            msg = await self.log.last(subject)  # another writer: read what is there, decide again
            if msg is not None:
                self.last[subject] = (await self._decoded(msg), msg.seq)


#: seconds before a report that failed (the log out of reach) is made again
RETRY = 1.0


class Reports:
    """Reports of API objects' changes to the log, one at a time, each that fails made again
    after `RETRY` seconds — unless a newer change of that object was reported meanwhile. Before,
    a failed append waited for the object's next change: a claim's Bound never written left its
    pod waiting on it, a deleted quota or budget was enforced on until a restart."""

    def __init__(self, what: str, delay: float = RETRY) -> None:
        self.what = what
        self.delay = delay
        self.failed: dict[str, Callable[[], Awaitable[None]]] = {}  # key → its latest report
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()

    async def report(self, key: str, report: Callable[[], Awaitable[None]]) -> bool:
        """Make `report` (the latest of `key`); False, and made again later, if it failed."""
        async with self._lock:
            return await self._made(key, report)

    async def _made(self, key: str, report: Callable[[], Awaitable[None]]) -> bool:
        try:
            await report()
        except Exception:
            log.exception("%s %s not reported: again in %s s", self.what, key, self.delay)
            self.failed[key] = report
            asyncio.get_running_loop().call_later(self.delay, self._wake.set)
            return False
        self.failed.pop(key, None)
        return True

    async def run(self) -> None:
        """Make the failed ones again, each as its latest, read once the lock is ours: a newer
        report made meanwhile has taken its place, or, done, its entry."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            for key in list(self.failed):
                async with self._lock:
                    if (again := self.failed.get(key)) is not None:
                        await self._made(key, again)
