"""Volcano's job controller on a cluster, hosted by the queue service (DESIGN §8).

For a Volcano Job admitted into the log it creates the PodGroup `<job>-<uid>`, and once that
PodGroup has left Pending the pods `<job>-<task>-<index>` (volcano.md §1.3); the lifecycle
decisions stay the queue service's (`flow`): a restart there makes the job's pods an earlier
incarnation, which this controller deletes and creates again with the new retry count; a job
that ended has its unfinished pods deleted (Succeeded and Failed ones are kept, as Volcano's
soft kill keeps them); a deleted Job takes its pods and PodGroup with it (owner references on a
cluster with a garbage collector, explicit deletions without one), and a Job being deleted (a
deletionTimestamp: a foreground deletion, a finalizer) ends its job the same way while nothing
more is made or written for it — its objects are left to the collector. It consumes bus Commands
(`vcctl job suspend|resume`, `vcctl queue operate`, and RestartJob / TerminateJob / CompleteJob)
through the queue service's own command path and deletes them — a Command that does not apply
(its job is not found or has ended) or names an action not served leaves a Warning Event on
its target saying why — and writes the status of Jobs, PodGroups and Queues, only on change; a
queue's status is recomputed only when one of its jobs, or the queue, changed. Beside a Volcano
that stays (no `volcano` among the scheduler names: `volcano.replaces_volcano`), the Queues'
status and the Queue Commands are Volcano's, and so are the Volcano Jobs and their Commands:
admission admits none (Volcano's job controller reconciles every Job whatever its
schedulerName), and the PodGroup its controller makes for a Job of Tessera's name is a job
of its own here, whose status this controller writes as it does an operator's.

Queues on the API server: `root` and `default` are created when absent (Volcano's scheduler
does so at start), so `kubectl get queue` shows them with their status. Tessera has no
admission webhook, so a Queue deleted with kubectl is already gone when the watch says so; what
Volcano's webhook would have refused is undone instead, so that the API server and the log keep
saying the same thing: an empty leaf queue is deleted in the log too (`QueueDeleted`); `root`,
`default`, a queue that still holds jobs (the log would keep them in a queue the cluster no
longer shows, and they could never be admitted again) or one with child queues is created again
from the log's spec, with a Warning Event naming why (the jobs, the children).

Only what Tessera admitted is Tessera's to change (issue 28): a Job the log has no spec for —
another scheduler's, one made before Tessera ran and never admitted, a finished one whose
subject compaction forgot — is never touched, nor its PodGroup or pods; pods are touched only
when their `schedulerName` is one of Tessera's and they are owned by the very Job object (uid)
the log admitted. When that Job object is gone or was replaced under its name, its pods and
PodGroup go with it: the cluster's garbage collector deletes them through their owner
references, so this controller waits `COLLECTOR_GRACE` seconds before doing it itself — on a
cluster without one (an API server alone) it then learns so and from then on deletes them at
once. (Deleting them at once everywhere doubled the collector's requests: 1.3 per pod of a
churn of Volcano Jobs, a quarter of what this controller asked at the default QPS. And where a
collector runs, a Job deleted with `propagationPolicy: Orphan` has its objects' owner references
removed by it first, so its finished pods and its PodGroup are kept as asked; its running pods
still stop, as the job ends in the log.) Every delete carries the object's uid as a
precondition, so an object made anew under the same name is never the one deleted.

Level-triggered and idempotent against the API server: names are deterministic, a create that
meets 409 is "there already", a delete that meets 404 is "gone already", and a status equal to
what the object shows (timestamps aside) is not written. A pod's incarnation is told by the
commit it was bound for (`tessera.io/placement`, from the binding): one bound before the log
last sent its task back to Pending is stale. So a restart of this process mid-restart of a job
recomputes the same actions from the log and the API and creates no pod twice. A pod create the
server refuses (403: PodSecurity admission, a ResourceQuota, a webhook; 422: an invalid pod) is
a `FailedCreate` Warning Event on the Job, naming the pod and the server's message, and the job
backs off as kube's controllers do (`Refused`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from contracts.base import Event
from contracts.events import (
    ALL_EVENTS,
    BindingFailed,
    EvictionRequested,
    JobDeleted,
    JobSubmitted,
    JobUnschedulable,
    JobUpdated,
    PlacementCommitted,
    QueueCreated,
    QueueUpdated,
    TaskFinished,
)
from contracts.workloads import JobSpec, TaskSpec
from services.core.retention import DEFAULT_KEEP_FINISHED, FinishedOrder
from services.core.scheduling import lifecycle
from services.core.scheduling import snapshot as st
from services.core.scheduling.resources import requested
from services.core.stamps import utc_stamp
from services.core.workload import dependson
from services.kube import jobplugins, pods, status, volcano
from services.kube.client import (
    REFUSALS,
    RETRY_CAP,
    TRANSIENT_BACKOFF_CAP,
    Kube,
    KubeError,
    claims_path,
    configmaps_path,
    networkpolicies_path,
    next_retry,
    pods_path,
    retry_cap,
    secret_path,
    services_path,
)
from services.kube.listwatch import Change, Reflector
from services.kube.sshkeys import new_key_pair
from services.kube.volcano import commands_path, jobs_path, podgroups_path, queues_path
from services.queue import flow as fl
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService, Outgoing, Received, replay_decoded
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)

#: bus Command actions → the queue service's commands (what vcctl creates)
COMMANDS = {"AbortJob": "suspend", "ResumeJob": "resume", "OpenQueue": "open", "CloseQueue": "close",
            **{action: verb for verb, action in fl.JOB_ACTIONS.items()}}  # fmt: skip
class Command(Protocol):
    """The queue service's command path (`QueueService.command`)."""

    def __call__(self, action: str, namespace: str, name: str, kind: str = "", uid: str = "") -> Awaitable[Any]: ...


LIVE_POD_PHASES = ("Pending", "Running", "Unknown")
#: a Job's status phases its `ttlSecondsAfterFinished` counts from (Volcano's isJobFinished)
FINISHED_JOB_PHASES = ("Completed", "Failed", "Terminated")
TTL_MARGIN = 0.05  # seconds after a job is due (its ttl, a grace, a period) that it is looked at (timers run early, a bit)
QUEUE_STATUS_PERIOD = 1.0  # seconds between two passes over the queues' status
POD_CREATES_IN_FLIGHT = 16  # a job's pod creations asked at once
RECONCILES_IN_FLIGHT = 8  # jobs reconciled at once (Volcano's controller runs several workers too)
#: seconds between two status writes of one Job or PodGroup when the second changes only its pod
#: counts: each pod's start and end was a write of each (5.4 per pod in a churn at 1000 QPS —
#: more than all else Tessera asks of the API server); a phase or a condition goes at once
COUNTS_PERIOD = 1.0
#: seconds a deleted Job's pods and PodGroup are left to the cluster's garbage collector (which
#: deletes them well within it) before this controller deletes what is left itself
COLLECTOR_GRACE = 5.0


@dataclass
class Refused:
    """A job's pod creates the API server refused (PodSecurity, a ResourceQuota, a webhook: 403;
    an invalid pod: 422) or could not answer (5xx): asked again once `until` has come; `said` is
    the Event last written."""

    delay: float
    until: float
    said: str = ""


class PodGroupWaits(Exception):
    """The job's PodGroup create backs off after a refusal: its reconcile stops there (its pods
    wait for their PodGroup) until the time it is asked again."""


class OwnerIndex:
    """The keys ("ns/name") of a store's objects, by the Job ("ns/job") their owner reference
    names (which Job object, by uid, is the caller's to check)."""

    def __init__(self) -> None:
        self.by_job: dict[str, dict[str, None]] = {}  # (ordered: as they came)
        self.job_of: dict[str, str] = {}

    def put(self, key: str, obj: dict[str, Any] | None) -> None:
        """The object at `key` is now `obj` (None: gone)."""
        owner = volcano.owner_job(obj) if obj is not None else None
        job = f"{key.split('/', 1)[0]}/{owner[0]}" if owner is not None else None
        old = self.job_of.get(key)
        if old == job:
            return
        if old is not None:
            del self.job_of[key]
            keys = self.by_job[old]
            del keys[key]
            if not keys:
                del self.by_job[old]
        if job is not None:
            self.job_of[key] = job
            self.by_job.setdefault(job, {})[key] = None

    def owned(self, job: str) -> list[str]:
        return list(self.by_job.get(job, ()))


class JobController:
    def __init__(self, event_log: EventLog, kube: Kube, command: Command | None = None, *,
                 clock: Callable[[], float] = time.time,
                 scheduler_names: Iterable[str] = ("volcano", "tessera")) -> None:  # fmt: skip
        self.log = event_log
        self.scheduler_names = frozenset(scheduler_names)
        self.subjects = event_log.subjects
        self.kube = kube
        self.command = command
        self.clock = clock
        self.ended_for_deletion: set[str] = set()  # jobs whose Job object went: ended once
        self.ran: set[str] = set()  # jobs whose Job has shown Running (minAvailable pods ran)
        self.gone: dict[str, str] = {}  # job -> the uid of its admitted Job object, found deleted
        #: whether the cluster runs a garbage collector (None: not seen yet); and since when a
        #: deleted Job's objects are left to it
        self.collector: bool | None = None
        self.collector_grace = COLLECTOR_GRACE
        self._left_since: dict[str, float] = {}
        self._written_at: dict[tuple[str, str], float] = {}  # (job, "Job"|"PodGroup") → its last status write
        self.flow = fl.Flow()
        self.specs: dict[str, JobSpec] = {}  # last admitted spec per job (kept after it ends)
        self.verdict: dict[str, JobUnschedulable] = {}
        #: the nodes "0/N nodes are available" counts, NotReady ones too, as the pods' own
        #: FailedScheduling counts them (`status.NodeCounts`)
        self.node_counts = status.NodeCounts()
        self.placed: set[str] = set()  # placed since its last verdict
        #: job → pod → seq of the last eviction or return to Pending: pods bound before it are stale
        self.reset: dict[str, dict[str, int]] = {}
        #: job → its tasks, its last phase shown and retry count, as the log last had them (kept
        #: until the job is forgotten here): the flow forgets an ended job once `keep` more ended
        #: after it, and a controller behind the log (a busy API server) then wrote a Completed
        #: job's status as Pending, for good — the Job never ended for its user
        #: (benchmarks.kube_churn: 7 of 400 Jobs)
        self.last_tasks: dict[str, tuple[st.TaskSnap, ...]] = {}
        self.shown: dict[str, tuple[str, int, str]] = {}  # job → its phase, retries, why it ends
        self.jobs: dict[str, dict[str, Any]] = {}  # "ns/name" → Job object
        self.podgroups: dict[str, dict[str, Any]] = {}  # "ns/name" → PodGroup object
        self.pods: dict[str, dict[str, Any]] = {}  # "ns/name" → pod of a Volcano Job
        #: pods asked for whose watch event has not come yet ("ns/name"): without them each
        #: reconcile before that event asked again, and met 409 (0.25 per pod of a loaded
        #: benchmark); one goes at any event of its name, all at a relist (one made and deleted
        #: between two lists is never seen: it must be asked again)
        self.expected: set[str] = set()
        #: job → the backoff of its refused pod creates; dropped once a create is made, and when
        #: its spec changes (a Job edited to fit what refused it is asked at once)
        self.refused: dict[str, Refused] = {}
        #: job → the delay before its failed reconcile is retried (doubled at each failure in
        #: a row, dropped at a reconcile that goes through)
        self.failing: dict[str, float] = {}
        #: job → the refusal of its PodGroup last said in a `PodGroupError` Event, and when its
        #: PodGroup is asked for again (not at each of the job's events before that)
        self.pg_refused: dict[str, str] = {}
        self.pg_due: dict[str, float] = {}
        #: job → pod → the sequence of the commit that placed it (the id of the `BindingFailed`
        #: that gives its cards back when its pod is refused: one per commit)
        self.commit_seq: dict[str, dict[str, int]] = {}
        #: job → pod → the sequence of the `existing` commit that took its pod as it was bound
        #: (another log placed it: `tessera up --fresh`, a migration from Volcano)
        self.adopted: dict[str, dict[str, int]] = {}
        #: the pods and PodGroups each Job owns: a reconcile walked every pod of the cluster's
        #: Volcano Jobs to find its own — two thirds of the queue process with 500 Jobs of 8
        #: (benchmarks.k8s --shapes vcjob)
        self.pod_owners, self.podgroup_owners = OwnerIndex(), OwnerIndex()
        self.queues: dict[str, dict[str, Any]] = {}
        self.watermark = 0
        self.folded_to = 0  # the last message folded by this process (redeliveries are not folded again)
        self.read_seq = 0  # the log folded up to here (stamped on the pods made: `MADE_AFTER`)
        self.dirty: set[str] = set()
        self.dirty_queues: set[str] = set()  # queues whose status may have changed
        self.deleted_queues: dict[str, dict[str, Any]] = {}  # Queue objects deleted on the API
        self._wake = asyncio.Event()
        self._in_flight = asyncio.Semaphore(RECONCILES_IN_FLIGHT)
        self._reconciling: set[str] = set()  # jobs a task reconciles now
        self._reconciles: set[asyncio.Task[None]] = set()
        self.synced: dict[str, asyncio.Event] = {k: asyncio.Event() for k in ("job", "podgroup", "pod", "queue")}
        self.pg_specs: dict[str, dict[str, Any]] = {}  # job → its PodGroup's spec fields last patched
        #: deleted jobs, oldest first: what this process holds of each (its spec, pods' resets,
        #: tasks, PodGroup patch) goes once `keep` more were deleted after it — kept that long
        #: for a late reconcile of the job, dropped then, or a long-lived controller grew by
        #: every job the cluster ever ran (the log's own retention never reached these)
        self.deleted: FinishedOrder[str] = FinishedOrder(DEFAULT_KEEP_FINISHED)
        #: job → (Job uid, the objects as last written, (kind, name) → the object's uid): what the
        #: Job's plugins (svc) have beside its pods, made or found owned by it in this process
        self.plugin_made: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], dict[tuple[str, str], str]]] = {}
        self.plugin_spec_seen: dict[str, tuple[str, object]] = {}  # job → (uid, generation) written for
        self._ttl_deleted: dict[str, str] = {}  # job → the uid of the Job object its ttl deleted
        self._due: dict[str, float] = {}  # job → when its timer marks it (`_mark_at`)
        self._queues_at = float("-inf")  # loop time of the last queue status pass
        self._queues_due = False  # a pass is scheduled (`_queue_pass`)
        self.writes = 0
        self.service = EventService(
            name="kube-jobs", log=event_log,
            filter_subjects=[self.subjects.all_queues(), self.subjects.all_jobs(), self.subjects.all_nodes()],
            handlers=dict.fromkeys(ALL_EVENTS, self.on_event),  # type: ignore[arg-type]
        )  # fmt: skip

    # --- the log -----------------------------------------------------------------------------

    def fold(self, seq: int, event: Event) -> None:
        key = fl.job_key(event)
        tasks = self.flow.projection.tasks.get(key) if key is not None else None  # (as they stood)
        self.flow.apply(seq, event)
        self.node_counts.fold(event)
        self.read_seq = max(self.read_seq, seq)
        self._queue_touched(key, event)
        match event:
            case JobSubmitted():
                self.specs[key] = event.spec  # type: ignore[index]
                self.refused.pop(key, None)  # type: ignore[arg-type]
                self.failing.pop(key, None)  # type: ignore[arg-type]
                self.pg_due.pop(key, None)  # type: ignore[arg-type]
                self.verdict.pop(key, None)  # type: ignore[arg-type]
                self.placed.discard(key)  # type: ignore[arg-type]
                self.deleted.revived(key)  # type: ignore[arg-type]
                self.reset[key] = dict.fromkeys((pod for pod, _r, _i, _t in st.task_names(event.spec)), seq)  # type: ignore[index]
                self.adopted.pop(key, None)  # type: ignore[arg-type]
            case JobUpdated():
                self._updated(key, seq, event.spec)  # type: ignore[arg-type]
                self.refused.pop(key, None)  # type: ignore[arg-type]
                self.failing.pop(key, None)  # type: ignore[arg-type]
                self.pg_due.pop(key, None)  # type: ignore[arg-type]
            case JobUnschedulable():
                self.verdict[key] = event  # type: ignore[index]
                self.placed.discard(key)  # type: ignore[arg-type]
            case PlacementCommitted() if not event.existing:
                self.placed.add(key)  # type: ignore[arg-type]
                self.commit_seq.setdefault(key, {}).update((p.task, seq) for p in event.placements)  # type: ignore[arg-type]
            case PlacementCommitted():
                self.adopted.setdefault(key, {}).update((p.task, seq) for p in event.placements)  # type: ignore[arg-type]
            case TaskFinished() if event.reason in st.BACK_TO_PENDING:
                self.reset.setdefault(key, {})[event.task] = seq  # type: ignore[index]
            case EvictionRequested():  # the pod bound before it goes, even if the writer
                self.reset.setdefault(key, {})[event.task] = seq  # type: ignore[index]  # missed it (a crash)
            case JobDeleted():  # (a job made again under the name starts afresh)
                self.ran.discard(key)  # type: ignore[arg-type]
                self.ended_for_deletion.discard(key)  # type: ignore[arg-type]
                for old in self.deleted.finished(key):  # type: ignore[arg-type]
                    self._forget(old)
            case _:
                pass
        if key is not None:
            self._held(key, event, tasks)
            self._mark(key)
        else:
            self._wake.set()  # queues and nodes: the queue statuses

    def _held(self, key: str, event: Event, tasks: Mapping[str, st.TaskSnap] | None) -> None:
        """The job's phase after `event`; its tasks as they stood if `event` ended them in the
        flow (a reconcile takes them while the flow has them: copied at every event, a job of
        N pods cost N² here)."""
        if isinstance(event, JobSubmitted):  # a new incarnation starts from nothing
            self.shown.pop(key, None)
            self.last_tasks.pop(key, None)
        if (phase := self.flow.shown.get(key)) is not None:
            self.shown[key] = (phase, self.flow.retries.get(key, 0), self.flow.ending.get(key, ("", ""))[1])
        if tasks is not None and key not in self.flow.projection.tasks:
            self.last_tasks[key] = tuple(tasks.values())

    def _updated(self, key: str, seq: int, spec: JobSpec) -> None:
        """A live job's new spec: a pod it adds under a name used before (3 → 2 → 3 replicas)
        must not be taken for the earlier one still terminating."""
        before = self.specs.get(key)
        had = {pod for pod, _r, _i, _t in st.task_names(before)} if before is not None else set()
        self.specs[key] = spec
        for pod, _r, _i, _t in st.task_names(spec):
            if pod not in had:
                self.reset.setdefault(key, {})[pod] = seq

    def _forget(self, key: str) -> None:
        """A job deleted long enough ago: nothing of it is asked for again."""
        for held in (self.specs, self.reset, self.last_tasks, self.shown, self.pg_specs, self.verdict, self.gone,
                     self._left_since, self._ttl_deleted, self.refused, self.failing, self.pg_refused,
                     self.commit_seq, self.pg_due, self.adopted):
            held.pop(key, None)
        for kind in ("Job", "PodGroup"):
            self._written_at.pop((key, kind), None)
        self.placed.discard(key)

    async def on_event(self, event: Event, rx: Received) -> None:
        # (first deliveries come in stream order: at or below the last folded, a redelivery)
        if rx.message.seq > max(self.watermark, self.folded_to):
            self.fold(rx.message.seq, event)
            self.folded_to = rx.message.seq

    async def recover(self) -> None:
        self.watermark = await self.log.last_sequence()
        async for msg, event in replay_decoded(self.log, self.service.filter_subjects, self.watermark):
            self.fold(msg.seq, event)

    def _mark(self, key: str) -> None:
        self.dirty.add(key)
        self._wake.set()

    def _mark_at(self, key: str, when: float) -> None:
        """Mark the job once `when` (this controller's clock) has come: its ttl running out,
        its deleted objects' grace, its counts' period. One timer per job: one due no later is
        enough (the reconcile it brings asks again for what is due after it)."""
        due = self._due.get(key)
        if due is not None and due <= when:
            return
        self._due[key] = when

        def fire() -> None:  # (the loop's clock may fire a little early: the reconcile asks again)
            if self._due.get(key) == when:
                del self._due[key]
            self._mark(key)

        asyncio.get_running_loop().call_later(max(when - self.clock(), 0.0) + TTL_MARGIN, fire)

    def _queue_touched(self, key: str | None, event: Event) -> None:
        """The queues whose status an event may change: a job's (both, when it was submitted
        again into another), or the queue an event is about; node events change none."""
        name = getattr(event, "queue", None)
        if isinstance(name, str):
            self.dirty_queues.add(name)
        elif isinstance(event, QueueCreated | QueueUpdated):
            self.dirty_queues.add(event.spec.name)
        if key is None:
            return
        if key in self.specs:
            self.dirty_queues.add(self.specs[key].queue)
        if isinstance(event, JobSubmitted | JobUpdated):  # (an update may move a PodGroup's queue)
            self.dirty_queues.add(event.spec.queue)

    # --- the API -----------------------------------------------------------------------------

    async def _watch(self, what: str, reflector: Reflector, store: dict[str, dict[str, Any]], kind: str) -> None:
        async for ch in reflector.changes():
            if ch.kind == "synced":
                self.synced[what].set()
                self._wake.set()
                if what == "pod":
                    self.expected.clear()
                continue
            if what == "pod":
                self.expected.discard(ch.key)
            obj = ch.obj if kind == "Pod" else volcano.typed(ch.obj, kind)
            self._observe(what, ch, obj, store)

    def _observe(self, what: str, ch: Change, obj: dict[str, Any], store: dict[str, dict[str, Any]]) -> None:
        if ch.kind == "delete":
            store.pop(ch.key, None)
        else:
            store[ch.key] = obj
        if what in ("pod", "podgroup"):
            self._owners(store).put(ch.key, None if ch.kind == "delete" else obj)
        m = volcano.meta(obj)
        ns = str(m.get("namespace") or "default")
        if what == "pod":
            self._mark(f"{ns}/{pods.ref(obj, volcano.replaces_volcano(self.scheduler_names)).job}")
        elif what == "podgroup":
            owner = volcano.owner_job(obj)
            if owner is not None and volcano.replaces_volcano(self.scheduler_names):
                self._mark(f"{ns}/{owner[0]}")
            else:  # beside a Volcano that stays, its controller's PodGroup is a job of its own
                self._mark(f"{ns}/{m.get('name')}")
        elif what == "job":
            key = f"{ns}/{m.get('name')}"
            if ch.kind == "delete" and key in self.specs and (uid := volcano.uid(obj)):
                self.gone[key] = uid  # the server's own word: `_gone` need not ask it again
            self._mark(key)
        else:
            name = str(m.get("name") or "")
            self.dirty_queues.add(name)
            if ch.kind == "delete":
                self.deleted_queues[name] = obj
            else:
                self.deleted_queues.pop(name, None)
            self._wake.set()

    async def _commands(self) -> None:
        await self.synced["job"].wait()  # whose a Command's target is must be known first
        async for ch in Reflector(self.kube, commands_path()).changes():
            if ch.kind == "upsert":
                try:
                    await self._consume(ch.obj)
                except KubeError as exc:
                    log.warning("command %s not consumed: %s", ch.key, exc)

    async def _consume(self, obj: dict[str, Any]) -> None:
        """Apply the Command through the queue service's command path, then delete it (as
        Volcano's controllers do). One that does not apply, or names an action not served,
        is deleted too, with a Warning Event on its target saying why (a Command is a one-off
        request: left in place it would only be refused again at every relist). A command
        applied before a crash meets "already so" on its second delivery, which is what it
        asked for (its Warning says so); a refused one delivered again writes the same Event,
        not a second one."""
        m = volcano.meta(obj)
        ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
        target = obj.get("target") or {}
        asked = str(obj.get("action") or "")
        action = COMMANDS.get(asked)
        if not self._commands_ours(target, ns):
            return  # another scheduler's Job or Volcano's Queue: its controller consumes it (issue 28)
        if self.command is None:
            log.warning("command %s/%s: no command path here; deleted unapplied", ns, name)
        elif action is None:
            served = ", ".join(sorted(COMMANDS))
            await self._warn_target(target, ns, "UnknownCommandAction",
                                    f"Command {ns}/{name}: action {asked!r} is not served (served: {served})")  # fmt: skip
        else:
            kind = "queue" if target.get("kind") == "Queue" else ""
            reply = await self.command(action, ns, str(target.get("name") or ""), kind)
            message = str(getattr(reply, "message", reply))
            log.info("command %s/%s %s %s: %s", ns, name, asked, target.get("name"), message)
            if getattr(reply, "ok", True) is False:
                await self._warn_target(target, ns, "CommandNotApplied", f"Command {ns}/{name} ({asked}): {message}")
        with contextlib.suppress(KubeError):
            await self.kube.delete(commands_path(ns, name))

    def _commands_ours(self, target: dict[str, Any], ns: str) -> bool:
        """Whether a Command's target is Tessera's to act on: a Job on the API whose
        schedulerName (Volcano's default: volcano) is not one of Tessera's is left, Command and
        all, to the scheduler it names. As Volcano's replacement, Tessera serves every Queue
        Command and answers one whose target no longer exists (deleted with a Warning); beside
        a Volcano that stays, Queue Commands (`vcctl queue operate`) and those of a Job not
        found are its controller's — consumed here, Volcano's queue state machine never ran for
        them, and Tessera closed the queue under Volcano's running jobs instead. There every
        Job Command is its controller's too, whatever the Job's schedulerName: that controller
        reconciles every Job (its informers filter nothing) and Tessera admits none of them
        (`PodSource._side_job`); consumed here, `vcctl job suspend` was applied by whichever
        controller took it first."""
        replacing = volcano.replaces_volcano(self.scheduler_names)
        if target.get("kind", "Job") != "Job" or not replacing:
            return replacing
        job = self.jobs.get(f"{ns}/{target.get('name') or ''}")
        if job is None:
            return replacing
        return str((job.get("spec") or {}).get("schedulerName") or "volcano") in self.scheduler_names

    async def _warn_target(self, target: dict[str, Any], ns: str, reason: str, message: str) -> None:
        """A Warning Event about the Command's target (whether or not it still exists: that
        is where `kubectl describe` and `kubectl get events` look for it)."""
        kind = str(target.get("kind") or "Job")
        about = {"apiVersion": str(target.get("apiVersion") or volcano.API_VERSIONS.get(kind, volcano.BATCH)),
                 "kind": kind, "metadata": {"name": str(target.get("name") or ""), "uid": str(target.get("uid") or ""),
                                            **({} if kind == "Queue" else {"namespace": ns})}}  # fmt: skip
        log.warning("%s", message)
        with contextlib.suppress(KubeError):
            await status.write_event(self.kube, about, "Warning", reason, message, self.clock())

    # --- reconciling ---------------------------------------------------------------------------

    def _stale(self, key: str, pod: str, obj: dict[str, Any]) -> bool:
        """A pod of an earlier incarnation: bound for a commit before its task was last sent
        back to Pending (`_owned` has already kept only the pods of this very Job object). A
        pod the log took as it was bound (`_adopted`) is this run's, whatever another log
        stamped on it."""
        bound = pods.seq_annotation(obj, volcano.PLACEMENT)
        if self._adopted(key, pod):
            return False
        return bound is not None and bound < self.reset.get(key, {}).get(pod, 0)

    def _adopted(self, key: str, pod: str) -> int:
        """The `existing` commit that took the task's pod as it was bound, if that is the
        task's run now (not sent back to Pending since); else 0."""
        seq = self.adopted.get(key, {}).get(pod, 0)
        return seq if seq > self.reset.get(key, {}).get(pod, 0) else 0

    async def _restamp(self, ns: str, key: str, pod: str, obj: dict[str, Any]) -> None:
        """A pod the log took as it was bound carries the commit that took it, as a pod this
        log bound carries its binding's: the stamps another log wrote (its commit, when it was
        made) are numbers of that log, which told a later eviction of this run "a later pod",
        never stopped, and a later restart "the current pod", never made again."""
        seq = self._adopted(key, pod)
        notes = volcano.meta(obj).get("annotations") or {}
        if not seq or (notes.get(volcano.PLACEMENT) == str(seq) and volcano.MADE_AFTER not in notes):
            return
        with contextlib.suppress(KubeError):  # (404: gone; anything else: the next reconcile)
            await self.kube.patch(pods_path(ns, pod), {"metadata": {"uid": volcano.uid(obj), "annotations": {
                volcano.PLACEMENT: str(seq), volcano.MADE_AFTER: None}}})  # fmt: skip

    async def _create_or_back_off(self, key: str, job: dict[str, Any], bodies: list[dict[str, Any]]) -> None:
        """A job's pods, made together (Volcano's controller makes a job's pods in parallel):
        one at a time, the controller was what bound 500 Jobs of 8 waited for — the scheduler
        had placed their tasks, the binder waited for their pods (benchmarks.k8s --shapes
        vcjob). A refused create is not raised: the job backs off (`Refused`) and its Job gets
        a `FailedCreate` Warning Event, as kube's controllers do; while it backs off nothing is
        asked, and then the first pod goes alone (kube's slow start) — the rest follow only if
        it is made, so a job that is still refused costs one request per backoff."""
        if not bodies:
            return
        backoff = self.refused.get(key)
        if backoff is not None and backoff.until > self.clock():
            # (placed meanwhile: booked until then, when one pod is asked and, refused, gives its
            # cards back — at most one placement per backoff, whatever the clocks' skew)
            self._mark_at(key, backoff.until)
            return
        ns = key.split("/", 1)[0]
        first, rest = (bodies[:1], bodies[1:]) if backoff is not None else (bodies, [])
        refused = await self._create_pods(ns, first)
        if not refused and rest:
            refused = await self._create_pods(ns, rest)
        if not refused:
            self.refused.pop(key, None)
            return
        # a refusal (403, 422: asked the same, refused the same) backs off to minutes and gives
        # the job's cards back; a create the server could not answer (a 5xx after the client's
        # retries: a failing-closed webhook not ready, the API server restarting) may pass in a
        # moment, so it is asked again within seconds and the cards stay the job's — treated as
        # a refusal, one API server restart took a running cluster's new jobs off their nodes
        # for up to five minutes each
        refusals = [(pod, exc) for pod, exc in refused if exc.status in REFUSALS]
        delay = next_retry(backoff.delay if backoff is not None else None,
                           RETRY_CAP if refusals else TRANSIENT_BACKOFF_CAP)  # fmt: skip
        pod, exc = (refusals or refused)[0]
        message = f"Error creating pod {pod}: {exc.message}"
        log.warning("job %s: %d pod(s) not created (%s); asked again in %.0f s", key, len(refused), message, delay)
        said = backoff.said if backoff is not None else ""
        if message != said:  # (the same refusal again is the same Event: not asked again)
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, job, "Warning", "FailedCreate", message, self.clock())
                said = message
        self.refused[key] = Refused(delay, self.clock() + delay, said)
        self._mark_at(key, self.clock() + delay)
        # unanswered for long (the backoff at its cap: ~15 s of failures in a row — a webhook of
        # this namespace that stays down), the cards go back too, held 10 s at a time: kept
        # for good, they starved every other namespace's jobs of those nodes, and said nothing
        if refusals or delay >= TRANSIENT_BACKOFF_CAP:
            await self._give_back(key, message, self.clock() + delay, {str(volcano.meta(b)["name"]) for b in bodies})

    async def _give_back(self, key: str, reason: str, until: float, only: Collection[str] | None = None) -> None:
        """The cards of the job's committed tasks whose pods could not be made go back
        (`BindingFailed`, held from placement until `until`, when this controller asks again):
        a pod never made is never bound, and its cards stayed booked — a Job in a namespace
        whose PodSecurity refuses its pods held its node for good, and the jobs of everyone
        else waited (under Volcano such a Job allocates nothing). Once per commit of a task; of
        `only` those tasks when given (the pods just asked for, not those waiting on dependsOn)."""
        ns, name = key.split("/", 1)
        await self._report_podless(key, "podrefused", "cards given back", lambda pod, snap: BindingFailed(
            namespace=ns, name=name, task=pod, node=snap.node, reason=reason, retry_at=until), only=only)  # fmt: skip

    async def _report_podless(self, key: str, tag: str, what: str, make: Callable[[str, st.TaskSnap], Event],
                              statuses: Collection[str] = (st.BOUND,), only: Collection[str] | None = None,
                              ) -> None:  # fmt: skip
        """`make`'s event for each of the job's committed tasks that has no pod (`_podless`;
        of `only` when given), once per commit of the task (its message id names the commit);
        the log away, the rest wait for the next reconcile."""
        ns, name = key.split("/", 1)
        for pod, snap in self._podless(key, statuses).items():
            if only is not None and pod not in only:
                continue
            seq = self.commit_seq.get(key, {}).get(pod, 0)
            try:
                await self.service.publish(Outgoing(self.subjects.job(ns, name), make(pod, snap),
                                                    msg_id=f"{tag}:{key}/{pod}:{seq}"))  # fmt: skip
            except Exception as exc:
                log.warning("job %s: %s of %s not appended (%s)", key, what, pod, exc)
                return

    def _podless(self, key: str, statuses: Collection[str] = (st.BOUND,)) -> dict[str, st.TaskSnap]:
        """The job's committed tasks that have no pod: none made, none on the way (a pod made a
        moment ago waits in `expected` for its watch event, and the binder binds it)."""
        ns = key.split("/", 1)[0]
        return {pod: t for pod, t in self.flow.projection.tasks.get(key, {}).items()
                if t.status in statuses and f"{ns}/{pod}" not in self.pods and f"{ns}/{pod}" not in self.expected}  # fmt: skip

    async def _end_podless(self, key: str) -> None:
        """An ending job (Terminating, Completing, Aborting, Failing) waits for every task that
        holds a node to stop; a task placed whose pod was never made (a dependsOn task waiting
        for its dependencies, a create the server refused or could not answer) has nothing to
        stop, and no watch would ever say it stopped — the job waited in its ending phase for
        good, its nodes booked. Such a task is reported stopped here, once per commit."""
        ns, name = key.split("/", 1)
        await self._report_podless(key, "podless-end", "the end (never made)", lambda pod, snap: TaskFinished(
            namespace=ns, name=name, task=pod, node=snap.node, exit_code=-1, reason="evicted", at=self.clock()),
            statuses=(st.BOUND, st.RELEASING))  # fmt: skip

    async def _create_pods(self, ns: str, bodies: list[dict[str, Any]]) -> list[tuple[str, KubeError]]:
        """Each pod asked for, `POD_CREATES_IN_FLIGHT` at once; the refused ones (name, why)."""
        sem = asyncio.Semaphore(POD_CREATES_IN_FLIGHT)

        async def one(body: dict[str, Any]) -> None:
            key = f"{ns}/{volcano.meta(body)['name']}"
            self.expected.add(key)  # (before the request: its watch event may come before the answer)
            async with sem:
                made = False
                try:
                    made = await self._created(self.kube.create(pods_path(ns), body))
                finally:  # not made (or 409: a pod there already, which this watch may never
                    if not made:  # bring — another's under the name): asked again
                        self.expected.discard(key)

        results = await asyncio.gather(*(one(b) for b in bodies), return_exceptions=True)
        refused = []
        for body, r in zip(bodies, results, strict=True):
            if isinstance(r, KubeError):
                refused.append((str(volcano.meta(body)["name"]), r))
            elif isinstance(r, BaseException):
                raise r
        return refused

    async def _created(self, make: Awaitable[Any]) -> bool:
        try:
            await make
            return True
        except KubeError as exc:
            if exc.status == 409:
                return False  # there already (ours from before a restart, or not gone yet)
            raise

    async def _podgroup_made(self, key: str, job: dict[str, Any], spec: JobSpec) -> None:
        """The job's PodGroup asked for; a refusal (an object-count ResourceQuota, a webhook) is
        said on the Job as Volcano's controller says it (`PodGroupError`), once per refusal, and
        raised: the job's pods wait for their PodGroup, as they do under Volcano, and the
        reconcile backs off. Refused in silence before, the job's pods never came while its
        cards stayed booked, and its user saw nothing but a Pending Job."""
        ns = key.split("/", 1)[0]
        due = self.pg_due.get(key)
        if due is not None and due > self.clock():  # backing off: asked at its time, not at every event
            self._mark_at(key, due)
            raise PodGroupWaits
        try:
            await self._created(self.kube.create(podgroups_path(ns), volcano.podgroup_for(job, spec)))
        except KubeError as exc:
            message = f"Failed to create PodGroup, err: {exc.message}"
            if exc.status in REFUSALS:
                until = self.clock() + next_retry(self.failing.get(key))  # (what the reconcile waits)
                self.pg_due[key] = until
                if self.pg_refused.get(key) != message:
                    with contextlib.suppress(KubeError):
                        await status.write_event(self.kube, job, "Warning", "PodGroupError", message, self.clock())
                        self.pg_refused[key] = message
                # its placed tasks' cards back until then: their pods wait for the PodGroup
                await self._give_back(key, message, until)
            raise
        self.pg_refused.pop(key, None)
        self.pg_due.pop(key, None)

    def _owned(self, store: dict[str, dict[str, Any]], key: str, job_uid: str) -> list[tuple[str, dict[str, Any]]]:
        """The objects of `store` owned by the Job object `key` with uid `job_uid` (pods: only
        those one of Tessera's scheduler names schedules)."""
        name = key.split("/", 1)[1]
        found = ((k, store[k]) for k in self._owners(store).owned(key))
        return [(k, o) for k, o in found if volcano.owner_job(o) == (name, job_uid)
                and (store is not self.pods or pods.scheduler_name(o) in self.scheduler_names)]  # fmt: skip

    def _owners(self, store: dict[str, dict[str, Any]]) -> OwnerIndex:
        return self.pod_owners if store is self.pods else self.podgroup_owners

    def admitted_uid(self, key: str) -> str:
        """The uid of the Job object the log admitted under `key` ("" if none: not ours)."""
        spec = self.specs.get(key)
        if spec is None or spec.kind != "Job":
            return ""
        return spec.annotations.get(volcano.OBJECT_UID, "")

    async def reconcile(self, key: str) -> None:
        ns = key.split("/", 1)[0]
        job = self.jobs.get(key)
        spec = self.specs.get(key)
        tasks = self.flow.projection.tasks.get(key)
        if tasks is not None:
            self.last_tasks[key] = tuple(tasks.values())
        admitted = self.admitted_uid(key)
        ours = job is not None and bool(admitted) and admitted == volcano.uid(job)
        if ours and job is not None and volcano.meta(job).get("deletionTimestamp"):
            # being deleted (in the foreground, or held by a finalizer): going, as Volcano's
            # controller takes it ("is terminating, skip management process") — nothing is made
            # or written for it. Taken as live, it made again the PodGroup the garbage collector
            # had just deleted for a foreground deletion, which then waited on it for good. Its
            # pods and PodGroup are the collector's (they go before the Job, or with it).
            await self._end_for_deletion(key, admitted)
            return
        if not ours:
            if admitted and not await self._gone(key, admitted):
                return  # there, and this watch has yet to bring it (its change marks the job)
            if admitted:  # the Job object Tessera admitted is gone, or another took its name
                await self._end_for_deletion(key, admitted)
                left = [(k, obj) for k, obj in self._owned(self.pods, key, admitted) if not pods.terminating(obj)]
                groups = self._owned(self.podgroups, key, admitted)
                if self._left_to_collector(key, bool(left or groups)):
                    return
                for k, obj in left:
                    await self.kube.delete_this(pods_path(ns, k.split("/", 1)[1]), volcano.uid(obj))
                for k, obj in groups:
                    await self.kube.delete_this(podgroups_path(ns, k.split("/", 1)[1]), volcano.uid(obj))
                await self._plugin_objects_gone(key, delete=bool(left or groups) or not self.collector)
            if spec is not None and spec.kind == "PodGroup" and key in self.podgroups \
                    and _admitted_from(spec, self.podgroups[key]):  # fmt: skip
                await self._podgroup_status(key, spec, self.podgroups[key])
            return
        for k, obj in self._owned(self.pods, key, admitted):
            pod = k.split("/", 1)[1]
            if self._stale(key, pod, obj) and not pods.terminating(obj):
                await self.kube.delete_this(pods_path(ns, pod), volcano.uid(obj))
            elif not pods.terminating(obj):
                await self._restamp(ns, key, pod, obj)
        assert job is not None and spec is not None
        pg_key = f"{ns}/{volcano.podgroup_name(job)}"
        live = self.flow.projection.jobs.get(key)
        if pg_key not in self.podgroups and live is not None:
            await self._podgroup_made(key, job, spec)
        elif live is not None:
            await self._scaled(key, job, spec, pg_key)
        ending = live is not None and live.phase in fl.ENDING
        if live is not None and not ending:
            await self._plugin_objects(key, job)
        if live is not None and tasks is not None and not ending and (live.phase != "Pending" or key in self.placed):
            retries = self.flow.retries.get(key, 0)
            waits: dict[str, bool] = {}  # task → its dependsOn not met yet
            bodies: list[dict[str, Any]] = []
            for pod, role, index, _t in st.task_names(spec):
                snap = tasks.get(pod)
                obj = self.pods.get(f"{ns}/{pod}")
                if obj is None and f"{ns}/{pod}" in self.expected:
                    continue  # asked for, its watch event still to come
                if obj is None and role not in waits:
                    waits[role] = not self._dependencies_ready(key, job, spec, role)
                if obj is None and waits[role]:
                    continue  # made once the tasks it depends on run (a change of their pods marks the job)
                # made only for a task the log has waiting (or committed before its pod was
                # made): one the log still has running or releasing lost its pod, and the log
                # decides what follows (its TaskFinished, then a policy) — a pod made before that
                # would carry the old retry count and race the restart (issue 28)
                # (one the log took as it was bound is not made again: its pod's end or
                # deletion is reported, and the log decides what follows)
                if obj is None and snap is not None and snap.status in (st.PENDING, st.BOUND) \
                        and not self._adopted(key, pod):  # fmt: skip
                    bodies.append(volcano.pod_for(job, spec, role, index, retries, self.read_seq))
            await self._create_or_back_off(key, job, bodies)
        elif live is None or ending:  # (being) ended: what runs or waits is killed, finished pods are kept
            if ending:
                await self._end_podless(key)
            # a pod the log has finished is kept whatever its object still shows: this process's
            # pod watch may lag the one that told the log (the node agent's), and deleting on
            # its word took a Succeeded pod, and its logs, from a Completed Job
            ended = {t.pod for t in self.last_tasks.get(key, ()) if t.status in (st.SUCCEEDED, st.FAILED)}
            for k, obj in self._owned(self.pods, key, admitted):
                pod = k.split("/", 1)[1]
                if pods.phase(obj) in LIVE_POD_PHASES and not pods.terminating(obj) and pod not in ended:
                    await self.kube.delete_this(pods_path(ns, pod), volcano.uid(obj))
        await self._job_status(key, spec, job)
        if pg_key in self.podgroups:
            await self._podgroup_status(key, spec, self.podgroups[pg_key])
        await self._expired(key, job)

    async def _end_for_deletion(self, key: str, admitted: str) -> None:
        """The admitted Job object is deleted or being deleted: its job ends in the log, once.
        Its pods run on until confirmed gone: the job ends, or the log would send each one's
        task back to Pending and place it again (admission's JobDeleted waits for the last pod)."""
        live = self.flow.projection.jobs.get(key)
        if live is None or live.phase in fl.ENDING or self.command is None or key in self.ended_for_deletion:
            return
        self.ended_for_deletion.add(key)
        ns, name = key.split("/", 1)
        try:
            await self.command(fl.OBJECT_DELETED, ns, name, "", admitted)
        except Exception:  # (the loop must go on: again shortly)
            log.exception("job %s: its deletion not ended in the log; again shortly", key)
            self.ended_for_deletion.discard(key)
            asyncio.get_running_loop().call_later(1.0, self._mark, key)

    async def _expired(self, key: str, job: dict[str, Any]) -> None:
        """`spec.ttlSecondsAfterFinished` (Volcano's garbage collector): a Job Completed, Failed
        or Terminated that long ago (its state's lastTransitionTime, as its status shows it) is
        deleted, with its uid as the precondition; its pods and PodGroup go as a deleted Job's
        do. Before then, it is looked at again when the time comes."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        state = (job.get("status") or {}).get("state") or {}
        if not isinstance(ttl, int) or isinstance(ttl, bool) or state.get("phase") not in FINISHED_JOB_PHASES \
                or volcano.meta(job).get("deletionTimestamp"):  # fmt: skip
            return
        finished = volcano.api_time(state.get("lastTransitionTime"))
        if finished is None:
            return
        if finished + ttl > self.clock():
            self._mark_at(key, finished + ttl)
            return
        if self._ttl_deleted.get(key) == volcano.uid(job):
            return  # asked already; its watch has yet to say it went (at 1000 QPS: 1.6 asks per Job)
        ns, name = key.split("/", 1)
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                   "preconditions": {"uid": volcano.uid(job)}}  # fmt: skip
        try:
            await self.kube.delete(jobs_path(ns, name), options)
            self._ttl_deleted[key] = volcano.uid(job)
            log.info("job %s: deleted %d s after it finished (ttlSecondsAfterFinished)", key, ttl)
        except KubeError as exc:
            if exc.status not in (404, 409):  # gone already, or another object under the name
                raise

    def _dependencies_ready(self, key: str, job: dict[str, Any], spec: JobSpec, task: str) -> bool:
        """A task's `dependsOn` (`dependson.ready`, the rule `tessera simulate` holds tasks by):
        read from the Job object (a spec admitted before specs carried it lacks it), a pod of a
        named task ready when Running with every container status ready, or Succeeded."""
        names, any_of = dependson.named((jobplugins.task_named(job, task) or {}).get("dependsOn"))
        ns, name = key.split("/", 1)

        def ready_pods(t: TaskSpec) -> int:
            return sum(_pod_ready(self.pods.get(f"{ns}/{name}-{t.name}-{i}")) for i in range(t.replicas))

        return dependson.ready(names, any_of, spec.tasks, ready_pods)

    async def _plugin_objects(self, key: str, job: dict[str, Any]) -> None:
        """What the Job's controller puts beside its pods (svc: the hosts ConfigMap, the headless
        Service, the NetworkPolicy; the claims its `spec.volumes` asks for), before its pods are
        made: written when missing or when the job's replicas changed its hosts; an object of
        that name the Job does not own is left alone, with a warning (Tessera changes only what
        is its own)."""
        m = volcano.meta(job)
        version = (volcano.uid(job), m.get("generation") or m.get("resourceVersion"))
        if self.plugin_spec_seen.get(key) == version:
            return  # its spec unchanged: a pod's change re-reconciles a job (hosts are O(replicas))
        wanted = volcano.plugin_objects(job)
        made = self.plugin_made.get(key)
        job_uid = volcano.uid(job)
        if not wanted or (made is not None and made[0] == job_uid and made[1] == wanted):
            self.plugin_spec_seen[key] = version
            return
        ns = key.split("/", 1)[0]
        uids = dict(made[2]) if made is not None and made[0] == job_uid else {}
        for kind, body in wanted:
            name = body["metadata"]["name"]
            try:
                if kind == "ConfigMap":
                    obj = await self._made_or_found(self.kube.create(configmaps_path(ns), body),
                                                    lambda n=name: self.kube.get(configmaps_path(ns, n)))  # fmt: skip
                    # svc's host list follows the job; ringsconfigmap's data is MindCluster's to write
                    if obj is not None and volcano.owner_job(obj) == (volcano.meta(job).get("name"), job_uid) \
                            and name == jobplugins.configmap_name(job) and obj.get("data") != body["data"]:  # fmt: skip
                        await self.kube.patch(configmaps_path(ns, name), {"data": body["data"]})
                elif kind == "Service":
                    obj = await self._made_or_found(self.kube.create(services_path(ns), body),
                                                    lambda n=name: self.kube.get(services_path(ns, n)))  # fmt: skip
                elif kind == "PersistentVolumeClaim":  # a claim's spec is immutable: made once
                    obj = await self._made_or_found(self.kube.create(claims_path(ns), body),
                                                    lambda n=name: self.kube.get(claims_path(ns, n)))  # fmt: skip
                elif kind == "Secret":  # ssh: the key pair made once, kept; its host list follows the job
                    obj = await self._ssh_secret(ns, name, body)
                    config = (body["data"] or {}).get(jobplugins.SSH_CONFIG)
                    if obj is not None and volcano.owner_job(obj) == (volcano.meta(job).get("name"), job_uid) \
                            and (obj.get("data") or {}).get(jobplugins.SSH_CONFIG) != config:  # fmt: skip
                        await self.kube.patch(secret_path(ns, name), {"data": {jobplugins.SSH_CONFIG: config}})
                else:
                    obj = await self._made_or_found(self.kube.create(networkpolicies_path(ns), body),
                                                    lambda n=name: self.kube.get(networkpolicies_path(ns, n)))  # fmt: skip
            except KubeError as exc:
                log.warning("job %s: its %s %s not written (%s); again at its next change", key, kind, name, exc)
                return
            if obj is not None and volcano.owner_job(obj) == (volcano.meta(job).get("name"), job_uid):
                uids[(kind, name)] = volcano.uid(obj)
            elif obj is not None:
                log.warning("job %s: %s %s exists and is not this Job's; left alone (its pods would "
                            "use it)", key, kind, name)  # fmt: skip
        self.plugin_made[key] = (job_uid, wanted, uids)
        self.plugin_spec_seen[key] = version

    async def _ssh_secret(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The ssh plugin's Secret: the one there (a restart keeps its pair, and makes none for
        nothing: a key costs tens of ms), else created with a new key pair unless the flags
        gave one."""
        try:
            found = await self.kube.get(secret_path(ns, name))
        except KubeError as exc:
            if exc.status != 404:
                raise
        else:
            return found if isinstance(found, dict) else None
        if jobplugins.SSH_PRIVATE not in (body.get("data") or {}):
            private, public = await asyncio.to_thread(new_key_pair)
            body = jobplugins.with_key_pair(body, private, public)
        return await self._made_or_found(self.kube.create(secret_path(ns), body),
                                         lambda: self.kube.get(secret_path(ns, name)))  # fmt: skip

    async def _made_or_found(self, make: Awaitable[Any], read: Callable[[], Awaitable[Any]]) -> dict[str, Any] | None:
        """The object created, or (409) the one already there; None if it went meanwhile."""
        try:
            made = await make
        except KubeError as exc:
            if exc.status != 409:
                raise
        else:
            return made if isinstance(made, dict) else None
        try:
            found = await read()
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        return found if isinstance(found, dict) else None

    async def _plugin_objects_gone(self, key: str, delete: bool = True) -> None:
        """The admitted Job is gone: what its plugins made goes with it (the garbage collector
        does so through the owner references — `delete` False: it took the Job's other objects,
        so these too; a cluster without one needs it done)."""
        self.plugin_spec_seen.pop(key, None)
        made = self.plugin_made.pop(key, None)
        if made is None or not delete:
            return
        ns = key.split("/", 1)[0]
        for kind, body in made[1]:
            name = body["metadata"]["name"]
            uid = made[2].get((kind, name))
            if not uid:
                continue
            if kind == "ConfigMap":
                await self.kube.delete_this(configmaps_path(ns, name), uid)
            elif kind == "Service":
                await self.kube.delete_this(services_path(ns, name), uid)
            elif kind == "PersistentVolumeClaim":
                await self.kube.delete_this(claims_path(ns, name), uid)
            elif kind == "Secret":
                await self.kube.delete_this(secret_path(ns, name), uid)
            else:
                await self.kube.delete_this(networkpolicies_path(ns, name), uid)

    def _left_to_collector(self, key: str, left: bool) -> bool:
        """True while a deleted Job's objects (`left`: some are not being deleted yet) are the
        garbage collector's. Once its grace is over, what is left says whether the cluster has
        one: objects still there, and from now on this controller deletes them at once (a
        collector lagging past the grace costs only the requests it did before); all gone,
        and the collector is trusted with every deleted Job's objects."""
        since = self._left_since.get(key)
        if since is None:
            if not left or self.collector is False:
                return False
            since = self._left_since[key] = self.clock()
        if since + self.collector_grace > self.clock():
            self._mark_at(key, since + self.collector_grace)
            return True
        del self._left_since[key]
        if left and self.collector is not False:
            log.info("%s: the objects of its deleted Job are still there %.0f s later: no garbage collector "
                     "seems to run, so deleted Jobs' objects are deleted here", key, self.collector_grace)  # fmt: skip
        self.collector = not left
        return False

    async def _gone(self, key: str, uid: str) -> bool:
        """The admitted Job object `uid` is deleted, asked of the API server itself: this
        process's watch can lag admission's — the log may admit a Job its store does not hold
        yet (or holds an older one of the name) — and ending a job for that killed a new Job
        before it ran (one run in ten under load). Asked once per object found gone (not at all
        when the watch said this very object was deleted); while it is there, again only when
        this job changes."""
        if self.gone.get(key) == uid:
            return True
        ns, name = key.split("/", 1)
        try:
            obj: dict[str, Any] | None = await self.kube.get(jobs_path(ns, name))
        except KubeError as exc:
            if exc.status != 404:
                raise
            obj = None
        if obj is not None and volcano.uid(obj) == uid:
            return False
        self.gone[key] = uid
        return True

    async def _scaled(self, key: str, job: dict[str, Any], spec: JobSpec, pg_key: str) -> None:
        """After a `JobUpdated`: the pods its spec no longer names are deleted (Volcano deletes
        the pods beyond the new replicas; one still running is stopped by the queue's
        eviction too, whichever comes first), and the PodGroup takes the new minMember,
        minTaskMember, minResources and priorityClassName. Both only on a difference."""
        ns = key.split("/", 1)[0]
        named = {pod for pod, _r, _i, _t in st.task_names(spec)}
        for k, obj in self._owned(self.pods, key, volcano.uid(job)):
            if k.split("/", 1)[1] not in named and not pods.terminating(obj):
                await self.kube.delete_this(pods_path(ns, k.split("/", 1)[1]), volcano.uid(obj))
        pg = self.podgroups.get(pg_key)
        want = volcano.podgroup_for(job, spec)["spec"]
        have = (pg or {}).get("spec") or {}
        changed = {k: v for k, v in want.items() if have.get(k) != v}
        if pg is not None and changed and self.pg_specs.get(key) != changed:
            # once per difference: a server that shows a value in another form is not patched
            # again at every reconcile
            await self.kube.patch(podgroups_path(ns, pg_key.split("/", 1)[1]), {"spec": changed})
            pg["spec"] = {**have, **changed}  # what the watch will show; no second patch meanwhile
            self.pg_specs[key] = changed
            self.writes += 1

    # --- status ----------------------------------------------------------------------------------

    async def _write_status(self, obj: dict[str, Any], desired: dict[str, Any], key: str = "") -> None:
        """Only on a difference; for a job's Job and PodGroup (`key`), a difference in the pod
        counts alone waits until `COUNTS_PERIOD` after the object's last write (the job is
        marked for then), so the counts of a gang's pods starting or ending together go as one."""
        current = obj.get("status") or {}
        if not volcano.status_differs(current, desired):
            return
        now = self.clock()
        which = (key, str(obj.get("kind") or ""))
        if key and volcano.counts_only(current, desired):
            if (at := self._written_at.get(which, float("-inf")) + COUNTS_PERIOD) > now:
                self._mark_at(key, at)
                return
        body = volcano.stamp(desired, current, utc_stamp(now), volcano.meta(obj).get("creationTimestamp"))
        await self.kube.patch(volcano.status_path(obj), {"status": volcano.removals(current, body)})
        obj["status"] = {**current, **body}  # what the watch will show; no second write meanwhile
        if key:
            self._written_at[which] = now
        self.writes += 1

    async def _job_status(self, key: str, spec: JobSpec, job: dict[str, Any]) -> None:
        shown, retries, why = self.shown.get(key, ("Pending", 0, ""))
        tasks = self.last_tasks.get(key, ())
        if shown == "Restarting":
            self.ran.discard(key)  # Restarting → Pending → Running again once its pods run
        elif sum(t.status in (st.RUNNING, st.SUCCEEDED, st.FAILED) for t in tasks) >= spec.min_available:
            self.ran.add(key)  # Running from now on, as Volcano's job state machine keeps it
        desired = volcano.job_status(spec, shown, tasks, retries,
                                     shown == "Restarting", ran=key in self.ran, reason=why)  # fmt: skip
        await self._write_status(job, desired, key)

    async def _podgroup_status(self, key: str, spec: JobSpec, pg: dict[str, Any]) -> None:
        live = self.flow.projection.jobs.get(key)
        phase = volcano.podgroup_phase(self.shown.get(key, ("", 0, ""))[0], live.phase if live else "")
        if live is None and phase != "Completed":
            return  # ended otherwise (aborted, deleted): the PodGroup keeps its last phase
        if live is not None and live.phase == "Running" and lifecycle.gang_broken(
            spec.min_available, [t.status for t in self.flow.projection.tasks.get(key, {}).values()]
        ):
            phase = "Unknown"  # running pods, fewer than minMember ready: Volcano's jobStatus
        v = self.verdict.get(key)
        text = ""
        if v is not None and v.reason and key not in self.placed:  # (a placement since is newer news)
            text = self.node_counts.message(v, spec)
        desired = volcano.podgroup_status(phase, self.last_tasks.get(key, ()), text, spec.min_available,
                                          (pg.get("status") or {}).get("conditions") or ())  # fmt: skip
        await self._write_status(pg, desired, key)

    async def queue_statuses(self) -> None:
        """The status of the queues marked since the last pass, from one walk over the jobs
        (not one per queue); a queue whose write failed is marked again for the next pass.
        PodGroups are counted by the phase each shows (`lifecycle.podgroup_phase_of`), as
        Volcano's queue controller counts them: a Volcano Job being ended or restarted not at all
        (its job controller's `killJob` deleted the group), a plain pod's or a PodGroup's own
        group Running while ended and Completed once ended, until deleted (the jobs' phases in
        the log were counted: those were neither, and ended jobs had left)."""
        proj = self.flow.projection
        names = sorted(n for n in self.dirty_queues if n in self.queues and n in proj.queues)
        self.dirty_queues.clear()
        if not names or not volcano.replaces_volcano(self.scheduler_names):
            # beside a Volcano that stays, a Queue's status is its scheduler's: Tessera's share
            # written over it wiped Volcano's `allocated` and counts at every pass (they fought)
            return
        allocated: dict[str, dict[str, int]] = {n: {} for n in names}
        phases: dict[str, list[str]] = {n: [] for n in names}
        for key, spec in self.specs.items():  # ended, not deleted: their group stays (Completed)
            if key not in proj.jobs and key not in self.deleted.order and spec.queue in phases:
                phases[spec.queue].append(lifecycle.podgroup_phase_of(self.shown.get(key, ("", 0, ""))[0], spec.kind))
        for key, job in proj.jobs.items():
            acc = allocated.get(job.spec.queue)
            if acc is None:
                continue
            statuses = [t.status for t in proj.tasks.get(key, {}).values()]  # a cut gang's is Unknown
            phases[job.spec.queue].append(lifecycle.podgroup_shown(self.flow.shown.get(key, job.phase), job.spec.kind,
                                                                   job.spec.min_available, statuses))  # fmt: skip
            for t in proj.tasks.get(key, {}).values():
                if t.status in (st.BOUND, st.RUNNING):
                    for res, v in requested(t.spec):
                        acc[res] = acc.get(res, 0) + v
        for i, name in enumerate(names):
            obj = self.queues.get(name)
            if obj is None or name not in proj.queues:
                continue  # deleted while an earlier one was written (a KeyError here ended the service)
            desired = volcano.queue_status(proj.queues[name].state, allocated[name], phases[name])
            try:
                await self._write_status(obj, desired)
            except KubeError:
                self.dirty_queues.update(names[i:])
                raise

    # --- Queue objects ----------------------------------------------------------------------------

    async def default_queue_objects(self) -> None:
        """`root` and `default` on the API server when absent (Volcano's scheduler creates
        them at start), from the log's spec — or the one the queue service is about to append
        when this process's fold has not seen it yet; 409 is "there already"."""
        await self.synced["queue"].wait()
        fallback = {q.name: q for q in lifecycle.default_queues(())}
        for name in ("root", "default"):
            if name in self.queues:
                continue
            known = self.flow.projection.queues.get(name)
            body = volcano.queue_object(known.spec if known is not None else fallback[name])
            if await self._created(self.kube.create(queues_path(), body)):
                log.info("queue %s created on the API server", name)

    async def queues_deleted(self) -> None:
        """Queue objects deleted on the API server (see the module docstring): the queue
        service's delete decides; what it refuses is created again from the log's spec."""
        for name in sorted(self.deleted_queues):
            gone = self.deleted_queues.pop(name)
            if self.command is None or name not in self.flow.projection.queues:
                continue  # never in the log (refused, or made while Tessera was away) or gone there
            reply = await self.command("delete", "", name, "queue")
            if getattr(reply, "ok", False):
                log.info("queue %s deleted on the API server: deleted in the log", name)
                continue
            q = self.flow.projection.queues.get(name)
            body = volcano.queue_object(q.spec) if q is not None else volcano.manifest(gone)
            try:
                created = await self.kube.create(queues_path(), body)
            except KubeError as exc:
                if exc.status != 409:  # 409: created again meanwhile (by kubectl): it stays
                    self.deleted_queues.setdefault(name, gone)
                    raise
                continue
            message = (f"queue {name} was deleted on the API server, which Volcano's webhook refuses: "
                       f"{getattr(reply, 'message', reply)}; created again from Tessera's log")  # fmt: skip
            log.warning("%s", message)
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, volcano.typed(created, "Queue"), "Warning", "QueueRecreated",
                                         message, self.clock())  # fmt: skip

    # --- running -------------------------------------------------------------------------------

    async def _loop(self) -> None:
        for ev in self.synced.values():
            await ev.wait()
        self.dirty.update(self.specs)
        self.dirty_queues.update(self.queues)
        await self.default_queue_objects()
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.queues_deleted()
            except KubeError as exc:
                log.warning("a deleted queue not handled (%s): again shortly", exc)
                asyncio.get_running_loop().call_later(1.0, self._wake.set)
            keys = sorted(self.dirty - self._reconciling)
            self.dirty.difference_update(keys)
            for key in keys:  # (one marked while it is reconciled goes again once it is done)
                self._reconciling.add(key)
                task = asyncio.create_task(self._reconcile_one(key))
                self._reconciles.add(task)
                task.add_done_callback(self._reconciles.discard)
            await self._queue_pass()

    async def _reconcile_one(self, key: str) -> None:
        """Jobs are reconciled side by side, `RECONCILES_IN_FLIGHT` at once, each by one task at a
        time: one after the other, every API round trip of every job waited for the last — a
        churn of Volcano Jobs had its pods made ~7 s after the scheduler placed them
        (benchmarks.kube_churn), and its Completed Jobs' statuses written later still."""
        try:
            async with self._in_flight:
                await self.reconcile(key)
            self.failing.pop(key, None)
        except PodGroupWaits:
            pass  # (its timer marks it)
        except KubeError as exc:
            log.warning("job %s not reconciled (%s): again in %.0f s", key, exc, self._retry_later(key, retry_cap(exc.status)))
        except Exception:  # a fault of ours: this job waits, the others go on
            log.exception("job %s not reconciled: again in %.0f s", key, self._retry_later(key, RETRY_CAP))
        finally:
            self._reconciling.discard(key)
            if key in self.dirty:
                self._wake.set()

    def _retry_later(self, key: str, cap: float) -> float:
        """Mark a job whose reconcile failed again after a delay that doubles while it keeps
        failing (`next_retry` up to `cap`), as a controller's rate-limited requeue does: retried
        every second, a Job whose PodGroup a quota refuses, or whose status a webhook refuses,
        asked the API server once a second for as long as it lived; a change of the job's
        objects or its log still reconciles it at once."""
        delay = self.failing[key] = next_retry(self.failing.get(key), cap)
        self._mark_at(key, self.clock() + delay)
        return delay

    async def _queue_pass(self) -> None:
        """Queue statuses at most every QUEUE_STATUS_PERIOD s: a pass walks every job of the
        touched queues, and a pass per reconcile round made a busy controller quadratic (issue
        29's profile: 10 % of the queue service); what changed meanwhile is written together."""
        loop = asyncio.get_running_loop()
        wait = self._queues_at + QUEUE_STATUS_PERIOD - loop.time()
        if wait > 0:
            if not self._queues_due:
                self._queues_due = True
                loop.call_later(wait, self._wake.set)
            return
        self._queues_due = False
        self._queues_at = loop.time()
        try:
            await self.queue_statuses()
        except KubeError as exc:
            log.warning("queue status not written (%s): again shortly", exc)
            loop.call_later(1.0, self._wake.set)

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(c) for c in (
            self._watch("job", Reflector(self.kube, jobs_path()), self.jobs, "Job"),
            self._watch("podgroup", Reflector(self.kube, podgroups_path()), self.podgroups, "PodGroup"),
            self._watch("pod", Reflector(self.kube, pods_path(), query={"labelSelector": volcano.JOB_NAME},
                                         keep=lambda o: volcano.owner_job(o) is not None),
                        self.pods, "Pod"),  # Volcano Jobs' pods only (their label), not every pod
            self._watch("queue", Reflector(self.kube, queues_path()), self.queues, "Queue"),
            self._commands(),
            self._loop(),
        )]  # fmt: skip
        try:
            await self.service.run(stopping)
        finally:
            await cancel_all(tasks)
            await cancel_all(list(self._reconciles))


def _admitted_from(spec: JobSpec, obj: dict[str, Any]) -> bool:
    """Whether the job was admitted from this very object (its uid; a spec from before specs
    carried one is taken as the object's). A PodGroup made again under the name of a job still
    live in the log is another object: the old job's status written on it (conditions whole)
    dropped admission's refusal there, whose next judgment wrote it again — each woke the other,
    thousands of writes a minute."""
    admitted = spec.annotations.get(volcano.OBJECT_UID, "")
    return not admitted or admitted == volcano.uid(obj)


def _pod_ready(obj: dict[str, Any] | None) -> bool:
    """Running with every container status ready, or Succeeded. Volcano's isDependsOnPodsReady
    asks ready containers of a Succeeded pod too, which a kubelet never reports (a terminated
    container is not ready): a task that depends on one that ran to its end before a pass saw it
    Running — a short preparation step, or a kubelet's first report already Succeeded — was
    never made, its cards booked for good."""
    if obj is None:
        return False
    if pods.phase(obj) == "Succeeded":
        return True
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return pods.phase(obj) == "Running" and all(cs.get("ready") for cs in statuses)
