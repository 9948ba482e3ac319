"""One kind of API object mirrored onto the log, each its own subject: listed and watched, its
event appended when it says something the subject's last event does not (lastevents.py), so a
status update that changes nothing Tessera reads writes nothing, and a relist after a restart
appends only what changed. A subclass names its Reflector (the path literal: tests/test_chart.py
reads the RBAC the code needs from it) and its translation; an object the translation refuses
is logged and skipped, never half-applied."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from contracts.base import Event
from contracts.subjects import subject_of
from services.kube.lastevents import UNDECODED, LastEvents, Reports
from services.kube.listwatch import Change, Reflector
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)


class ObjectSource:
    #: the object's kind, in logs and message ids
    KIND = ""

    def __init__(self, event_log: EventLog, reflector: Reflector, name: str, everything: str,
                 only_source: bool = False) -> None:  # fmt: skip
        """`everything`: the subjects' wildcard; `only_source`: no one else writes them, so one
        the log holds and the first list lacks was deleted while this service was away."""
        self.subjects = event_log.subjects
        self.reflector, self.everything, self.only_source = reflector, everything, only_source
        self.service = EventService(name=name, log=event_log, filter_subjects=[], handlers={})
        self.written = LastEvents(event_log, self.service, f"kube-{name}")
        self.reports = Reports(self.KIND or name)

    def changed(self, obj: dict[str, Any]) -> tuple[Event | None, str]:
        """The event for the object, or why it cannot be read."""
        raise NotImplementedError

    def gone(self, namespace: str, name: str) -> Event:
        raise NotImplementedError

    async def recover(self) -> None:
        n = await self.written.recover(self.everything)
        log.info("%s source: %d in the log", self.KIND, n)

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self._follow()), asyncio.create_task(self.reports.run())]
        try:
            await stopping.wait()
        finally:
            await cancel_all(tasks)

    async def _follow(self) -> None:
        async for ch in self.reflector.changes():
            if ch.kind == "synced":
                await self.reports.report(" listed", self._gone_while_away)
            else:
                await self.reports.report(ch.key, lambda ch=ch: self._report(ch))  # type: ignore[misc]

    async def _gone_while_away(self) -> None:
        if not self.only_source:
            return
        listed = {(str((o.get("metadata") or {}).get("namespace") or ""), str((o.get("metadata") or {}).get("name") or ""))
                  for o in self.reflector.cache.values()}  # fmt: skip
        for last, _seq in list(self.written.last.values()):
            if last is UNDECODED:
                continue  # whose it is, its body would say: its object's next change writes over it
            key = (getattr(last, "namespace", ""), getattr(last, "name", ""))
            if type(last) is not type(self.gone(*key)) and key not in listed:
                gone = self.gone(*key)
                await self.written.write(subject_of(self.subjects, gone), gone, self.KIND, gone=True)

    async def _report(self, ch: Change) -> None:
        meta = ch.obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if ch.kind == "delete":
            gone = self.gone(ns, name)
            await self.written.write(subject_of(self.subjects, gone), gone, self.KIND, gone=True)
            return
        event, problem = self.changed(ch.obj)
        if event is None:
            log.warning("%s %s/%s not read: %s", self.KIND, ns, name, problem)
            return
        await self.written.write(subject_of(self.subjects, event), event, self.KIND, gone=False)
