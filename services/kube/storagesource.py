"""The cluster's storage onto the log: every PersistentVolumeClaim, PersistentVolume and
StorageClass, listed and watched, becomes `ClaimChanged` / `VolumeChanged` /
`StorageClassChanged` (`StorageDeleted` once gone) on its `vol` subject, appended only when the
log says otherwise — the subject's last event is compared, as the node agent compares nodes — so
a restart appends only what changed, with an id derived from the sequence it follows.

It runs in the allocator, whose binder also reads the claims it holds (services/kube/binder.py:
a pod with a WaitForFirstConsumer claim is bound once its claim is). One watch per kind for the
whole cluster, never a request per pod.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from contracts.events import StorageDeleted
from contracts.subjects import subject_of
from services.core.scheduling.storage import CLAIM, CLASS, VOLUME
from services.core.workload.storage import storage_event
from services.kube.client import STORAGE_CLASSES, Kube, claims_path, volumes_path
from services.kube.lastevents import LastEvents, Reports
from services.kube.listwatch import Change, Reflector
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)

_KINDS = {"PersistentVolumeClaim": CLAIM, "PersistentVolume": VOLUME, "StorageClass": CLASS}


class StorageSource:
    def __init__(self, event_log: EventLog, kube: Kube) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.kube = kube
        self.claims = Reflector(kube, claims_path())
        self.volumes = Reflector(kube, volumes_path())
        self.classes = Reflector(kube, STORAGE_CLASSES)
        self.claims_listed = asyncio.Event()  # the binder reads claims only once listed
        #: called with (namespace, name) after a claim changed (the binder's waiters)
        self.on_claim: Callable[[str, str], None] = lambda _ns, _name: None
        self.service = EventService(name="storage", log=event_log, filter_subjects=[], handlers={})
        self.written = LastEvents(event_log, self.service, "kube-vol")
        self.reports = Reports("storage")

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claims.cache.get(f"{namespace}/{name}")

    async def recover(self) -> None:
        known = await self.written.recover(self.subjects.all_storage())
        log.info("storage source: %d claims, volumes and classes in the log", known)

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self._follow(r, kind)) for r, kind in
                 ((self.claims, "PersistentVolumeClaim"), (self.volumes, "PersistentVolume"),
                  (self.classes, "StorageClass"))]  # fmt: skip
        tasks.append(asyncio.create_task(self.reports.run()))
        try:
            await stopping.wait()
        finally:
            await cancel_all(tasks)

    async def _follow(self, reflector: Reflector, kind: str) -> None:
        async for ch in reflector.changes():
            if ch.kind == "synced":
                if reflector is self.claims:
                    self.claims_listed.set()
                continue
            await self.reports.report(f"{kind} {ch.key}", lambda ch=ch, kind=kind: self._report(ch, kind))  # type: ignore[misc]
            if reflector is self.claims:
                ns, _, name = ch.key.partition("/")
                self.on_claim(ns, name)

    async def _report(self, ch: Change, kind: str) -> None:
        obj = {
            **ch.obj,
            "kind": kind,
        }  # a watch's objects carry their kind; a list's items not always
        event: Any
        if ch.kind == "delete":
            meta = obj.get("metadata") or {}
            event = StorageDeleted(kind=_KINDS[kind], name=str(meta.get("name") or ""),
                                   namespace=str(meta.get("namespace") or "") if kind == "PersistentVolumeClaim" else "")  # fmt: skip
        else:
            event = storage_event(obj)
        await self.written.write(subject_of(self.subjects, event), event, kind,
                                 gone=isinstance(event, StorageDeleted))
