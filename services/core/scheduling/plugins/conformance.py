"""`conformance` (Volcano `plugins/conformance`): never evict critical pods
(`system-cluster-critical` / `system-node-critical`) or pods in `kube-system`."""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT

CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


class ConformancePlugin:
    name = "conformance"

    def __init__(self, conf: PluginConf) -> None:
        pass

    def on_session_open(self, ssn: Session) -> None:
        pass

    def _filter(self, tasks: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return [
            t for t in tasks
            if t.spec.priority_class not in CRITICAL and t.namespace != "kube-system"
        ], PERMIT  # fmt: skip

    def preemptable(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        return self._filter(preemptees)

    def reclaimable(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]:
        return self._filter(reclaimees)
