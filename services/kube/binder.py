"""The allocator's binder: every committed task becomes one `pods/binding` carrying HAMi's
annotations, so HAMi's device plugins serve `Allocate` for it unchanged (hami.md §3.3).

It is a projection of the log, not a queue of messages: a task is owed a binding from its
`PlacementCommitted` until it starts, finishes, fails to bind or its job is deleted. At start the
owed bindings are rebuilt by replay and issued again; the API server makes that harmless (a pod
already bound answers 409 and is checked to be on our node; a pod recreated under the same name
has another uid and is refused), so a crash between commit and bind loses nothing and binds
nothing twice. Bindings run concurrently, many in flight.

HAMi's device plugin finds the pod it serves in `Allocate` from the node lock
(`hami.io/mutex.lock: <RFC3339>,<ns>,<pod>`) and otherwise by listing the node's pods whose
bind phase is `allocating`, which is ambiguous when two device pods bind to one node at once.
So, as HAMi's scheduler does, a device pod is bound only while Tessera holds that node's lock
(a merge patch carrying the node's resourceVersion, so two binders cannot both take it); the
plugin releases it when the allocation succeeded or failed. A lock older than the expiry, or
held by a pod that already started or is gone, is taken over. Pods without devices need none,
nor pods whose cards are all whole cards of the vendor's own plugin (`mode: plugin`, no HAMi
registration): the kubelet and that plugin choose the device, no HAMi plugin reads the pod's
annotations or releases the lock, so the binding carries neither.

A binding carries the commit it is for (`tessera.io/placement`), so a 409 is "done already"
only for a pod bound for that very commit. A Volcano Job's pods are the job controller's to
make, and under a client's QPS budget they may come seconds after the commit: such a binding is
issued once the binder's own watch of unbound Volcano Job pods shows the pod (each attempt before
it cost a node lock, a refused binding and the lock's release: three of the allocator's requests,
~2 per pod in a churn at 50 QPS). A binding that still meets no pod (404), or the previous pod of
that name still bound (409, a restart under way), waits for the next such pod. What the watch
cannot show — a pod bound before a restart of this process, so never unbound in its list — is
asked for by name (one GET, not the three requests): at once for a binding owed from before the
start, and for any binding still waiting after a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts import hami
from contracts.devices import CardSpec
from contracts.events import (
    BindingFailed,
    JobDeleted,
    JobSubmitted,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import TaskSpec
from services.core.holdback import Unfitted
from services.core.scheduling.snapshot import task_names
from services.core.scheduling.storage import SELECTED_NODE
from services.core.stamps import utc_stamp
from services.core.taskindex import ByJob
from services.kube import pods, status, volcano
from services.kube.client import Kube, KubeError, claims_path, nodes_path, pods_path
from services.kube.listwatch import Reflector, object_key
from services.kube.storagesource import StorageSource
from services.runtime.eventlog import EventLog
from services.runtime.service import EventService, Outgoing, Received, replay_decoded
from services.runtime.tasks import cancel_all
from services.runtime.waits import within

log = logging.getLogger(__name__)

TaskKey = tuple[str, str, str]  # namespace, job, task (= pod name)
_FOLDED = (JobSubmitted, JobUpdated, JobDeleted, NodeRegistered, PlacementCommitted, TaskStarted,
           TaskFinished, BindingFailed)  # fmt: skip


@dataclass
class BinderStats:
    bound: int = 0
    already: int = 0  # re-issued bindings the API server said were done
    failed: int = 0
    retries: int = 0
    lock_waits: int = 0
    pod_waits: int = 0  # a Volcano Job's pod not (re)created yet when its binding was due
    pod_checks: int = 0  # a waiting binding's pod asked for by name (the watch cannot show it bound)
    claim_waits: int = 0  # bindings held until their WaitForFirstConsumer claims were bound
    first_bind: float = 0.0
    last_bind: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    announced: int = 0  # `Scheduled` Events written
    unannounced: int = 0  # `Scheduled` Events dropped: their queue full, or the API refused
    latencies: list[float] = field(default_factory=list)


#: `Scheduled` Events waiting to be written, at most (kube-scheduler's event broadcaster
#: queues 1,000 too, and drops beyond: an Event is a courtesy, the binding is the fact)
ANNOUNCE_BACKLOG = 1000
ANNOUNCERS = 4
#: seconds a device pod waits on another pod's node lock before it says so (an Allocate takes
#: about one: a wait this long is a device plugin that does not answer)
LOCK_TOLD_AFTER = 10.0
#: seconds a binding waits for its Volcano Job pod's watch event before that pod is asked for by
#: name, again and again: the watch shows every pod made or bound while it runs, so this is a
#: backstop. A binding owed from before this process started is asked for at once: its pod may
#: have been bound by the previous process, and such a pod is never unbound in this one's watch.
POD_RECHECK = 60.0
#: seconds after the start that bindings wait for that watch's first list: past them (the list
#: refused — a ClusterRole from before the binder watched pods — or slow) they are tried as they
#: were before it, at once
UNBOUND_LIST_WAIT = 10.0
#: seconds a task whose binding was refused is held back from placement, doubling with each
#: refusal in a row up to the cap: kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds
#: (1 s, 10 s). Given back at once, a refused pod was placed, booked and refused again every
#: session (~0.4 s), four events and a ledger reserve/release each time, for as long as it lasted
BIND_BACKOFF = 1.0
BIND_BACKOFF_MAX = 10.0
#: jobs whose refusals in a row are counted, at most (the oldest forgotten first)
BIND_FAILURES_KEPT = 10_000
#: the pods the binder watches: Volcano Job pods (the job controller's, made after the commit)
#: not bound yet — each is sent once made and once more as it is bound (it leaves the selection)
UNBOUND_JOB_PODS = {"labelSelector": volcano.JOB_NAME, "fieldSelector": "spec.nodeName="}


def _bound_for(pod: dict, stamp: str) -> bool:
    """The pod was bound for the commit `stamp` names (no stamp: bound before stamps existed)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(volcano.PLACEMENT, stamp) == stamp


#: what the API server says when a binding's uid is not its pod's (BindingREST's update with the
#: uid as its precondition: 409 Conflict, "… Precondition failed: UID in precondition: …")
UID_PRECONDITION = "Precondition failed: UID in precondition"


def _replaced(exc: KubeError) -> bool:
    """The binding was refused because the pod of its name is another (deleted and made again):
    its job is read again as for a pod not found (podsource `_pod_gone`). Backed off as any 409
    instead, a job whose pod went unseen was placed and refused every 10 s for good."""
    return exc.status == 409 and UID_PRECONDITION in exc.message


class Binder:
    def __init__(
        self,
        event_log: EventLog,
        kube: Kube,
        *,
        node_lock: bool = True,
        lock_expire: float = 300.0,
        lock_told_after: float = LOCK_TOLD_AFTER,
        workers: int = 64,
        clock: Callable[[], float] = time.time,
        storage: StorageSource | None = None,
        claim_timeout: float = 600.0,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.kube = kube
        self.node_lock = node_lock
        self.lock_expire = lock_expire
        self.lock_told_after = lock_told_after
        self.clock = clock
        self.n_workers = workers
        self.cards: dict[str, CardSpec] = {}
        self.specs: dict[tuple[str, str], dict[str, tuple[TaskSpec, str]]] = {}
        self.controlled: set[tuple[str, str]] = set()  # Volcano Jobs: the job controller makes their pods
        self._waits: dict[TaskKey, int] = {}
        #: bindings refused in a row, by job then pod (`BIND_BACKOFF`); a bound pod starts over
        self._refusals: dict[tuple[str, str], dict[str, int]] = {}
        #: the Volcano Job pods not bound yet, "ns/pod" → the pod (None: not watched, in a test
        #: driving the binder alone: every binding is asked for at once, as before the watch)
        self.unbound: dict[str, dict] | None = None
        self.unbound_listed = asyncio.Event()
        self._unbound_due = 0.0  # (loop time) bindings wait for that list until then, not after
        self._pod_waiters: dict[str, TaskKey] = {}  # "ns/pod" → the binding waiting for it
        self._pod_checks: asyncio.Queue[TaskKey] = asyncio.Queue()
        self.recovered_to = 0  # the log's last sequence at start: commits up to it are inherited
        self.owed: ByJob[TaskKey, TaskPlacement] = ByJob()
        self.done: set[TaskKey] = set()  # bound, not yet started
        self.gone: dict[TaskKey, None] = {}  # recently started/finished/deleted (ordered)
        self.commit_seq: dict[TaskKey, int] = {}
        self.queue: asyncio.Queue[TaskKey] = asyncio.Queue()
        self.announce: asyncio.Queue[tuple[str, str, str, str]] = asyncio.Queue(ANNOUNCE_BACKLOG)
        self.watermark = 0
        self.stats = BinderStats()
        self.nodes: dict[str, dict] = {}  # node name -> Node object (for the HAMi lock)
        self._node_changed: dict[str, asyncio.Event] = {}
        self._node_busy: dict[str, asyncio.Lock] = {}
        #: the claims the binder reads (None: no cluster storage known, pods bind as they are)
        self.storage = storage
        self.claim_timeout = claim_timeout  # kube-scheduler's bindTimeoutSeconds
        self._claim_since: dict[TaskKey, float] = {}  # a binding held for its claims since
        self._claim_waiters: dict[tuple[str, str], set[TaskKey]] = {}
        if storage is not None:
            storage.on_claim = self._claim_changed
        self.service = EventService(
            name="binder", log=event_log,
            filter_subjects=[self.subjects.all_nodes(), self.subjects.all_jobs()],
            handlers=dict.fromkeys(_FOLDED, self.on_event),  # type: ignore[arg-type]
        )  # fmt: skip

    # --- projection ----------------------------------------------------------------------------

    def fold(self, event: object, seq: int = 0) -> None:
        match event:
            case NodeRegistered():
                for c in event.cards:
                    self.cards[c.uuid] = c
            case JobSubmitted():
                spec = event.spec
                self.specs[(spec.namespace, spec.name)] = {
                    pod: (t, t.annotations.get(pods.POD_UID, "")) for pod, _r, _i, t in task_names(spec)
                }
                if spec.kind == "Job":
                    self.controlled.add((spec.namespace, spec.name))
                for key in self.owed.of_job(spec.namespace, spec.name):
                    self._settle(key)  # a resubmitted job starts over
                self._refusals.pop((spec.namespace, spec.name), None)
            case JobUpdated() if (event.namespace, event.name) in self.specs:
                # the added pods' templates; a removed pod keeps its own until it is gone
                self.specs[(event.namespace, event.name)].update(
                    (pod, (t, t.annotations.get(pods.POD_UID, ""))) for pod, _r, _i, t in task_names(event.spec))
            case PlacementCommitted() if not event.existing:
                for p in event.placements:
                    key = (event.namespace, event.name, p.task)
                    self.owed[key] = p
                    self.commit_seq[key] = seq
                    self.done.discard(key)
                    self.gone.pop(key, None)
                    self.queue.put_nowait(key)
            case TaskStarted() | TaskFinished() | BindingFailed():
                self._settle((event.namespace, event.name, event.task))
            case JobDeleted():
                self.specs.pop((event.namespace, event.name), None)
                self.controlled.discard((event.namespace, event.name))
                self._refusals.pop((event.namespace, event.name), None)
                for key in self.owed.of_job(event.namespace, event.name):
                    self._settle(key)
            case _:
                pass

    def _settle(self, key: TaskKey) -> None:
        if self.owed.pop(key, None) is not None:
            self.gone[key] = None
            if len(self.gone) > 10_000:  # only recent ones matter (a lock they may still hold)
                del self.gone[next(iter(self.gone))]
        self.commit_seq.pop(key, None)
        self.done.discard(key)
        self._waits.pop(key, None)
        self._claim_since.pop(key, None)
        self._pod_waiters.pop(f"{key[0]}/{key[2]}", None)

    async def on_event(self, event: object, rx: Received) -> None:
        if rx.message.seq > self.watermark:
            self.fold(event, rx.message.seq)

    async def recover(self) -> None:
        if self.storage is not None:
            await self.storage.recover()
        self.watermark = self.recovered_to = await self.log.last_sequence()
        wanted = frozenset(c.type_name() for c in _FOLDED)
        async for msg, event in replay_decoded(self.log, self.service.filter_subjects,
                                                self.watermark, wanted):  # fmt: skip
            self.fold(event, msg.seq)
        log.info("binder: %d bindings owed after replay up to #%d", len(self.owed), self.watermark)

    # --- acting --------------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self._worker()) for _ in range(self.n_workers)]
        tasks += [asyncio.create_task(self._announcer()) for _ in range(ANNOUNCERS)]
        if self.node_lock:
            tasks.append(asyncio.create_task(self._watch_nodes()))
        self.unbound = {}
        self._unbound_due = asyncio.get_running_loop().time() + UNBOUND_LIST_WAIT
        tasks += [asyncio.create_task(self._watch_unbound()), asyncio.create_task(self._check_pods())]
        if self.storage is not None:
            tasks.append(asyncio.create_task(self.storage.run(stopping)))
        try:
            await self.service.run(stopping)
        finally:
            await cancel_all(tasks)

    async def warn_unfitted(self, u: Unfitted) -> None:
        """`kubectl describe pod` on a running pod whose cards Tessera had to guess shows why
        its node's cards are held back; the pod may be another scheduler's, so it is named, not
        read (its uid unknown: the Event's name still dedups by what it says)."""
        about = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": u.pod, "namespace": u.namespace}}
        await status.write_event(self.kube, about, "Warning", "UnfittedRunningPod", u.text, self.clock())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            placement = self.owed.get(key)
            if placement is None or key in self.done:
                continue
            try:
                await self._bind(key, placement)
            except Exception:
                log.exception("binding %s failed unexpectedly; retrying", "/".join(key))
                self.stats.retries += 1
                await asyncio.sleep(0.5)
                self.queue.put_nowait(key)

    async def _bind(self, key: TaskKey, p: TaskPlacement) -> None:
        ns, job, pod = key
        spec, uid = self.specs.get((ns, job), {}).get(pod, (None, ""))
        stamp = str(self.commit_seq.get(key, 0))
        if (ns, job) in self.controlled and self.unbound is not None:
            wait = self._unbound_due - asyncio.get_running_loop().time()
            if not self.unbound_listed.is_set() and wait > 0:  # (refused: a role from before the watch, say)
                with contextlib.suppress(TimeoutError):
                    await within(self.unbound_listed.wait(), wait)
            if self.unbound_listed.is_set() and not self._made(f"{ns}/{pod}"):
                self._wait_for_pod(key)
                return
        if spec is not None and spec.claims and self.storage is not None:
            held = await self._claims_bound(key, p, spec.claims)
            if held is not None:
                if held:
                    await self._fail(key, p, held)
                return  # waiting: a change of the claim (or the timeout) queues it again
        annotations = {**pods.binding_annotations(p, spec, self.cards, self.clock()), volcano.PLACEMENT: stamp}
        locked = self.node_lock and pods.hami_slices(p, self.cards)
        busy = self._node_busy.setdefault(p.node, asyncio.Lock()) if locked else None
        async with busy or contextlib.nullcontext():
            if locked and not await self._acquire(p.node, ns, pod, uid):
                self.queue.put_nowait(key)  # the node was deleted: try again once it is back
                return
            if self.owed.get(key) is not p:
                if locked:
                    await self._release(p.node, ns, pod)
                return  # settled while we waited
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            started = time.perf_counter()
            asked_of = self.unbound.get(f"{ns}/{pod}") if self.unbound is not None else None
            try:
                await self.kube.create(pods_path(ns, pod, "binding"),
                                       pods.binding(ns, pod, uid, p.node, annotations))  # fmt: skip
            except KubeError as exc:
                self.stats.in_flight -= 1
                await self._refused(key, p, exc, locked, stamp, asked_of)
                return
            self.stats.in_flight -= 1
            now = time.perf_counter()
            self.stats.latencies.append(now - started)
            self.stats.bound += 1
            self.stats.first_bind = self.stats.first_bind or now
            self.stats.last_bind = now
            self.done.add(key)
            if (refused := self._refusals.get((ns, job))) is not None and refused.pop(pod, None) and not refused:
                del self._refusals[(ns, job)]
        try:
            self.announce.put_nowait((ns, pod, uid, p.node))
        except asyncio.QueueFull:
            self.stats.unannounced += 1

    async def _announcer(self) -> None:
        """`kubectl describe pod` shows who placed the pod and where, as for kube-scheduler's
        and Volcano's pods: a Normal `Scheduled` Event, "Successfully assigned NS/POD to NODE",
        written after the binding and apart from it (the next binding does not wait for it)."""
        while True:
            ns, pod, uid, node = await self.announce.get()
            about = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": ns, "uid": uid}}
            try:
                await status.write_event(self.kube, about, "Normal", "Scheduled",
                                         f"Successfully assigned {ns}/{pod} to {node}", self.clock())  # fmt: skip
                self.stats.announced += 1
            except Exception as exc:  # any failure: a writer that ended would end them all, one by one
                self.stats.unannounced += 1
                log.debug("Scheduled event for %s/%s not written: %s", ns, pod, exc)

    async def _refused(self, key: TaskKey, p: TaskPlacement, exc: KubeError, locked: bool, stamp: str,
                       asked_of: dict | None = None) -> None:  # fmt: skip
        ns, job, pod = key
        current: dict | None = None
        if exc.status == 409:
            with contextlib.suppress(KubeError):
                current = await self.kube.get(pods_path(ns, pod))
            if current is not None and pods.node_name(current) == p.node and _bound_for(current, stamp):
                self.stats.already += 1
                self.done.add(key)
                return  # bound by our earlier attempt (a restart re-issued it)
        if locked:
            await self._release(p.node, ns, pod)
        if (ns, job) in self.controlled and exc.status in (404, 409):
            # A Volcano Job's pod not created yet, or its previous incarnation (before a
            # restart) not gone yet: the job controller is on it; bind once the pod is there.
            if self.unbound is not None and self.unbound_listed.is_set():
                if self._made(f"{ns}/{pod}") and self.unbound.get(f"{ns}/{pod}") is not asked_of:
                    # the watch brought another pod (made again) while the binding was out:
                    # asked of that one now — an unbound pod nothing changes has no next word
                    self.queue.put_nowait(key)
                elif self._made(f"{ns}/{pod}"):
                    self._wait_for_pod(key)  # the watch is behind: its next word on the pod wakes it
                else:  # it said the pod went while the binding was asked: what is there now
                    self._pod_checks.put_nowait(key)
                return
            n = self._waits.get(key, 0)
            self._waits[key] = n + 1
            self.stats.pod_waits += 1
            asyncio.get_running_loop().call_later(min(0.1 * 2**n, 2.0), self.queue.put_nowait, key)
            return
        if exc.status in (404, 409, 422, 400):
            reason = pods.POD_NOT_FOUND if exc.status == 404 else pods.POD_REPLACED if _replaced(exc) \
                else f"{exc.status} {exc.reason}: {exc.body[:200]}"  # fmt: skip
            await self._fail(key, p, reason)
            return
        log.warning("binding %s/%s: %s; retrying", ns, pod, exc)  # API briefly unavailable
        self.stats.retries += 1
        await asyncio.sleep(0.5)
        self.queue.put_nowait(key)

    async def _fail(self, key: TaskKey, p: TaskPlacement, reason: str) -> None:
        """The task is not bound: its slices are released and it waits again (BindingFailed),
        held back from placement for a while that doubles with each refusal in a row
        (`BIND_BACKOFF`, kube-scheduler's backoff queue) — its `retry_at`, which the scheduler
        honours (and for which it takes no victims)."""
        ns, job, pod = key
        self.stats.failed += 1
        refused = self._refusals.pop((ns, job), None) or {}  # (re-inserted last: the oldest go first)
        while len(self._refusals) >= BIND_FAILURES_KEPT:
            del self._refusals[next(iter(self._refusals))]
        self._refusals[(ns, job)] = refused
        n = refused[pod] = refused.get(pod, 0) + 1
        delay = min(BIND_BACKOFF * 2 ** min(n - 1, 16), BIND_BACKOFF_MAX)
        log.warning("binding %s/%s to %s refused: %s; placed again in %.0f s", ns, pod, p.node, reason, delay)
        event = BindingFailed(namespace=ns, name=job, task=pod, node=p.node, reason=reason,
                              retry_at=self.clock() + delay)  # fmt: skip
        await self.service.publish(Outgoing(self.subjects.job(ns, job), event,
                                            msg_id=f"bindfail:{ns}/{job}/{pod}:{self.commit_seq.get(key, 0)}"))  # fmt: skip
        self._settle(key)

    # --- a Volcano Job's pods, made by the job controller after the commit --------------------

    async def _watch_unbound(self) -> None:
        assert self.unbound is not None
        async for ch in Reflector(self.kube, pods_path(), query=UNBOUND_JOB_PODS).changes():
            if ch.kind == "synced":
                self.unbound_listed.set()
                for name in [n for n in self._pod_waiters if self._made(n)]:  # a relist brought it
                    self._wake(name, self.queue)
            elif ch.kind == "delete":
                # bound (by this binder before a lost answer, or by another) or deleted: the
                # API server says which, for one GET
                self.unbound.pop(ch.key, None)
                self._wake(ch.key, self._pod_checks)
            else:
                self.unbound[ch.key] = ch.obj
                if self._made(ch.key):
                    self._wake(ch.key, self.queue)

    def _made(self, name: str) -> bool:
        """The watch shows the pod made, unbound and not being deleted: a binding may go."""
        assert self.unbound is not None
        obj = self.unbound.get(name)
        return obj is not None and not pods.terminating(obj)

    def _wake(self, name: str, to: asyncio.Queue[TaskKey]) -> None:
        if (key := self._pod_waiters.pop(name, None)) is not None and key in self.owed:
            to.put_nowait(key)

    def _wait_for_pod(self, key: TaskKey) -> None:
        """The binding waits for its pod's watch event, and asks for it by name now and then."""
        name = f"{key[0]}/{key[2]}"
        self._pod_waiters[name] = key
        self.stats.pod_waits += 1
        n = self._waits.get(key, 0)
        self._waits[key] = n + 1
        inherited = n == 0 and self.commit_seq.get(key, 0) <= self.recovered_to
        asyncio.get_running_loop().call_later(0.0 if inherited else POD_RECHECK, self._check_due, key, n + 1)

    def _check_due(self, key: TaskKey, wait: int) -> None:
        if self._waits.get(key) == wait and self._pod_waiters.get(f"{key[0]}/{key[2]}") == key:
            del self._pod_waiters[f"{key[0]}/{key[2]}"]
            self._pod_checks.put_nowait(key)

    async def _check_pods(self) -> None:
        """A waiting binding's pod as the API server has it now: unbound (the watch is behind)
        is bound; bound for this very commit (before a restart, or an answer lost) is done;
        absent, or another incarnation, waits on."""
        while True:
            key = await self._pod_checks.get()
            ns, _job, pod = key
            if (p := self.owed.get(key)) is None or key in self.done:
                continue
            self.stats.pod_checks += 1
            try:
                obj: dict | None = await self.kube.get(pods_path(ns, pod))
            except KubeError as exc:
                obj = None
                if exc.status != 404:
                    log.debug("pod %s/%s not read: %s", ns, pod, exc)
            if self.owed.get(key) is not p or f"{ns}/{pod}" in self._pod_waiters:
                continue  # settled, or waiting anew, meanwhile
            if self._made(f"{ns}/{pod}"):  # the watch brought it while it was read
                self.queue.put_nowait(key)
            elif obj is not None and not pods.terminating(obj) and not pods.node_name(obj):
                assert self.unbound is not None
                self.unbound.setdefault(object_key(obj), obj)
                self.queue.put_nowait(key)
            elif obj is not None and pods.node_name(obj) == p.node \
                    and _bound_for(obj, str(self.commit_seq.get(key, 0))):  # fmt: skip
                self.stats.already += 1
                self.done.add(key)
            else:
                self._wait_for_pod(key)

    # --- PersistentVolumeClaims (kube-scheduler's VolumeBinding: PreBind) ----------------------

    async def _claims_bound(self, key: TaskKey, p: TaskPlacement, claims: tuple[str, ...]) -> str | None:
        """None once every claim of the pod is bound; "" while one is not (its WaitForFirstConsumer
        claims are given the chosen node as `selected-node` first, for the provisioner or the PV
        controller); else why the pod must not be bound there: a claim selected for another node
        (never bind elsewhere), or not bound within `claim_timeout` — the slices go back and the
        scheduler places it again (on the selected node, the only one it then allows)."""
        assert self.storage is not None
        await self.storage.claims_listed.wait()
        ns = key[0]
        waiting = False
        for name in claims:
            obj = self.storage.claim(ns, name)
            if obj is None:  # deleted since the session placed the pod: it waits for it
                waiting = True
                self._claim_waiters.setdefault((ns, name), set()).add(key)
                continue
            spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
            if spec.get("volumeName") and (obj.get("status") or {}).get("phase") == "Bound":
                continue
            selected = (meta.get("annotations") or {}).get(SELECTED_NODE, "")
            if selected and selected != p.node:
                return f"PersistentVolumeClaim {ns}/{name} is selected for node {selected}, not {p.node}"
            waiting = True
            # a waiter before the patch's await: a change the watch brings while the patch is
            # out (a 409 says there was one) wakes it — registered after, that wake was lost
            # and the pod waited out claim_timeout on a claim bound long before
            self._claim_waiters.setdefault((ns, name), set()).add(key)
            if not selected:  # at the version read: a 409 means it changed, and the watch says how
                patch = {"metadata": {"annotations": {SELECTED_NODE: p.node},
                                      "resourceVersion": meta.get("resourceVersion")}}  # fmt: skip
                try:
                    await self.kube.patch(claims_path(ns, name), patch)
                except KubeError as exc:
                    if exc.status not in (404, 409):
                        raise
        if not waiting:
            self._claim_since.pop(key, None)
            return None
        now = self.clock()
        since = self._claim_since.setdefault(key, now)
        if since == now:
            self.stats.claim_waits += 1
        if now - since >= self.claim_timeout:
            return f"PersistentVolumeClaims of {ns}/{key[2]} not bound within {self.claim_timeout:g}s"
        asyncio.get_running_loop().call_later(self.claim_timeout - (now - since), self.queue.put_nowait, key)
        return ""

    def _claim_changed(self, ns: str, name: str) -> None:
        for key in self._claim_waiters.pop((ns, name), ()):
            if key in self.owed:
                self.queue.put_nowait(key)

    # --- HAMi node lock --------------------------------------------------------------------------

    async def _lock_wait_told(self, node: str, ns: str, pod: str, uid: str, lock: str) -> None:
        """A device pod kept from binding by another pod's node lock for longer than an Allocate
        takes says so, on the pod and in the log: HAMi's device plugin releases the lock once it
        has allocated the holder's devices, so a lock held on is a node whose plugin does not
        answer (not running, or the holder never reached its kubelet). Until the expiry every
        device pod of that node waits, and `get po` shows them committed."""
        holder = hami.lock_holder(lock)
        at, hns, hpod = holder if holder is not None else (0.0, "", "?")
        message = (f"waiting for the HAMi node lock of {node}, held by {hns}/{hpod} since {utc_stamp(at)}: the "
                   f"device plugin on {node} releases it once that pod's devices are allocated; taken "
                   f"over at {utc_stamp(at + self.lock_expire)} if it does not")  # fmt: skip
        log.warning("%s/%s %s (is a device plugin running on %s?)", ns, pod, message, node)
        about = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": ns, "uid": uid}}
        with contextlib.suppress(KubeError):
            await status.write_event(self.kube, about, "Warning", "NodeLockHeld", message, self.clock())

    async def _watch_nodes(self) -> None:
        async for ch in Reflector(self.kube, nodes_path()).changes():
            if ch.kind == "synced":
                continue
            name = str((ch.obj.get("metadata") or {}).get("name") or "")
            if ch.kind == "delete":
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = ch.obj
            self._node_changed.setdefault(name, asyncio.Event()).set()

    def _takeable(self, value: str, ns: str, pod: str) -> bool:
        holder = hami.lock_holder(value)
        if holder is None:
            return True
        at, hns, hpod = holder
        if (hns, hpod) == (ns, pod) or self.clock() - at > self.lock_expire:
            return True
        # held by a pod that started, finished or is gone: the plugin is done with it
        return any(k[0] == hns and k[2] == hpod for k in self.gone)

    async def _acquire(self, node: str, ns: str, pod: str, uid: str = "") -> bool:
        changed = self._node_changed.setdefault(node, asyncio.Event())
        since: float | None = None  # waiting for another pod's lock since
        told = False
        while True:
            obj = self.nodes.get(node)
            if obj is None:
                try:
                    obj = await self.kube.get(nodes_path(node))
                except KubeError as exc:
                    if exc.status == 404:
                        return False
                    raise
                # a copy the watch stored while the read was out is as new or newer, and it is
                # the watch's word that `changed` stands for: the read's answer put over it
                # showed a lock already released as held until the node's next change
                obj = self.nodes.setdefault(node, obj)
            meta = obj.get("metadata") or {}
            current = (meta.get("annotations") or {}).get(hami.NODE_LOCK, "")
            if current and not self._takeable(current, ns, pod):
                self.stats.lock_waits += 1
                changed.clear()  # before the await below: a release meanwhile is not missed
                now = self.clock()
                since = now if since is None else since
                if not told and now - since >= self.lock_told_after:
                    told = True
                    await self._lock_wait_told(node, ns, pod, uid, current)
                with contextlib.suppress(TimeoutError):
                    await within(changed.wait(), 1.0)
                continue
            patch = {"metadata": {"annotations": {hami.NODE_LOCK: hami.lock_value(self.clock(), ns, pod)}}}
            if meta.get("resourceVersion"):
                patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
            try:
                self.nodes[node] = await self.kube.patch(nodes_path(node), patch)
                return True
            except KubeError as exc:
                if exc.status != 409:
                    raise
                self.nodes.pop(node, None)  # someone else wrote the node: read it again

    async def _release(self, node: str, ns: str, pod: str) -> None:
        """Erase the lock if it is still ours, with the resourceVersion it was read at: a 409
        means the node changed (the plugin released it, another binder took it), so the node is
        read again and the lock erased only if it still names this pod — never another holder's."""
        for _attempt in range(5):
            obj = self.nodes.get(node) or {}
            meta = obj.get("metadata") or {}
            current = (meta.get("annotations") or {}).get(hami.NODE_LOCK, "")
            holder = hami.lock_holder(current) if current else None
            if holder is None or holder[1:] != (ns, pod):
                return
            patch: dict[str, Any] = {"metadata": {"annotations": {hami.NODE_LOCK: None}}}
            if meta.get("resourceVersion"):
                patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
            try:
                self.nodes[node] = await self.kube.patch(nodes_path(node), patch)
                return
            except KubeError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    log.warning("node lock of %s not released: %s", node, exc)
                    return
            try:
                self.nodes[node] = await self.kube.get(nodes_path(node))
            except KubeError:
                return
