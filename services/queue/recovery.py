"""The queue service's state as a stored value: its `Flow` and the running tasks its node
monitor watches — the two folds of the job subjects a start would otherwise replay from #1."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from contracts.base import Event
from contracts.events import TaskFinished, TaskStarted
from contracts.subjects import Subjects
from contracts.workloads import JobSpec
from services.core.retention import FinishedOrder
from services.core.scheduling.projection_state import ProjectionState, projection_of, state_of
from services.core.taskindex import ByJob
from services.queue.flow import Flow
from services.runtime.eventlog import StoredMessage
from services.runtime.snapshot import shape_of

TaskKey = tuple[str, str, str]


#: bumped when the fold reads the same log into other state (a snapshot taken before would
#: then differ from a full replay): 1 — the restart that fails a job counts a retry; 2 — a
#: restart round ends once its pods stopped, not once they are placed again
FOLD_RULES = 2


@dataclass
class QueueState:
    flow: Flow
    tasks: dict[TaskKey, str] = field(default_factory=dict)  # running task → node (the monitor)


class StoredQueue(msgspec.Struct, frozen=True, kw_only=True):
    projection: ProjectionState
    retries: dict[str, int]
    suspended: dict[str, JobSpec]
    submitted: list[str]  # sets, sorted: the same state gives the same bytes in every process
    restarting: list[str]
    task_seq: dict[tuple[str, str], int]
    finished: list[str]
    tasks: dict[TaskKey, str]
    #: what a restart is stopping, the phase each job shows, the jobs being ended: without
    #: them a service started from a snapshot would wait for nothing or show another phase
    stopping: dict[str, list[str]] = {}
    shown: dict[str, str] = {}
    ending: dict[str, tuple[str, str]] = {}
    #: where each job's last restart round began: failures logged before it are the round's
    round_began: dict[str, int] = {}


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StoredQueue)


class QueueFold:
    name = "queue"
    types: frozenset[str] | None = None

    def __init__(self, subjects: Subjects, keep_finished: int) -> None:
        self.patterns = (subjects.all_queues(), subjects.all_jobs(), subjects.all_nodes())
        self.keep_finished = keep_finished

    def version(self) -> str:
        return f"{shape_of(StoredQueue)} keep-finished={self.keep_finished}+fold{FOLD_RULES}"

    def empty(self) -> QueueState:
        return QueueState(Flow(finished=FinishedOrder(self.keep_finished)))

    def fold(self, state: QueueState, msg: StoredMessage, event: Event) -> QueueState:
        state.flow.apply(msg.seq, event)
        fold_tasks(state.tasks, event)
        return state

    def encode(self, state: QueueState) -> bytes:
        f = state.flow
        return _ENCODER.encode(StoredQueue(
            projection=state_of(f.projection), retries=f.retries, suspended=f.suspended,
            submitted=sorted(f.submitted), restarting=sorted(f.restarting), task_seq=f.task_seq,
            finished=list(f.finished.order), tasks=state.tasks,
            stopping={k: sorted(v) for k, v in sorted(f.stopping.items())}, shown=dict(sorted(f.shown.items())),
            ending=dict(sorted(f.ending.items())), round_began=dict(sorted(f.round_began.items())),
        ))  # fmt: skip

    def decode(self, data: bytes) -> QueueState:
        s = _DECODER.decode(data)
        flow = Flow(projection=projection_of(s.projection), retries=s.retries, suspended=s.suspended,
                    submitted=set(s.submitted), restarting=set(s.restarting), task_seq=ByJob(1, s.task_seq),
                    finished=FinishedOrder(self.keep_finished, dict.fromkeys(s.finished)),
                    stopping={k: set(v) for k, v in s.stopping.items()}, shown=dict(s.shown),
                    ending={k: (v[0], v[1]) for k, v in s.ending.items()}, round_began=dict(s.round_began))  # fmt: skip
        return QueueState(flow, s.tasks)


def fold_tasks(tasks: dict[TaskKey, str], event: Event) -> None:
    """The node monitor's running tasks (`monitor.evolve` for task events), in place."""
    if isinstance(event, TaskStarted):
        tasks[(event.namespace, event.name, event.task)] = event.node
    elif isinstance(event, TaskFinished):
        tasks.pop((event.namespace, event.name, event.task), None)
