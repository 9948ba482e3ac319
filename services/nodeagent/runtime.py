"""The simulated node runtime as decide/evolve: which tasks run on the hosted nodes, and what to
report now.

`evolve` folds log events into `NodeRuntime` (a commit creates a *run* of a task on one of our
nodes; our own `TaskStarted`/`TaskFinished` mark it; an eviction or job deletion asks it to
stop). `decide(state, now)` is the only place that says what the node reports: start committed
runs, finish runs whose `tessera.io/duration` has elapsed, kill runs asked to stop. The shell
passes wall time in; everything else comes from events, so a test drives it with virtual time.

Idempotency: a run is identified by the commit that created it (`cause`: the commit's message
id, or `seq:<n>`), so a redelivered commit is a no-op and a re-placed task (evicted, then placed
again) is a new run. A second commit of the proposal that created the run (allocators before
issue 12 wrote such, once the duplicate window had passed) is no new run either. Emissions carry message ids derived from the run, so even two agents that
race to report the same run produce one log entry in JetStream's duplicate window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from immutables import Map

from contracts.base import Event
from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUpdated,
    PlacementCommitted,
    TaskFinished,
    TaskStarted,
)
from contracts.workloads import JobSpec
from services.core.retention import DEFAULT_KEEP_FINISHED, ended
from services.core.scheduling.snapshot import POD_DELETED

#: Exit code of a task stopped by the runtime (SIGKILL), as kubelet reports it.
KILLED = 137

JobKey = tuple[str, str]  # (namespace, job)
TaskKey = tuple[str, str, str]  # (namespace, job, task)


@dataclass(frozen=True, slots=True)
class TaskProfile:
    """What a simulated run of one pod does: run `duration` s (None = forever), exit with code."""

    duration: float | None = None
    exit_code: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    namespace: str
    job: str
    task: str
    node: str
    cause: str  # the commit that created this run
    proposal: int = 0  # the proposal that commit answered (0: unknown, an older writer)
    profile: TaskProfile = TaskProfile()
    started_at: float | None = None
    finished: bool = False
    stop: str = ""  # "evicted" | "deleted" | POD_DELETED: asked to stop, not yet reported
    #: the event that asked it to stop: its kill is that event's consequence (trace and
    #: causation), not the commit's — a deletion's kill sat under a commit minutes old
    stop_cause: str = ""

    @property
    def key(self) -> TaskKey:
        return (self.namespace, self.job, self.task)

    @property
    def ends_at(self) -> float | None:
        if self.started_at is None or self.profile.duration is None:
            return None
        return self.started_at + self.profile.duration

    def msg_id(self, what: str) -> str:
        return f"{self.cause}/{self.task}/{what}"


@dataclass(frozen=True, slots=True)
class NodeRuntime:
    """Persistent maps (`immutables.Map`: O(log n) updates that share structure) keep `evolve`
    pure without copying every run on every event; `todo` and `ends` index the runs `decide`
    must look at, so a report costs O(runs that need one), not O(all runs)."""

    nodes: frozenset[str]
    profiles: Map[JobKey, Mapping[str, TaskProfile]] = field(default_factory=Map)
    runs: Map[TaskKey, Run] = field(default_factory=Map)  # current run of each task
    todo: Map[TaskKey, bool] = field(default_factory=Map)  # to start, or asked to stop
    ends: Map[TaskKey, float] = field(default_factory=Map)  # running, with a finite duration
    #: ended jobs, oldest first: beyond `keep` a job's profiles and finished runs are forgotten
    #: (a run still stopping is dropped when it finishes)
    ended: tuple[JobKey, ...] = ()
    keep: int = DEFAULT_KEEP_FINISHED


@dataclass(frozen=True, slots=True)
class Emission:
    """One event to append, with its deterministic message id."""

    msg_id: str
    event: TaskStarted | TaskFinished
    #: what it answers, whose trace it continues: the run's commit, or the stop's event
    cause: str = ""


def pod_profiles(spec: JobSpec) -> dict[str, TaskProfile]:
    """Pod name → profile, naming pods as the scheduler does (`<job>-<task>-<i>` or explicit)."""
    out: dict[str, TaskProfile] = {}
    for t in spec.tasks:
        names = t.pod_names or tuple(f"{spec.name}-{t.name}-{i}" for i in range(t.replicas))
        for pod in names:
            out[pod] = TaskProfile(duration=t.duration, exit_code=t.exit_code)
    return out


def evolve(state: NodeRuntime, event: Event, cause: str = "") -> NodeRuntime:
    """Fold one log event; `cause` identifies it (its message id or seq): a
    `PlacementCommitted`'s names the run it creates, an eviction's or deletion's the stop."""
    match event:
        case JobSubmitted(spec=spec):
            job = (spec.namespace, spec.name)
            profiles = state.profiles.set(job, pod_profiles(spec))
            if job in state.ended:  # submitted again: live, not to be forgotten
                return replace(state, profiles=profiles, ended=tuple(k for k in state.ended if k != job))
            return replace(state, profiles=profiles)
        case JobUpdated(spec=spec) if (spec.namespace, spec.name) in state.profiles:
            # added pods' profiles; a removed pod keeps its run until it is stopped
            job = (spec.namespace, spec.name)
            return replace(state, profiles=state.profiles.set(job, {**state.profiles[job], **pod_profiles(spec)}))
        case PlacementCommitted():
            return _committed(state, event, cause)
        case TaskStarted():
            run = state.runs.get((event.namespace, event.name, event.task))
            if run is None or run.started_at is not None or run.finished:
                return state
            return _put(state, replace(run, started_at=event.at))
        case TaskFinished():
            run = state.runs.get((event.namespace, event.name, event.task))
            if run is None or run.finished:
                return state
            job = (event.namespace, event.name)
            if job not in state.profiles and job not in state.ended:  # its job was forgotten
                return _drop(state, [run.key])
            return _put(state, replace(run, finished=True))
        case JobPhaseChanged() if ended(event):
            return _ended(state, (event.namespace, event.name))
        case EvictionRequested():
            run = state.runs.get((event.namespace, event.name, event.task))
            if run is None or run.finished or run.stop:
                return state
            # a pod deleted by a user (`tessera delete pod`) is reported as the node agent on a
            # cluster reports one: deleted, so the job's PodEvicted policies answer it; other
            # evictions are the scheduler's or a restart's, which need no policy
            stop = POD_DELETED if event.reason == POD_DELETED else "evicted"
            return _put(state, replace(run, stop=stop, stop_cause=cause))
        case JobDeleted():
            job = (event.namespace, event.name)
            for key, run in state.runs.items():
                if key[:2] == job and not run.finished and not run.stop:
                    state = _put(state, replace(run, stop="deleted", stop_cause=cause))
            if job in state.profiles:
                state = replace(state, profiles=state.profiles.delete(job))
            return _ended(state, job)
    return state


def _ended(state: NodeRuntime, job: JobKey) -> NodeRuntime:
    """The job ended: the newest of the ended; the oldest beyond `keep` are forgotten."""
    order = (*(k for k in state.ended if k != job), job)
    cut = max(0, len(order) - max(0, state.keep))
    forget, order = order[:cut], order[cut:]
    state = replace(state, ended=order)
    if not forget:
        return state
    gone = set(forget)
    profiles = state.profiles
    for key in forget:
        if key in profiles:
            profiles = profiles.delete(key)
    state = replace(state, profiles=profiles)
    return _drop(state, [k for k, run in state.runs.items() if k[:2] in gone and run.finished])


def _drop(state: NodeRuntime, keys: list[TaskKey]) -> NodeRuntime:
    runs, todo, ends = state.runs, state.todo, state.ends
    for key in keys:
        runs = runs.delete(key)
        if key in todo:
            todo = todo.delete(key)
        if key in ends:
            ends = ends.delete(key)
    return replace(state, runs=runs, todo=todo, ends=ends)


def _committed(state: NodeRuntime, event: PlacementCommitted, cause: str) -> NodeRuntime:
    mine = [p for p in event.placements if p.node in state.nodes]
    if not mine:
        return state
    profiles = state.profiles.get((event.namespace, event.name), {})
    for p in mine:
        key = (event.namespace, event.name, p.task)
        current = state.runs.get(key)
        if current is not None and current.cause == cause:
            continue  # the same commit again (redelivery, replay)
        if current is not None and event.proposal_seq and current.proposal == event.proposal_seq:
            continue  # a second commit of the same proposal (older allocators wrote some)
        state = _put(state, Run(
            namespace=event.namespace, job=event.name, task=p.task, node=p.node, cause=cause,
            proposal=event.proposal_seq, profile=profiles.get(p.task, TaskProfile()),
        ))  # fmt: skip
    return state


def _put(state: NodeRuntime, run: Run) -> NodeRuntime:
    key = run.key
    todo, ends = state.todo, state.ends
    if not run.finished and (run.started_at is None or run.stop):
        todo = todo.set(key, True)
    elif key in todo:
        todo = todo.delete(key)
    end = None if run.finished else run.ends_at
    if end is not None:
        ends = ends.set(key, end)
    elif key in ends:
        ends = ends.delete(key)
    return replace(state, runs=state.runs.set(key, run), todo=todo, ends=ends)


def decide(state: NodeRuntime, now: float) -> list[Emission]:
    """Everything the hosted nodes must report at `now`, in a deterministic order.

    A run asked to stop before it started is reported finished without a start (the pod never
    ran); a run whose duration elapsed finishes at its end time, not at `now`, so a late check
    (a slow loop, a restart) does not stretch the simulated run.
    """
    out: list[Emission] = []
    due = {k for k, end in state.ends.items() if end <= now}
    for key in sorted(due.union(state.todo.keys())):
        run = state.runs[key]
        if run.finished:
            continue
        if run.stop:
            out.append(_finish(run, KILLED, run.stop, now, run.stop_cause or run.cause))
            continue
        if run.started_at is None:
            started = TaskStarted(
                namespace=run.namespace, name=run.job, task=run.task, node=run.node, at=now
            )
            out.append(Emission(run.msg_id("started"), started, run.cause))
            run = replace(run, started_at=now)
        end = run.ends_at
        if end is not None and end <= now:
            out.append(_finish(run, run.profile.exit_code, "", end))
    return out


def _finish(run: Run, exit_code: int, reason: str, at: float, cause: str = "") -> Emission:
    event = TaskFinished(
        namespace=run.namespace,
        name=run.job,
        task=run.task,
        node=run.node,
        exit_code=exit_code,
        reason=reason,
        at=at,
    )
    return Emission(run.msg_id("finished"), event, cause or run.cause)


def next_deadline(state: NodeRuntime) -> float | None:
    """When `decide` will next have something to say without a new event (None: never)."""
    return min(state.ends.values(), default=None)


def running(state: NodeRuntime) -> list[Run]:
    """Runs started and not finished (for status queries and tests)."""
    return [r for r in state.runs.values() if r.started_at is not None and not r.finished]
