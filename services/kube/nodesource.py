"""The node agent on a cluster: one process for every node (HAMi's scheduler reads nodes the
same way). Nodes become `NodeRegistered` / `NodeLost`, HAMi's handshakes are answered, and the
phases of Tessera's pods become the task events the queue service consumes.

Each report is appended only when the log says otherwise (the last node event per node, the
task's state as folded from the log), with an id derived from the commit it follows, so a
restart — a fresh list of the API server against a replayed log — reports only what changed.
A pod that is deleted while it runs finishes with exit code -1 ("pod deleted").

Every pod bound to a node counts there, as kube-scheduler's NodeInfo counts it: one watch of
the bound pods (`spec.nodeName!=`), and what the pods of other schedulers hold (default-scheduler,
DaemonSets, static pods) is summed per node and appended as `NodeUsage` when it changes, so
sessions place Tessera's pods only in what is left (issue 28).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from contracts import hami
from contracts.base import Event
from contracts.envelope import TYPE, content_id
from contracts.events import (
    BindingFailed,
    JobDeleted,
    JobSubmitted,
    NodeLost,
    NodeRegistered,
    NodesListed,
    NodeUsage,
    OtherPods,
    PlacementCommitted,
    RunningTask,
    TaskFinished,
    TaskStarted,
)
from contracts.registry import default_registry
from services.core.devices import build_vendors
from services.core.devices.catalogue import Catalogue, default_catalogue
from services.core.scheduling.snapshot import POD_DELETED
from services.core.taskindex import ByJob
from services.core.workload import admit
from services.core.workload.devicerequests import hami_parser
from services.kube import nodes, pods, volcano
from services.kube.client import Kube, KubeError, nodes_path, pods_path
from services.kube.listwatch import Reflector
from services.nodeagent.registration import listing_owed
from services.runtime.eventlog import Conflict, EventLog
from services.runtime.service import EventService, Outgoing, Received, replay_decoded
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)

COMMITTED, STARTED, FINISHED = "committed", "started", "finished"
#: seconds before a node's usage whose append failed (the log out of reach) is tried again
USAGE_RETRY = 1.0
#: nodes of a listing appended in one pipeline (`register_listing`)
LISTING_CHUNK = 500
_FOLDED = (JobSubmitted, JobDeleted, PlacementCommitted, TaskStarted, TaskFinished, BindingFailed)


def _same(last: Event | None, new: Event) -> bool:
    """Registrations are compared without the running pods (booked once, with the first), and a
    last one that names no uid (written before registrations carried it) as if it named the new
    one's: an upgraded agent does not register every node again for the uid alone."""
    if isinstance(last, NodeRegistered) and isinstance(new, NodeRegistered):
        return msgspec.structs.replace(last, running=(), uid=last.uid or new.uid) == \
            msgspec.structs.replace(new, running=())  # fmt: skip
    return last == new


class KubeNodeAgent:
    def __init__(
        self,
        event_log: EventLog,
        kube: Kube,
        *,
        scheduler_names: Iterable[str] = ("volcano", "tessera"),
        catalogue: Catalogue | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.kube = kube
        self.scheduler_names = frozenset(scheduler_names)
        self.catalogue = catalogue or default_catalogue()
        self.clock = clock
        self.registry = default_registry()
        self.tasks: ByJob[tuple[str, str, str], tuple[str, int]] = ByJob()  # (ns, job, pod) -> (state, commit seq)
        #: the tasks whose last commit is `existing` (their pods bound before the log placed
        #: them): their pods are theirs whatever commit another log stamped on them
        self.adopted: ByJob[tuple[str, str, str], int] = ByJob()
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}  # (ns, pod) -> Pod
        self.pods_on: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}  # node -> its pods
        self.node_last: dict[str, Event] = {}
        #: node → the problems its Node last had (`nodes.NodeView.problems`), each logged once
        #: when it appears: logged at every Node event, a card kept off (a MIG card with no
        #: geometry) was a warning per card every 30 s (HAMi's handshake changes the Node)
        self.node_problems: dict[str, frozenset[str]] = {}
        self.node_seq: dict[str, int] = {}  # the node subject's last sequence, as last seen
        self.node_writes = 0  # node events this process appended (see `_listed`)
        self.listing_done = asyncio.Event()  # the first listing is handled (and announced if owed)
        #: node -> (ns, pod) -> what each pod of another scheduler bound there requests
        self.foreign: dict[str, dict[tuple[str, str], dict[str, int]]] = {}
        #: node -> (ns, pod) -> its namespace, labels and affinity terms (NodeUsage.others)
        self.foreign_who: dict[str, dict[tuple[str, str], OtherPods]] = {}
        self.usage_last: dict[str, tuple[NodeUsage, int]] = {}  # node -> last appended, its seq
        self._usage_dirty: set[str] = set()
        self._usage_wake = asyncio.Event()
        self.pods_listed = asyncio.Event()
        vendors = build_vendors(self.catalogue)
        self.parser = hami_parser(vendors)
        self.device_names = vendors.resource_names()
        self.watermark = 0
        self.folded_to = 0  # the last job event this process folded (its consumer goes in order)
        #: (ns, pod) -> (stamp, pod): pods of ours deleted before this process folded the commit
        #: they were bound for (its log reading behind the binder's): reported once it is folded
        self.gone_early: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        self._lock = asyncio.Lock()
        self.service = EventService(
            name="nodeagent", log=event_log, filter_subjects=[self.subjects.all_jobs()],
            handlers=dict.fromkeys(_FOLDED, self.on_event),  # type: ignore[arg-type]
        )  # fmt: skip

    # --- projection ----------------------------------------------------------------------------

    def fold(self, event: Event, seq: int) -> list[tuple[str, str, str]]:
        """Fold one job event; returns the tasks whose pods should be looked at again."""
        match event:
            case PlacementCommitted():
                keys = [(event.namespace, event.name, p.task) for p in event.placements]
                for k in keys:
                    self.tasks[k] = (COMMITTED, seq)
                    if event.existing:
                        self.adopted[k] = seq
                    else:
                        self.adopted.pop(k, None)
                return keys
            case BindingFailed():
                self.tasks.pop((event.namespace, event.name, event.task), None)
            case TaskStarted():
                k = (event.namespace, event.name, event.task)
                self.tasks[k] = (STARTED, self.tasks.get(k, ("", seq))[1])
            case TaskFinished():
                k = (event.namespace, event.name, event.task)
                self.tasks[k] = (FINISHED, self.tasks.get(k, ("", seq))[1])
            case JobDeleted() | JobSubmitted():
                ns, name = (event.spec.namespace, event.spec.name) if isinstance(event, JobSubmitted) \
                    else (event.namespace, event.name)  # fmt: skip
                self.tasks.forget_job(ns, name)
                self.adopted.forget_job(ns, name)
            case _:
                pass
        return []

    async def on_event(self, event: Event, rx: Received) -> None:
        seq = rx.message.seq
        if seq <= self.watermark:
            return
        async with self._lock:
            keys = self.fold(event, seq)
            self.folded_to = max(self.folded_to, seq)
        for ns, _job, pod in keys:
            obj = self.pods.get((ns, pod))
            early = self.gone_early.get((ns, pod))
            if early is not None and early[0] == seq:
                await self._report_pod(early[1], deleted=True)
                del self.gone_early[(ns, pod)]  # told (a failed append: delivered again, told then)
            if obj is not None:
                await self._report_pod(obj)  # (one of another commit is left by its stamp)

    async def recover(self) -> None:
        self.watermark = self.folded_to = await self.log.last_sequence()
        wanted = frozenset(c.type_name() for c in _FOLDED)
        async for msg, event in replay_decoded(self.log, [self.subjects.all_jobs()], self.watermark, wanted):
            self.fold(event, msg.seq)
        for msg in await self.log.last_per_subject(self.subjects.all_nodes()):
            kind = msg.headers.get(TYPE, "")
            if kind in ("NodeRegistered", "NodeLost"):
                ev = self.registry.decode(kind, msg.data)
                self.node_last[ev.node] = ev  # type: ignore[attr-defined]
                self.node_seq[ev.node] = msg.seq  # type: ignore[attr-defined]
        for msg in await self.log.last_per_subject(self.subjects.all_usage()):
            if msg.headers.get(TYPE, "") == NodeUsage.type_name():
                use = self.registry.decode(NodeUsage.type_name(), msg.data)
                self.usage_last[use.node] = (use, msg.seq)  # type: ignore[attr-defined]
        log.info("kube node agent: %d nodes, %d tasks known", len(self.node_last), len(self.tasks))

    # --- nodes ---------------------------------------------------------------------------------

    def running_on(self, node: str) -> tuple[RunningTask, ...]:
        """Tessera's pods Running on `node` that the log has not placed: booked with the node's
        first registration (their cards from HAMi's annotations, else their requests)."""
        out = []
        for obj in self.pods_on.get(node, {}).values():
            r = pods.ref(obj, volcano.replaces_volcano(self.scheduler_names))
            if pods.phase(obj) != "Running" \
                    or (r.namespace, r.job, r.name) in self.tasks:  # fmt: skip
                continue
            work = admit([pods.manifest(obj)], self.parser, self.device_names)
            for rp in work.running:
                slices = hami.annotated_slices(node, rp.annotations, rp.init_containers)
                out.append(RunningTask(namespace=rp.namespace, job=rp.job, task=rp.pod,
                                       slices=slices, fit=() if slices else rp.devices))  # fmt: skip
        return tuple(sorted(out, key=lambda t: (t.namespace, t.job, t.task)))

    def _node_out(self, event: NodeRegistered | NodeLost, last_event: Event | None,
                  after: int) -> tuple[Outgoing | None, NodeRegistered | NodeLost]:  # fmt: skip
        """The append that says `event` after `last_event` (the subject's message at `after`),
        or None when the log says so already; the event as written (a first registration books
        the node's running pods)."""
        if _same(last_event, event):
            return None, event
        if isinstance(event, NodeRegistered) and not isinstance(last_event, NodeRegistered):
            event = msgspec.structs.replace(event, running=self.running_on(event.node))
        if isinstance(event, NodeLost) and not isinstance(last_event, NodeRegistered):
            # not registered: said only where it changes whether the Node is there — a node
            # never Ready is said lost (the "0/N nodes are available" of FailedScheduling counts
            # every Node, as kube-scheduler's does), a lost node's deletion is said (it no
            # longer counts); a node gone before the log ever heard of it is not
            gone = event.reason == nodes.NODE_DELETED
            was_gone = last_event is None or (isinstance(last_event, NodeLost) and last_event.reason == nodes.NODE_DELETED)
            if gone == was_gone:
                return None, event

        body = self.registry.encode(event)
        mid = f"kube-node:{event.node}:{after}:{content_id('Node', body)}"
        return Outgoing(self.subjects.node(event.node), event, after, mid), event

    def _node_written(self, event: NodeRegistered | NodeLost, seq: int) -> None:
        self.node_writes += 1
        self.node_last[event.node] = event
        self.node_seq[event.node] = seq or self.node_seq.get(event.node, 0)

    async def _append_node(self, event: NodeRegistered | NodeLost) -> None:
        """Written expecting the node subject's last message as this agent knows it (from its
        recovery and its own writes): no read of the subject per node — 5,000 round trips at
        start on a 5,000-node cluster (issue 29) — and on a conflict, another writer's message
        is read and the decision taken again."""
        subject = self.subjects.node(event.node)
        last_event, after = self.node_last.get(event.node), self.node_seq.get(event.node, 0)
        for _attempt in range(5):
            out, event = self._node_out(event, last_event, after)
            if out is None:
                if _same(last_event, event):
                    self.node_last[event.node] = event
                return
            result = await self.service.publish(out)
            if not isinstance(result, Conflict):
                self._node_written(event, getattr(result, "seq", 0))
                return
            last = await self.log.last(subject)
            last_event = self.registry.decode(last.headers[TYPE], last.data) if last else None
            after = last.seq if last else 0
            if last_event is not None:
                self.node_last[event.node], self.node_seq[event.node] = last_event, after

    async def _node_event(self, name: str, obj: dict[str, Any]) -> NodeRegistered | NodeLost | None:
        """What the log should say of a listed or changed Node (None: what it says already);
        HAMi's handshakes on it are answered on the way."""
        view = nodes.node_view(obj, self.catalogue, self.clock())
        seen = self.node_problems.get(name, frozenset())
        for problem in view.problems:
            if problem not in seen:
                log.warning("node %s: %s", name, problem)
        self.node_problems[name] = frozenset(view.problems)
        if view.answer_handshakes:
            value = nodes.handshake_value(self.clock())
            patch = {"metadata": {"annotations": dict.fromkeys(view.answer_handshakes, value)}}
            with contextlib.suppress(KubeError):
                await self.kube.patch(nodes_path(name), patch)
        if not view.ready:
            return NodeLost(node=name, reason=nodes.NODE_NOT_READY)
        return None if _same(self.node_last.get(name), view.registered) else view.registered

    async def on_node(self, kind: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if kind == "delete":
            self.node_problems.pop(name, None)
            await self._append_node(NodeLost(node=name, reason=nodes.NODE_DELETED))
            return
        event = await self._node_event(name, obj)
        if isinstance(event, NodeRegistered):
            # what other schedulers' pods hold there goes first: no session may see the node
            # without it (the pods were listed before any node is reported)
            await self._append_usage(name)
        if event is not None:
            await self._append_node(event)

    async def register_listing(self, objs: list[dict[str, Any]]) -> None:
        """A whole listing's nodes in pipelined appends, each node's usage right before it (one
        round trip per LISTING_CHUNK nodes, not two per node: 5,000 nodes took 5.4 s to register
        one by one, the scheduler waiting all along). A node whose append conflicts, or a chunk
        the log did not take, goes through `on_node` one by one (read, decide again)."""
        for start in range(0, len(objs), LISTING_CHUNK):
            chunk = objs[start:start + LISTING_CHUNK]
            planned: list[tuple[Outgoing, NodeRegistered | NodeLost | NodeUsage, dict[str, Any]]] = []
            for obj in chunk:
                name = str((obj.get("metadata") or {}).get("name") or "")
                try:
                    event = await self._node_event(name, obj)
                except Exception:
                    log.exception("node %s not reported", name)
                    continue
                if event is None:
                    continue
                if isinstance(event, NodeRegistered) and (use := self._usage_out(name)) is not None:
                    planned.append((use, use.event, obj))  # type: ignore[arg-type]
                out, event = self._node_out(event, self.node_last.get(name), self.node_seq.get(name, 0))
                if out is not None:
                    planned.append((out, event, obj))
            try:
                results = await self.log.append_pipelined([self.service.entry(o) for o, _e, _obj in planned])
            except Exception:
                log.exception("a listing's appends failed; registering its nodes one by one")
                results = [None] * len(planned)
            redo: dict[str, dict[str, Any]] = {}
            for (_out, event, obj), result in zip(planned, results, strict=True):
                if result is None or isinstance(result, Conflict):
                    redo[event.node] = obj
                elif isinstance(event, NodeUsage):
                    self.usage_last[event.node] = (event, getattr(result, "seq", 0))
                else:
                    self._node_written(event, getattr(result, "seq", 0))
            for obj in redo.values():
                try:
                    await self.on_node("upsert", obj)
                except Exception:
                    log.exception("node %s not reported", (obj.get("metadata") or {}).get("name"))

    async def _listed(self) -> bool:
        """Say in the log that every node of the first listing is registered (`NodesListed`):
        the scheduler holds its sessions until then. Once per start, unless the log has one and
        this listing changed no node (a restart that found them all as they were); False if
        the append failed."""
        registered = sum(isinstance(e, NodeRegistered) for e in self.node_last.values())
        event = NodesListed(agent=self.service.name, nodes=registered)
        try:
            if not await listing_owed(self.log, self.node_writes):
                return True
            await self.service.publish(Outgoing(self.subjects.inventory(event.agent), event,
                                                msg_id=f"kube-node:listed:{registered}:{self.node_writes}"))
        except Exception:
            log.exception("NodesListed not appended (the scheduler waits its hold out)")
            return False
        log.info("listed the cluster: %d nodes registered", registered)
        return True

    # --- pods ----------------------------------------------------------------------------------

    async def _report_pod(self, obj: dict[str, Any], deleted: bool = False) -> None:
        r = pods.ref(obj, volcano.replaces_volcano(self.scheduler_names))
        key = (r.namespace, r.job, r.name)
        state, seq = self.tasks.get(key, ("", 0))
        if state not in (COMMITTED, STARTED):
            # not (yet) committed in the log, or already finished; deleted while this process's
            # reading of the log is behind the binding's commit, it is told once that is read —
            # else no TaskFinished ever came and a Volcano Job stood waiting for its pod's word
            placed = pods.seq_annotation(obj, volcano.PLACEMENT)
            if deleted and placed is not None and placed > self.folded_to:
                self.gone_early[(r.namespace, r.name)] = (placed, obj)
            return
        stamp = ((obj.get("metadata") or {}).get("annotations") or {}).get(volcano.PLACEMENT)
        if stamp is not None and stamp != str(seq) and volcano.owner_job(obj) and self.adopted.get(key) != seq:
            # a Volcano Job's pod from before a restart, under the same name — not one the log
            # took as it was bound (an `existing` commit: another log stamped it, `--fresh`)
            return
        now = self.clock()
        event: TaskStarted | TaskFinished | None
        event = pods.task_event(obj, now) if not deleted else None
        if deleted or (isinstance(event, TaskFinished) and pods.terminating(obj)):
            # a deleted pod's end is its deletion whatever its last phase says: a kubelet (1.27
            # on) writes Failed (exit 143 on SIGTERM) or Succeeded before it is removed, which
            # made a preempted or drained Volcano Job pod PodFailed — never made again, its
            # PodEvicted policy never fired. Volcano takes any word on a deleted pod as evicted.
            event = TaskFinished(namespace=r.namespace, name=r.job, task=r.name,
                                 node=pods.node_name(obj), exit_code=-1, reason=POD_DELETED, at=now)  # fmt: skip
        if event is None or (isinstance(event, TaskStarted) and state == STARTED):
            return
        kind = "start" if isinstance(event, TaskStarted) else "finish"
        out = Outgoing(self.subjects.job(r.namespace, r.job), event,
                       msg_id=f"kube-task:{r.namespace}/{r.job}/{r.name}:{seq}:{kind}")  # fmt: skip
        await self.service.publish(out)
        async with self._lock:
            if self.tasks.get(key, ("", 0))[1] == seq:  # not a newer commit folded meanwhile
                self.tasks[key] = (STARTED if kind == "start" else FINISHED, seq)

    def _ours(self, obj: dict[str, Any]) -> bool:
        return pods.scheduler_name(obj) in self.scheduler_names

    # --- other schedulers' pods ----------------------------------------------------------------

    def _foreign(self, kind: str, obj: dict[str, Any]) -> None:
        r, node = pods.ref(obj, volcano.replaces_volcano(self.scheduler_names)), pods.node_name(obj)
        held = self.foreign.setdefault(node, {})
        who = self.foreign_who.setdefault(node, {})
        key = (r.namespace, r.name)
        before = (held.get(key), who.get(key))
        if kind == "delete" or not pods.holds_node(obj):
            held.pop(key, None)
            who.pop(key, None)
        else:
            held[key] = pods.requests_of(obj)
            who[key] = pods.other_pods(obj)
        if (held.get(key), who.get(key)) != before:
            self._usage_dirty.add(node)
            self._usage_wake.set()

    def usage(self, node: str) -> NodeUsage:
        total: dict[str, int] = {}
        for req in self.foreign.get(node, {}).values():
            for k, v in req.items():
                total[k] = total.get(k, 0) + v
        cpu, mem, count = total.pop("cpu", 0), total.pop("memory", 0), total.pop("pods", 0)
        scalars = {k: v for k, v in sorted(total.items()) if v}
        return NodeUsage(node=node, cpu_milli=cpu, memory_mib=mem, pods=count, scalars=scalars,
                         others=_grouped(self.foreign_who.get(node, {}).values()))  # fmt: skip

    def _usage_out(self, node: str) -> Outgoing | None:
        """The `NodeUsage` append for `node`, or None when the log says it already (or nothing
        is held there and nothing was ever said)."""
        use = self.usage(node)
        last, after = self.usage_last.get(node, (None, 0))
        if last == use or (last is None and not any((use.cpu_milli, use.memory_mib, use.pods))):
            return None
        mid = f"kube-use:{node}:{after}:{content_id('NodeUsage', self.registry.encode(use))}"
        return Outgoing(self.subjects.usage(node), use, after, mid)

    async def _append_usage(self, node: str) -> None:
        out = self._usage_out(node)
        if out is None:
            return
        result = await self.service.publish(out)
        if isinstance(result, Conflict):  # another writer: read what is there, decide again
            msg = await self.log.last(self.subjects.usage(node))
            if msg is not None:
                seen = self.registry.decode(NodeUsage.type_name(), msg.data)
                self.usage_last[node] = (seen, msg.seq)  # type: ignore[assignment]
            self._usage_dirty.add(node)
            self._usage_wake.set()
            return
        self.usage_last[node] = (out.event, getattr(result, "seq", out.expected_last_subject_seq or 0))  # type: ignore[assignment]

    async def _usage_loop(self) -> None:
        """Append the usage of the nodes whose foreign pods changed, a pass at a time (a burst
        of pod changes becomes one event per node)."""
        await self.pods_listed.wait()
        while True:
            await self._usage_wake.wait()
            await asyncio.sleep(0.1)  # coalesce the burst (not a synchronisation)
            self._usage_wake.clear()
            dirty, self._usage_dirty = sorted(self._usage_dirty), set()
            for node in dirty:
                try:
                    await self._append_usage(node)
                except Exception:
                    log.exception("usage of node %s not appended: again in %s s", node, USAGE_RETRY)
                    self._usage_dirty.add(node)
                    # its own wake: the one that brought it is spent, and a quiet cluster may
                    # change no other scheduler's pod for long while sessions read stale usage
                    asyncio.get_running_loop().call_later(USAGE_RETRY, self._usage_wake.set)

    async def _nodes_loop(self) -> None:
        await self.pods_listed.wait()  # a node's running pods are known before it registers
        listed = False
        listing: dict[str, dict[str, Any]] | None = {}  # the first listing, registered at once
        async for ch in Reflector(self.kube, nodes_path()).changes():
            if ch.kind == "synced" and listing is not None:
                await self.register_listing(list(listing.values()))
                listing = None
            if ch.kind == "synced" and not listed:
                listed = await self._listed()
                self.listing_done.set()
            elif listing is not None and ch.kind != "delete":
                listing[ch.key] = ch.obj
            elif ch.kind != "synced":
                if listing is not None:
                    listing.pop(ch.key, None)
                try:
                    await self.on_node(ch.kind, ch.obj)
                except Exception:
                    log.exception("node %s not reported", ch.key)

    async def _pods_loop(self) -> None:
        """One watch of every bound pod: Tessera's report their phases, the others' count."""
        bound = Reflector(self.kube, pods_path(), query={"fieldSelector": "spec.nodeName!="},
                          keep=lambda o: bool(pods.node_name(o)))  # fmt: skip
        async for ch in bound.changes():
            if ch.kind == "synced":  # (re)listed: a node whose last usage is stale is written anew
                self.pods_listed.set()
                self._usage_dirty.update(self.usage_last)
                self._usage_wake.set()
                continue
            if not self._ours(ch.obj):
                self._foreign(ch.kind, ch.obj)
                continue
            r = pods.ref(ch.obj, volcano.replaces_volcano(self.scheduler_names))
            key = (r.namespace, r.name)
            old = self.pods.pop(key, None)
            if old is not None:
                self.pods_on.get(pods.node_name(old), {}).pop(key, None)
            if ch.kind != "delete":
                self.pods[key] = ch.obj
                self.pods_on.setdefault(pods.node_name(ch.obj), {})[key] = ch.obj
            try:
                await self._report_pod(ch.obj, deleted=ch.kind == "delete")
            except Exception:
                log.exception("pod %s not reported", ch.key)

    async def background(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(c) for c in (self._nodes_loop(), self._pods_loop(), self._usage_loop())]
        await stopping.wait()
        await cancel_all(tasks)


def _grouped(pods_there: Iterable[OtherPods]) -> tuple[OtherPods, ...]:
    """Other schedulers' pods alike in namespace, labels, terms and host ports as one entry
    with a count, in a fixed order (the event is compared with the last one to append only
    changes)."""
    counts: dict[bytes, tuple[OtherPods, int]] = {}
    for p in pods_there:
        key = msgspec.json.encode((p.namespace, sorted(p.labels.items()), p.pod_affinity, p.host_ports))
        seen = counts.get(key)
        counts[key] = (p, seen[1] + 1 if seen else 1)
    return tuple(msgspec.structs.replace(p, count=n) for _, (p, n) in sorted(counts.items()))
