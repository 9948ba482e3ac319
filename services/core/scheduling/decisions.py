"""What a session concluded (DESIGN §2 "decision"): placements, evictions, unschedulable jobs,
PodGroup phase changes. The shell turns these into `PlacementProposed`, `EvictionRequested`,
`JobUnschedulable` and `JobPhaseChanged` events."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from contracts.events import JobUnschedulable, ReasonGroup, TaskPlacement


@dataclass(frozen=True, slots=True)
class JobPlacement:
    namespace: str
    name: str
    placements: tuple[TaskPlacement, ...]
    pipelined: bool = False  # reserved in-session only (JobPipelined), not to be bound


@dataclass(frozen=True, slots=True)
class Eviction:
    namespace: str
    name: str
    task: str
    reason: str


_NUMBER = re.compile(r"\d+(?:\.\d+)?")

#: Volcano's words for a PodGroup `enqueue` leaves Pending (actions/enqueue.go)
ENQUEUE_REFUSED = "queue resource quota insufficient or cluster overused"


def unschedulable_key(reason: str, why: str) -> str:
    """What must change for a waiting job's `JobUnschedulable` to be appended again (DESIGN §3:
    only on change): the scheduler's reason, or the rule `why` names — not its amounts, which
    move with every placement elsewhere and would append an event per pending job each time.
    The same holds of the gang line a trial adds to an enqueue refusal (trial.py): how many of
    the gang's pods the nodes would take now moves with every other job, its words do not."""
    if reason.startswith(ENQUEUE_REFUSED):
        reason = _NUMBER.sub("#", reason)
    return f"{reason}\x00{_NUMBER.sub('#', why)}"


@dataclass(frozen=True, slots=True)
class Unschedulable:
    namespace: str
    name: str
    reason: str
    node_reasons: Mapping[str, str] = field(default_factory=dict)
    why: str = ""  # the first rule that failed, in words (services/core/scheduling/explain.py)
    plugin: str = ""
    groups: tuple[ReasonGroup, ...] = ()
    nodes: int = 0
    unblock: str = ""
    #: pending tasks left unplaced (Volcano's `unschedule_task_count`)
    tasks: int = 0
    #: why, as one word for a metric label: NotEnqueued (the PodGroup stays Pending),
    #: NotEnoughTasks (the job is not valid: fewer tasks than minAvailable), NotEnoughResources
    code: str = ""

    @property
    def key(self) -> str:
        return unschedulable_key(self.reason, self.why)

    def event(self, based_on: int, session: int) -> JobUnschedulable:
        """The decision as the log records it (the scheduler service and simulate alike)."""
        return JobUnschedulable(
            namespace=self.namespace, name=self.name, reason=self.reason,
            node_reasons=dict(self.node_reasons), why=self.why, plugin=self.plugin,
            groups=self.groups, nodes=self.nodes, unblock=self.unblock, based_on=based_on,
            session=session,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PhaseChange:
    namespace: str
    name: str
    phase: str
    reason: str = ""


@dataclass(frozen=True)
class Decisions:
    based_on: int
    placements: tuple[JobPlacement, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    phases: tuple[PhaseChange, ...] = ()
    queue_allocated: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    queue_deserved: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: Volcano's queue share: max over resources of allocated / deserved (proportion, capacity)
    queue_share: Mapping[str, float] = field(default_factory=dict)
