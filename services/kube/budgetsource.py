"""The cluster's PodDisruptionBudgets onto the log: `DisruptionBudgetChanged` (its selector,
`status.disruptionsAllowed` and `disruptedPods`: services/core/workload/disruption.py) on its
`pdb` subject, `DisruptionBudgetDeleted` once gone — also one deleted while admission was away,
as nothing else writes these subjects (objectsource.py). The `pdb` plugin keeps preemption and
reclaim within them."""

from __future__ import annotations

from typing import Any

from contracts.base import Event
from contracts.events import DisruptionBudgetDeleted
from services.core.workload.disruption import budget_event
from services.kube.client import Kube, pdbs_path
from services.kube.listwatch import Reflector
from services.kube.objectsource import ObjectSource
from services.runtime.eventlog import EventLog


class BudgetSource(ObjectSource):
    KIND = "PodDisruptionBudget"

    def __init__(self, event_log: EventLog, kube: Kube) -> None:
        super().__init__(event_log, Reflector(kube, pdbs_path()), "pdb", event_log.subjects.all_budgets(),
                         only_source=True)  # fmt: skip

    def changed(self, obj: dict[str, Any]) -> tuple[Event | None, str]:
        event, problems = budget_event(obj)
        return event, "; ".join(f"{where}: {rule}" for where, rule in problems)

    def gone(self, namespace: str, name: str) -> Event:
        return DisruptionBudgetDeleted(namespace=namespace, name=name)
