"""What a session concluded (DESIGN §2 "decision"): placements, evictions, unschedulable jobs,
PodGroup phase changes. The shell turns these into `PlacementProposed`, `EvictionRequested`,
`JobUnschedulable` and `JobPhaseChanged` events."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

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
    for_job: str = ""  # the job key it makes room for (preempt, reclaim)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")

#: per-node reasons kept in one `JobUnschedulable` (≈ 50 bytes each: 5,000 nodes were ~250 KB
#: per event, 20,000 past NATS' 1 MiB payload); beyond it a sample plus a count per reason
MAX_NODE_REASONS = 64


def bounded_reasons(node_errors: Mapping[str, str]) -> tuple[dict[str, str], dict[str, int]]:
    """(node → reason, reason → nodes): every node when they fit, with no counts (the event is
    what it always was); else, round-robin over the reasons (most common first, nodes by name),
    `MAX_NODE_REASONS` of them, and the exact count of nodes per reason."""
    if len(node_errors) <= MAX_NODE_REASONS:
        return dict(sorted(node_errors.items())), {}
    by_reason: dict[str, list[str]] = {}
    for node, why in sorted(node_errors.items()):
        by_reason.setdefault(why, []).append(node)
    ranked = sorted(by_reason, key=lambda r: (-len(by_reason[r]), r))
    kept: dict[str, str] = {}
    depth = 0
    while len(kept) < MAX_NODE_REASONS:
        for why in ranked:
            nodes = by_reason[why]
            if depth < len(nodes) and len(kept) < MAX_NODE_REASONS:
                kept[nodes[depth]] = why
        depth += 1
    return dict(sorted(kept.items())), {r: len(by_reason[r]) for r in sorted(by_reason)}

#: Volcano's words for a PodGroup `enqueue` leaves Pending (actions/enqueue.go)
ENQUEUE_REFUSED = "queue resource quota insufficient or cluster overused"
#: the plugin holding a job for its namespace's ResourceQuota: its own words are the reason (the
#: queue is not why), and they name the quota (plugins/resourcequota.py)
QUOTA_PLUGIN = "resourcequota"
QUOTA_NAMED = "(ResourceQuota "


GANG_LINE = "tasks in gang unschedulable"


#: the words' keys are asked again at every session for every waiting job, mostly of the same
#: words (regular expressions over each: 8 % of the scheduler in a churn with a backlog)
WORD_KEYS = 4096


@lru_cache(maxsize=WORD_KEYS)
def unschedulable_key(reason: str, why: str) -> str:
    """What must change for a waiting job's `JobUnschedulable` to be appended again (DESIGN §3:
    only on change): the scheduler's reason, or the rule `why` names — not its amounts, which
    move with every placement elsewhere and would append an event per pending job each time.
    The same holds of the gang line a trial adds to an enqueue refusal (trial.py): how many of
    the gang's pods the nodes would take now moves with every other job, its words do not."""
    if reason.startswith(ENQUEUE_REFUSED) or QUOTA_NAMED in reason or "; " in reason.partition(GANG_LINE)[0]:
        reason = _NUMBER.sub("#", reason)  # (an enqueue refusal's words, then the trial's line)
    return f"{reason}\x00{_NUMBER.sub('#', why)}"


#: a trial's group of nodes, its counts before the words: "7 8/8 " (numbers already "#")
_COUNTS = re.compile(r"^(?:#(?:/#)? )+")


@lru_cache(maxsize=WORD_KEYS)
def by_words(key: str) -> str:
    """What must change for an enqueue refusal to be appended again, in records that say
    `verdicts_by_words`: its own words, its rule, and which reasons the gang line a trial adds
    names — not how the nodes fall into groups under them ("…overused; 2/2 tasks in gang
    unschedulable: 0/16 nodes are unavailable: 7 8/8 CardInsufficientMemory, 1 1/8 …"), which
    moves with every other job's placement and end: in a churn of Jobs, twenty events per pod
    (benchmarks.kube_churn). The job's PodGroup keeps the trial's counts as first said."""
    reason, _, why = key.partition("\x00")
    head, sep, trial = reason.partition("; ")
    if not (sep and GANG_LINE in trial):
        return key
    listed = trial.partition(": ")[2].partition(": ")[2].rstrip(".")
    kinds = sorted({_COUNTS.sub("", part).partition(":")[0] for part in listed.split(", ")})
    return f"{head}; {GANG_LINE}: {', '.join(kinds)}\x00{why}"


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
    #: nodes per reason when `node_reasons` is a sample (`bounded_reasons`)
    reason_counts: Mapping[str, int] = field(default_factory=dict)
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
            node_reasons=dict(self.node_reasons), reason_counts=dict(self.reason_counts),
            why=self.why, plugin=self.plugin,
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
    #: each queue's spec capability under the names shares count it by (`QueueShares.canonical`:
    #: a family alias the cluster has one type of, read as that type), as allocated and deserved
    queue_capability: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: the earliest clock at which the same snapshot could be decided otherwise (a plugin's
    #: time rule turns: sla's waiting time, cdp's cooldown); None: time plays no part. Until
    #: then a session over an unchanged log would conclude what this one did.
    revisit_at: float | None = None
