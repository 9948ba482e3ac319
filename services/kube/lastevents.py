"""Appending an object's state to its subject only when the log says otherwise: the subject's
last event is kept (read at recovery, then what we wrote) and compared, as the node agent
compares nodes, so a restart or a relist appends only what changed, with an id derived from
the sequence it follows. Used by the sources that mirror API objects onto the log (storage,
quotas)."""

from __future__ import annotations

import logging
from typing import Any

from contracts.envelope import TYPE, content_id
from contracts.registry import default_registry
from services.runtime.eventlog import Conflict, EventLog
from services.runtime.eventlog.model import StoredMessage
from services.runtime.service import EventService, Outgoing, decode_stored

log = logging.getLogger(__name__)


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
        """The event, or None for a body that does not decode: one bad message raised here and
        failed the service's start, again at every restart. Known by its sequence, the next
        write of its object follows it."""
        return await decode_stored(msg, registry=self.registry)

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
