"""What Tessera tells Kubernetes about the pods it schedules (DESIGN §8, written only on change):
`PodScheduled=False` with the reason and a `FailedScheduling` Event while a pod waits, a Warning
Event and the same condition for a pod admission refused, and graceful deletions with an Event
for evictions and preemptions. The queue service hosts the writer; admission uses `refuse`.

"Only on change" is judged against the pod as the API server has it (a pod watch): a restart
replays the log, lists the pods and writes nothing that is already there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from contracts.events import (
    BindingFailed,
    EvictionRequested,
    JobDeleted,
    JobSubmitted,
    JobUnschedulable,
    JobUpdated,
    NodeLost,
    NodeRegistered,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    TaskFinished,
    TaskStarted,
)
from contracts.workloads import JobSpec
from services.core.scheduling import podreasons as reasons
from services.core.scheduling.snapshot import BACK_TO_PENDING, task_names
from services.core.stamps import utc_stamp
from services.kube import nodes, pods, volcano
from services.kube.client import STRATEGIC_PATCH, Kube, KubeError, events_path, pods_path
from services.kube.listwatch import scheduler_pods
from services.kube.volcano import jobs_path, podgroups_path
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService, Received, replay_decoded
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)

COMPONENT = "tessera"


def scheduled_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return None


async def write_condition(kube: Kube, obj: dict[str, Any], reason: str, message: str,
                          now: float) -> bool:  # fmt: skip
    """`PodScheduled=False` with `reason`/`message`, unless the pod already says exactly so —
    never on a pod that is bound or being deleted. A strategic merge patch carrying only this
    condition (the API server merges conditions by type: the kubelet's stay as they are) and
    the resourceVersion it was decided on: a pod bound meanwhile answers 409, is read again,
    and gets nothing (issue 28)."""
    r = pods.ref(obj)
    for _attempt in range(3):
        current = scheduled_condition(obj)
        if pods.node_name(obj) or pods.terminating(obj) or (current and current.get("status") == "True"):
            return False
        if current and current.get("status") == "False" and current.get("reason") == reason \
                and current.get("message") == message:  # fmt: skip
            return False
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastTransitionTime": utc_stamp(now), "lastProbeTime": None}  # fmt: skip
        body: dict[str, Any] = {"status": {"conditions": [cond]}}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            body["metadata"] = {"resourceVersion": rv}
        try:
            await kube.patch(pods_path(r.namespace, r.name, "status"), body, STRATEGIC_PATCH)
            return True
        except KubeError as exc:
            if exc.status != 409:
                raise
            obj = await kube.get(pods_path(r.namespace, r.name))  # changed meanwhile: decide again
    return False


async def write_event(kube: Kube, obj: dict[str, Any], kind: str, reason: str, message: str,
                      now: float) -> None:  # fmt: skip
    """A core/v1 Event about the object (a Pod unless it says otherwise); its name is derived
    from what it says, so the same message twice is one Event. A cluster-scoped object's
    Events go to `default`, as kubectl looks for them there."""
    meta = obj.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    api, what = str(obj.get("apiVersion") or "v1"), str(obj.get("kind") or "Pod")
    namespace = str(meta.get("namespace") or ("default" if what in ("Pod", "Job", "PodGroup") else ""))
    digest = hashlib.sha256(f"{uid}/{reason}/{message}".encode()).hexdigest()[:12]
    involved = {"apiVersion": api, "kind": what, "name": name, **({"namespace": namespace} if namespace else {}),
                **({"uid": uid} if uid else {})}  # fmt: skip
    body = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{digest}", "namespace": namespace or "default"},
        "involvedObject": involved,
        "reason": reason, "message": message, "type": kind, "count": 1,
        "firstTimestamp": utc_stamp(now), "lastTimestamp": utc_stamp(now),
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
    }  # fmt: skip
    try:
        await kube.create(events_path(namespace or "default"), body)
    except KubeError as exc:
        if exc.status != 409:  # 409: this very Event exists already
            raise


async def refuse(kube: Kube, obj: dict[str, Any], rules: Iterable[str], now: float) -> None:
    """Admission refused the pod: a Warning Event and the condition, each naming every rule."""
    message = "; ".join(rules)
    if await write_condition(kube, obj, "Rejected", message, now):
        await write_event(kube, obj, "Warning", "FailedAdmission", message, now)


def refusal_status(obj: dict[str, Any], message: str, now: float) -> dict[str, Any] | None:
    """What a refused object's status says, in fields its CRD has (a real API server prunes
    any other): a PodGroup an `Admitted=False` condition; a Job `state.phase: Failed` with
    reason `Rejected` (Volcano's Job conditions carry only a phase, and a job refused once per
    uid never runs); a Queue nothing (its status has no place for words: the Event says it).
    None when the status says so already, or has nowhere to say it."""
    status = obj.get("status") or {}
    kind = obj.get("kind")
    if kind == "PodGroup":
        conditions = list(status.get("conditions") or [])
        if any(c.get("type") == "Admitted" and c.get("status") == "False" and c.get("message") == message
               for c in conditions):  # fmt: skip
            return None
        cond = {"type": "Admitted", "status": "False", "reason": "Rejected", "message": message,
                "lastTransitionTime": utc_stamp(now)}  # fmt: skip
        return {"conditions": [*(c for c in conditions if c.get("type") != "Admitted"), cond]}
    if kind == "Job":
        state = status.get("state") or {}
        if state.get("reason") == "Rejected" and state.get("message") == message:
            return None
        return {"state": {"phase": "Failed", "reason": "Rejected", "message": message,
                          "lastTransitionTime": utc_stamp(now)}}  # fmt: skip
    return None


async def refuse_object(kube: Kube, obj: dict[str, Any], rules: Iterable[str], now: float) -> None:
    """Admission refused a Queue, PodGroup or Job: a Warning Event naming every rule, and the
    refusal in its status where the kind has room for it (`refusal_status`)."""
    message = "; ".join(rules)
    status = refusal_status(obj, message, now)
    if status is None and obj.get("kind") != "Queue":
        return  # said already
    await write_event(kube, obj, "Warning", "FailedAdmission", message, now)  # 409: said already
    if status is None:
        return
    # (paths by kind, not `volcano.status_path`: a Queue's status is never written here, and
    # the chart's admission role has no grant for it)
    m = volcano.meta(obj)
    ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
    if obj.get("kind") == "PodGroup":  # its CRD has no status subresource: on the object
        await kube.patch(podgroups_path(ns, name), {"status": status})  # says it was all written
    else:
        await kube.patch(jobs_path(ns, name, "status"), {"status": status})


#: seconds between a verdict's arrival and its writing: verdicts of one session are written
#: together, and one a placement or a newer verdict overtook meanwhile is not written at all
VERDICT_GRACE = 0.5
#: seconds before an eviction whose delete failed is asked again
STOP_RETRY = 1.0


class NodeCounts:
    """The cluster's nodes as "0/N nodes are available" counts them (kube-scheduler counts every
    Node): registered, or there but not Ready (NodeLost); a deleted one not. One fold for the
    pods' FailedScheduling and the PodGroup's Unschedulable condition: the condition counted
    only the nodes sessions read, and said "0/6" where the same job's pods said "0/7 … 1
    node(s) had untolerated taint {node.kubernetes.io/not-ready: }"."""

    def __init__(self) -> None:
        self.nodes: set[str] = set()
        self.not_ready: set[str] = set()  # of those, the ones not Ready: no session reads them

    def fold(self, event: object) -> None:
        match event:
            case NodeRegistered():
                self.nodes.add(event.node)
                self.not_ready.discard(event.node)
            case NodeLost(reason=nodes.NODE_DELETED):
                self.nodes.discard(event.node)
                self.not_ready.discard(event.node)
            case NodeLost():
                self.nodes.add(event.node)
                self.not_ready.add(event.node)
            case _:
                pass

    def message(self, v: JobUnschedulable, spec: JobSpec | None) -> str:
        not_ready = sum(1 for n in self.not_ready if n not in v.node_reasons)
        return reasons.message(v.reason, v.node_reasons, len(self.nodes), spec, v.why, v.reason_counts, not_ready)


class PodStatusWriter:
    """Verdicts are written by a task of their own, not by the handler that reads them: two API
    requests per waiting pod, awaited in the handler under the client's QPS limit, held the
    queue process's deliveries (and their acks) past ack_wait when a cold start judged
    thousands of pods before the nodes had registered — 5,000 nodes, issue 29: every held
    message was delivered again to all three of the process's services, a third more CPU."""

    def __init__(self, event_log: EventLog, kube: Kube, *,
                 scheduler_names: Iterable[str] = ("volcano", "tessera"),
                 clock: Callable[[], float] = time.time, grace: float = VERDICT_GRACE) -> None:  # fmt: skip
        self.log = event_log
        self.subjects = event_log.subjects
        self.kube = kube
        self.scheduler_names = frozenset(scheduler_names)
        self.clock = clock
        self.specs: dict[tuple[str, str], JobSpec] = {}
        #: each job's tasks proposed/committed/started (by job: a set of every job's tasks was
        #: filtered whole at each submission, quadratic in a backlog — issue 29's profile)
        self.placed: dict[tuple[str, str], set[str]] = {}
        self.verdict: dict[tuple[str, str], JobUnschedulable] = {}  # current, per job
        self.counts = NodeCounts()
        self.nodes, self.not_ready = self.counts.nodes, self.counts.not_ready
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.grace = grace
        #: jobs whose current verdict is still to be written, oldest first (a dict: ordered, once)
        self.due: dict[tuple[str, str], None] = {}
        self._due_wake = asyncio.Event()
        self.watermark = 0
        self.written = 0
        #: (ns, pod) → the sequence of the eviction the log asks of it and no ending followed yet:
        #: carried out whenever the pod is seen (one asked while this process was away, or
        #: before its listing, or whose delete failed, was lost — the preemptor waited for good)
        self.stops: dict[tuple[str, str], tuple[int, str]] = {}  # … → (its sequence, its reason)
        self.folded_to = 0  # the last event folded live (first deliveries come in stream order)
        self._stops_wake = asyncio.Event()
        folded = (JobSubmitted, JobUpdated, JobUnschedulable, PlacementProposed, PlacementCommitted, BindingFailed,
                  PlacementRejected, TaskStarted, TaskFinished, JobDeleted, EvictionRequested,
                  NodeRegistered, NodeLost)  # fmt: skip
        self._types = frozenset(c.type_name() for c in folded)
        self.service = EventService(
            name="kube-status", log=event_log,
            filter_subjects=[self.subjects.all_jobs(), self.subjects.all_nodes()],
            handlers=dict.fromkeys(folded, self.on_event),  # type: ignore[arg-type]
        )  # fmt: skip

    def fold(self, event: object) -> None:
        match event:
            case JobSubmitted():
                key = (event.spec.namespace, event.spec.name)
                self.specs[key] = event.spec
                self.verdict.pop(key, None)
                self.placed.pop(key, None)
            case JobUpdated() if (event.namespace, event.name) in self.specs:
                self.specs[(event.namespace, event.name)] = event.spec
            case JobUnschedulable():
                self.verdict[(event.namespace, event.name)] = event
            case PlacementProposed() | PlacementCommitted():
                for p in event.placements:
                    self.placed.setdefault((event.namespace, event.name), set()).add(p.task)
            case PlacementRejected():
                self.placed.pop((event.namespace, event.name), None)
            case TaskFinished() if event.reason in BACK_TO_PENDING:
                self.placed.get((event.namespace, event.name), set()).discard(event.task)
            case BindingFailed():
                self.placed.get((event.namespace, event.name), set()).discard(event.task)
            case JobDeleted():
                self.specs.pop((event.namespace, event.name), None)
                self.verdict.pop((event.namespace, event.name), None)
                self.placed.pop((event.namespace, event.name), None)
            case NodeRegistered() | NodeLost():
                self.counts.fold(event)
            case _:
                pass

    def message(self, v: JobUnschedulable) -> str:
        return self.counts.message(v, self.specs.get((v.namespace, v.name)))

    def _note_stop(self, event: object, seq: int) -> None:
        match event:
            case EvictionRequested():
                self.stops[(event.namespace, event.task)] = (seq, event.reason)
            case TaskFinished() | BindingFailed():
                self.stops.pop((event.namespace, event.task), None)
            case JobDeleted():
                for key in [k for k in self.stops if k[0] == event.namespace and k[1] in self._pods_of(event)]:
                    del self.stops[key]
            case _:
                pass

    def _pods_of(self, event: JobDeleted) -> set[str]:
        spec = self.specs.get((event.namespace, event.name))
        return {pod for pod, _r, _i, _t in task_names(spec)} if spec is not None else set()

    async def on_event(self, event: object, rx: Received) -> None:
        if rx.message.seq <= max(self.watermark, self.folded_to):
            return  # folded already (recovery, or its first delivery: a redelivered eviction
            # after its ending would be a stop again, and a pod made again under its name end)
        self.folded_to = rx.message.seq
        self._note_stop(event, rx.message.seq)
        self.fold(event)
        if isinstance(event, JobUnschedulable):
            self.due[(event.namespace, event.name)] = None
            self._due_wake.set()
        elif isinstance(event, EvictionRequested):
            await self._evict(event.namespace, event.task, event.reason, rx.message.seq)

    async def recover(self) -> None:
        self.watermark = await self.log.last_sequence()
        async for m, event in replay_decoded(self.log, self.service.filter_subjects,
                                             self.watermark, self._types):  # fmt: skip
            self._note_stop(event, m.seq)
            self.fold(event)

    async def _write_verdict(self, v: JobUnschedulable, only: str = "") -> None:
        spec = self.specs.get((v.namespace, v.name))
        if spec is None or self.verdict.get((v.namespace, v.name)) is not v:
            return
        text = self.message(v)
        for pod, _role, _i, _t in task_names(spec):
            if (only and pod != only) or pod in self.placed.get((v.namespace, v.name), ()):
                continue
            obj = self.pods.get((v.namespace, pod))
            if obj is None or pods.node_name(obj):
                continue
            try:
                if await write_condition(self.kube, obj, "Unschedulable", text, self.clock()):
                    await write_event(self.kube, obj, "Warning", "FailedScheduling", text, self.clock())
                    self.written += 1
            except KubeError as exc:
                if exc.status != 404:
                    log.warning("status of %s/%s not written: %s", v.namespace, pod, exc)

    async def _verdicts_loop(self) -> None:
        await self.synced.wait()  # (the listing writes every verdict held then)
        while True:
            await self._due_wake.wait()
            await asyncio.sleep(self.grace)  # the rest of the session's verdicts, and placements
            self._due_wake.clear()
            while self.due:
                key = next(iter(self.due))
                del self.due[key]
                v = self.verdict.get(key)
                if v is None:
                    continue
                try:
                    await self._write_verdict(v)
                except Exception:  # the next verdict, or the next listing, tries again
                    log.exception("verdict of %s/%s not written", *key)

    async def _evict(self, namespace: str, pod: str, reason: str, seq: int) -> None:
        obj = self.pods.get((namespace, pod))
        # (an unbound pod runs nothing: one made again under the name waits for its own binding,
        # whose later commit `stop_concerns` tells apart)
        if obj is None or not pods.node_name(obj) or pods.terminating(obj) or not pods.stop_concerns(obj, seq):
            return
        with contextlib.suppress(KubeError):
            await write_event(self.kube, obj, "Normal", "Preempted" if "preempt" in reason else "Evicted",
                              f"evicted by Tessera: {reason}", self.clock())  # fmt: skip
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        try:  # graceful (the pod's period), and this very pod: never a successor under its name
            await self.kube.delete_this(pods_path(namespace, pod), uid)
        except KubeError as exc:
            log.warning("eviction of %s/%s failed: %s (again in %s s)", namespace, pod, exc, STOP_RETRY)
            asyncio.get_running_loop().call_later(STOP_RETRY, self._stops_wake.set)

    async def _stops_loop(self) -> None:
        """The evictions the log asks and no ending followed: carried out once the pods are
        listed, and again after a failed delete (each is a no-op on a pod already terminating)."""
        await self.synced.wait()
        self._stops_wake.set()
        while True:
            await self._stops_wake.wait()
            self._stops_wake.clear()
            for (ns, pod), (seq, reason) in list(self.stops.items()):
                try:
                    await self._evict(ns, pod, reason, seq)
                except Exception:
                    log.exception("eviction of %s/%s not carried out", ns, pod)

    async def _pods_loop(self) -> None:
        def ours(o: dict[str, Any]) -> bool:
            return pods.scheduler_name(o) in self.scheduler_names

        async for ch in scheduler_pods(self.kube, self.scheduler_names, keep=ours).changes():
            if ch.kind == "synced":
                if not self.synced.is_set():
                    self.synced.set()
                    self.due.clear()  # every verdict is written here
                    for v in list(self.verdict.values()):  # what the log says now, once listed
                        await self._write_verdict(v)
                continue
            r = pods.ref(ch.obj, volcano.replaces_volcano(self.scheduler_names))
            if ch.kind == "delete":
                self.pods.pop((r.namespace, r.name), None)
            else:
                self.pods[(r.namespace, r.name)] = ch.obj
                if (stop := self.stops.get((r.namespace, r.name))) is not None and self.synced.is_set():
                    await self._evict(r.namespace, r.name, stop[1], stop[0])
                v = self.verdict.get((r.namespace, r.job))
                # a pod seen after its verdict (one still due is written with its job's pods)
                if v is not None and self.synced.is_set() and (r.namespace, r.job) not in self.due:
                    await self._write_verdict(v, only=r.name)

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self._pods_loop()), asyncio.create_task(self._verdicts_loop()),
                 asyncio.create_task(self._stops_loop())]  # fmt: skip
        try:
            await self.service.run(stopping)
        finally:
            await cancel_all(tasks)
