"""What a session concluded (DESIGN §2 "decision"): placements, evictions, unschedulable jobs,
PodGroup phase changes. The shell turns these into `PlacementProposed`, `EvictionRequested`,
`JobUnschedulable` and `JobPhaseChanged` events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from contracts.events import TaskPlacement


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


@dataclass(frozen=True, slots=True)
class Unschedulable:
    namespace: str
    name: str
    reason: str
    node_reasons: Mapping[str, str] = field(default_factory=dict)
    #: pending tasks left unplaced (Volcano's `unschedule_task_count`)
    tasks: int = 0
    #: why, as one word for a metric label: NotEnqueued (the PodGroup stays Pending),
    #: NotEnoughTasks (the job is not valid: fewer tasks than minAvailable), NotEnoughResources
    code: str = ""


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
