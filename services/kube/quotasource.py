"""The cluster's ResourceQuotas onto the log: `QuotaChanged` (its spec.hard and status.used,
services/core/workload/quota.py) on its `quota` subject, `QuotaDeleted` once gone
(objectsource.py). It runs in the admission service, which appends quotas from `tessera apply`
too (so a quota the first list lacks is not taken for deleted). A quota the workload rules
refuse (a bad quantity) is logged and skipped.
"""

from __future__ import annotations

from typing import Any

from contracts.base import Event
from contracts.events import QuotaDeleted
from services.core.workload.quota import quota_event
from services.kube.client import Kube, quotas_path
from services.kube.listwatch import Reflector
from services.kube.objectsource import ObjectSource
from services.runtime.eventlog import EventLog

KIND = "ResourceQuota"


class QuotaSource(ObjectSource):
    KIND = KIND

    def __init__(self, event_log: EventLog, kube: Kube) -> None:
        super().__init__(event_log, Reflector(kube, quotas_path()), "quota", event_log.subjects.all_quotas())

    def changed(self, obj: dict[str, Any]) -> tuple[Event | None, str]:
        event, refused = quota_event({**obj, "kind": KIND}, with_status=True)
        return event, "; ".join(r.line() for r in refused)

    def gone(self, namespace: str, name: str) -> Event:
        return QuotaDeleted(namespace=namespace, name=name)
