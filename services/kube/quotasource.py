"""The cluster's ResourceQuotas onto the log: each listed and watched, `QuotaChanged` (its
spec.hard and status.used, services/core/workload/quota.py) on its `quota` subject, and
`QuotaDeleted` once gone — appended only when the log says otherwise (lastevents.py), so the
API server's status updates that change nothing enqueue reads write nothing.

It runs in the admission service, which appends quotas from `tessera apply` too. One watch
for the whole cluster; a quota the workload rules refuse (a bad quantity) is logged and skipped,
never half-applied.
"""

from __future__ import annotations

import asyncio
import logging

from contracts.events import QuotaDeleted
from contracts.subjects import subject_of
from services.core.workload.quota import quota_event
from services.kube.client import Kube, quotas_path
from services.kube.lastevents import LastEvents
from services.kube.listwatch import Change, Reflector
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)

KIND = "ResourceQuota"


class QuotaSource:
    def __init__(self, event_log: EventLog, kube: Kube) -> None:
        self.subjects = event_log.subjects
        self.quotas = Reflector(kube, quotas_path())
        self.service = EventService(name="quota", log=event_log, filter_subjects=[], handlers={})
        self.written = LastEvents(event_log, self.service, "kube-quota")

    async def recover(self) -> None:
        log.info(
            "quota source: %d quotas in the log",
            await self.written.recover(self.subjects.all_quotas()),
        )

    async def run(self, stopping: asyncio.Event) -> None:
        follow = asyncio.create_task(self._follow())
        try:
            await stopping.wait()
        finally:
            await cancel_all([follow])

    async def _follow(self) -> None:
        async for ch in self.quotas.changes():
            if ch.kind == "synced":
                continue
            try:
                await self._report(ch)
            except Exception:
                log.exception("ResourceQuota %s not reported", ch.key)

    async def _report(self, ch: Change) -> None:
        meta = ch.obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if ch.kind == "delete":
            gone = QuotaDeleted(namespace=ns, name=name)
            await self.written.write(subject_of(self.subjects, gone), gone, KIND, gone=True)
            return
        event, refused = quota_event({**ch.obj, "kind": KIND}, with_status=True)
        if event is None:
            log.warning(
                "ResourceQuota %s/%s not read: %s", ns, name, "; ".join(r.line() for r in refused)
            )
            return
        await self.written.write(subject_of(self.subjects, event), event, KIND, gone=False)
