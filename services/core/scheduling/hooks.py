"""One narrow Protocol per extension point (STYLE §3; Volcano `framework/session_plugins.go`).

A plugin implements only the hooks it needs; the session collects, per tier, the bound methods
of the plugins that implement a hook and whose `enable*` switch is on (`HOOK_SWITCHES`), and
combines them with that hook's own rule (volcano.md §2.4, implemented in `session.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from services.core.scheduling.status import Status

if TYPE_CHECKING:
    from services.core.scheduling.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
    from services.core.scheduling.session import Session


@runtime_checkable
class Plugin(Protocol):
    name: str

    def on_session_open(self, ssn: Session) -> None: ...


class JobOrder(Protocol):
    def job_order(self, lhs: JobInfo, r: JobInfo) -> int: ...


class QueueOrder(Protocol):
    def queue_order(self, lhs: QueueInfo, r: QueueInfo) -> int: ...


class TaskOrder(Protocol):
    def task_order(self, lhs: TaskInfo, r: TaskInfo) -> int: ...


class VictimQueueOrder(Protocol):
    def victim_queue_order(self, lhs: QueueInfo, r: QueueInfo, preemptor: QueueInfo) -> int: ...


class PrePredicate(Protocol):
    def pre_predicate(self, task: TaskInfo) -> Status | None: ...


class Predicate(Protocol):
    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None: ...


class FuturePredicate(Protocol):
    """A predicate that reads what tasks hold (deviceshare: card slices) also answers for the
    node's future state: the Releasing tasks' holdings and `without`'s free, pipelined ones
    taken. The session asks it through `predicate(..., future=True)` under the predicate's
    own switch; a predicate plugin without it answers the same either way."""

    def predicate_future(
        self, task: TaskInfo, node: NodeInfo, without: Sequence[TaskInfo] = ()
    ) -> Status | None: ...


class NodeOrder(Protocol):
    def node_order(self, task: TaskInfo, node: NodeInfo) -> float: ...


class Preemptable(Protocol):
    def preemptable(
        self, preemptor: TaskInfo, preemptees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]: ...


class Reclaimable(Protocol):
    def reclaimable(
        self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]
    ) -> tuple[list[TaskInfo], int]: ...


class Overused(Protocol):
    def overused(self, queue: QueueInfo) -> bool: ...


class Allocatable(Protocol):
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool: ...


class Preemptive(Protocol):
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool: ...


class JobValid(Protocol):
    def job_valid(self, job: JobInfo) -> str | None: ...


class JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool: ...


class JobPipelined(Protocol):
    def job_pipelined(self, job: JobInfo) -> int: ...


class JobEnqueueable(Protocol):
    def job_enqueueable(self, job: JobInfo) -> int: ...


class JobEnqueued(Protocol):
    def job_enqueued(self, job: JobInfo) -> None: ...


class JobStarving(Protocol):
    def job_starving(self, job: JobInfo) -> bool: ...


class AllocateHandler(Protocol):
    def on_allocate(self, task: TaskInfo) -> None: ...

    def on_deallocate(self, task: TaskInfo) -> None: ...


class SessionCloser(Protocol):
    def on_session_close(self, ssn: Session) -> None: ...


#: hook method → the `enable*` switch that gates it (None: always on), per ApplyPluginConfDefaults.
HOOK_SWITCHES: dict[str, str | None] = {
    "job_order": "enableJobOrder",
    "queue_order": "enableQueueOrder",
    "task_order": "enableTaskOrder",
    "victim_queue_order": None,
    "pre_predicate": "enablePredicate",
    "predicate": "enablePredicate",
    "node_order": "enableNodeOrder",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
    "overused": "enabledOverused",
    "allocatable": "enabledAllocatable",
    "preemptive": "enablePreemptive",
    "job_valid": None,
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "job_starving": "enableJobStarving",
    "on_allocate": None,
    "on_deallocate": None,
    "on_session_close": None,
}
