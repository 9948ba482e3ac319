"""Node liveness: a node that stops heartbeating is declared lost, once, with its tasks.

Pure core (`MonitorState`, `evolve`, `heartbeat`, `decide`) + a small shell (`NodeMonitor`).
The core takes time as an argument, so a test feeds heartbeats at virtual times. The shell
subscribes to `<root>.hb.*`, folds node and job events, and checks on a period.

A node's clock starts at its registration as the monitor sees it (registration is a sign of
life) and is pushed forward by each heartbeat; after `timeout` seconds of silence the monitor
appends `NodeLost{node, reason}` and, for every task the log says runs there,
`TaskFinished{exit_code: -1, reason: "node lost"}` — the job lifecycle policies apply elsewhere.
"Once" holds by state (a lost node stays lost until a new `NodeRegistered`) and by message ids
derived from the registration the loss ends, so two monitors write one loss.

Silence is the nodes' fault only while the monitor itself can hear them. Each check first makes
a round trip with the bus (`probe`: a NATS PING/PONG); while none succeeds the monitor decides
nothing, and after a gap longer than `blind_after` every node's silence is counted from the
moment it could hear again. A frozen or unreachable nats-server (60 s of SIGSTOP) had the
monitor declare every node lost and fail every running pod — and its reports, written when the
bus came back, landed after the pods' real ends. A task's end is also checked against the log
before it is written (its job subject read, appended with the subject's expected last
sequence): the monitor's own view may lag the log, and a pod that has ended must not end again.

Hosting: the queue service will own a `NodeMonitor`; it merges `monitor.handlers` into its
own handler map (its consumer must read node and job subjects), calls `await monitor.recover()`
at start, `await monitor.start(nc)` to subscribe and begin checking, `await monitor.aclose()`
at stop. `NodeMonitor(log)` alone also builds a runnable `service` with just these handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from contracts.base import Event
from contracts.envelope import Envelope, EnvelopeError
from contracts.events import NodeLost, NodeRegistered, TaskFinished, TaskStarted
from contracts.registry import Registry, default_registry
from services.core.scheduling import snapshot as st
from services.nodeagent.heartbeat import all_heartbeats, decode_beat
from services.runtime.eventlog import Conflict, EventLog, StoredMessage
from services.runtime.service import EventService, Handler, Outgoing, Received, decode_stored

log = logging.getLogger(__name__)

TaskKey = tuple[str, str, str]  # (namespace, job, task)

#: The event types the monitor folds.
FOLDED = frozenset({"NodeRegistered", "NodeLost", "TaskStarted", "TaskFinished"})

#: what the monitor asks to know it still reaches the server (`contracts.permissions` lets every
#: service ask it)
PROBE_SUBJECT = "$JS.API.INFO"

LOST_EXIT_CODE = -1
LOST_REASON = st.NODE_LOST


# --- pure core -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Watch:
    epoch: str  # the registration being watched (its message id / seq)
    last_seen: float
    lost: bool = False


@dataclass(frozen=True, slots=True)
class MonitorState:
    timeout: float = 10.0
    nodes: Mapping[str, Watch] = field(default_factory=dict)
    tasks: Mapping[TaskKey, str] = field(default_factory=dict)  # running task → node
    #: when the monitor last made a round trip with the bus (None: it never probes — an
    #: in-process log is always heard); a gap longer than `blind_after` between two is a time
    #: the monitor could not hear anyone, which no node is blamed for
    reached: float | None = None
    blind_after: float = 0.0  # 0: half the timeout

    @property
    def blind_gap(self) -> float:
        return self.blind_after or self.timeout / 2


@dataclass(frozen=True, slots=True)
class Report:
    msg_id: str
    event: NodeLost | TaskFinished


def evolve(state: MonitorState, event: Event, at: float, epoch: str = "") -> MonitorState:
    """Fold one log event read at wall time `at`; `epoch` identifies a `NodeRegistered`."""
    match event:
        case NodeRegistered(node=node):
            old = state.nodes.get(node)
            seen = max(at, old.last_seen) if old else at
            return _watch(state, node, Watch(epoch or (old.epoch if old else ""), seen))
        case NodeLost(node=node):
            old = state.nodes.get(node)
            if old is None:  # a restart reading the node's last event: lost, its tasks to end
                # (its registration's epoch is in the loss's own id: the same reports' ids)
                prefix = f"nodelost/{node}/"
                return _watch(state, node, Watch(epoch[len(prefix):] if epoch.startswith(prefix) else epoch,
                                                 at, lost=True))  # fmt: skip
            if old.lost:
                return state
            return _watch(state, node, replace(old, lost=True))
        case TaskStarted():
            tasks = dict(state.tasks)
            tasks[(event.namespace, event.name, event.task)] = event.node
            return replace(state, tasks=tasks)
        case TaskFinished():
            key = (event.namespace, event.name, event.task)
            if key not in state.tasks:
                return state
            return replace(state, tasks={k: v for k, v in state.tasks.items() if k != key})
    return state


def _watch(state: MonitorState, node: str, watch: Watch) -> MonitorState:
    nodes = dict(state.nodes)
    nodes[node] = watch
    return replace(state, nodes=nodes)


def heartbeat(state: MonitorState, node: str, at: float) -> MonitorState:
    """A heartbeat received at `at`; nodes the log has not registered are ignored."""
    old = state.nodes.get(node)
    if old is None or at <= old.last_seen:
        return state
    return _watch(state, node, replace(old, last_seen=at))


def reached(state: MonitorState, at: float) -> MonitorState:
    """The monitor made a round trip with the bus at `at`. After a gap longer than
    `blind_gap` it heard nothing in between (nats-server frozen or unreachable, this process
    stalled): every watched node's silence starts again at `at` — as the kube node controller
    does not blame nodes for the time it could not read their status — so a node gets a whole
    timeout to be heard once the monitor can hear again."""
    if state.reached is not None and at - state.reached > state.blind_gap:
        nodes = {n: w if w.lost else replace(w, last_seen=max(w.last_seen, at)) for n, w in state.nodes.items()}
        return replace(state, nodes=nodes, reached=at)
    return replace(state, reached=max(at, state.reached or at))


def blind(state: MonitorState, now: float) -> bool:
    """Whether the monitor cannot tell at `now` whether nodes beat: its last round trip with
    the bus is older than `blind_gap` (silence it hears then is its own, not the nodes')."""
    return state.reached is not None and now - state.reached > state.blind_gap


def decide(state: MonitorState, now: float) -> list[Report]:
    """The losses to report at `now`: each silent node, then each task running on it — and the
    tasks still running on a node already lost. The node comes first, so nothing is placed on
    it once its tasks are freed; a task whose end was not appended after it (a failover, a
    crash between the appends) is reported at the next check, where before the node, folded
    lost, was never looked at again and its tasks ran on in the log for good, cards booked.
    Nothing while the monitor is `blind`: it cannot tell a silent node from a deaf monitor."""
    out: list[Report] = []
    if blind(state, now):
        return out
    for node in sorted(state.nodes):
        watch = state.nodes[node]
        silent = now - watch.last_seen
        if not watch.lost and silent <= state.timeout:
            continue
        base = f"nodelost/{node}/{watch.epoch}"
        reason = f"no heartbeat for {silent:.1f}s (timeout {state.timeout:g}s)"
        if not watch.lost:
            out.append(Report(base, NodeLost(node=node, reason=reason)))
        for key in sorted(k for k, n in state.tasks.items() if n == node):
            ns, job, task = key
            finished = TaskFinished(
                namespace=ns,
                name=job,
                task=task,
                node=node,
                exit_code=LOST_EXIT_CODE,
                reason=LOST_REASON,
                at=now,
            )
            out.append(Report(f"{base}/{ns}/{job}/{task}", finished))
    return out


# --- shell ---------------------------------------------------------------------------------------


class NodeMonitor:
    def __init__(
        self,
        event_log: EventLog,
        timeout: float = 10.0,
        check_every: float | None = None,
        clock: Callable[[], float] = time.time,
        name: str = "node-monitor",
        registry: Registry | None = None,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.state = MonitorState(timeout=timeout)
        self.check_every = check_every if check_every is not None else min(1.0, timeout / 4)
        self.clock = clock
        self.registry = registry or default_registry()
        self.publisher: EventService | None = None  # set by the host, else our own service
        self.watermark = 0  # job events at or below were folded by `recover`
        self.folded_to = 0  # the last event folded live (first deliveries come in stream order)
        self._lock = asyncio.Lock()
        self._loop: asyncio.Task[None] | None = None
        self._sub: object | None = None
        self._nc: object | None = None  # the client whose round trips say the bus is heard
        self._deaf = False  # told the log it cannot reach the bus (once per outage)
        self.service = EventService(
            name=name,
            log=event_log,
            filter_subjects=[self.subjects.all_nodes(), self.subjects.all_jobs()],
            handlers=self.handlers,
            registry=self.registry,
        )

    @property
    def handlers(self) -> dict[type[Event], Handler]:
        """What a host merges into its own handler map."""
        return {
            NodeRegistered: self.on_event,  # type: ignore[dict-item]
            NodeLost: self.on_event,  # type: ignore[dict-item]
            TaskStarted: self.on_event,  # type: ignore[dict-item]
            TaskFinished: self.on_event,  # type: ignore[dict-item]
        }

    async def _decode(self, msg: StoredMessage) -> tuple[Event, str] | None:
        try:
            env = Envelope.from_headers(msg.headers)
        except EnvelopeError:
            return None
        publisher = self.publisher or self.service
        event = await decode_stored(msg, publisher.park_once, FOLDED, self.registry)
        return None if event is None else (event, env.msg_id or f"seq:{msg.seq}")

    async def recover(self, tasks: tuple[Mapping[TaskKey, str], int] | None = None) -> None:
        """Nodes from their last event; running tasks from the job subjects (up to the
        watermark: what the consumer delivers again at or below it is already folded) — or, from
        a host that folded them already (from its snapshot), `tasks` = (running tasks, the
        sequence they are folded up to)."""
        now = self.clock()
        self.watermark = tasks[1] if tasks is not None else await self.log.last_sequence()
        for msg in await self.log.last_per_subject(self.subjects.all_nodes()):
            got = await self._decode(msg)
            if got is not None:
                self.state = evolve(self.state, got[0], now, got[1])
        if tasks is not None:
            self.state = replace(self.state, tasks=dict(tasks[0]))
            return
        async for msg in self.log.replay(1, self.subjects.all_jobs()):
            if msg.seq > self.watermark:
                break
            got = await self._decode(msg)
            if got is not None:
                self.state = evolve(self.state, got[0], now, got[1])

    async def on_event(self, event: Event, rx: Received) -> None:
        """Fold a delivered event — unless recovery folded it already: a `TaskStarted`
        redelivered after its `TaskFinished` would otherwise mark a long-finished task running
        again, and the next loss of its node would fail it (and restart its job) once more."""
        if rx.message.seq <= max(self.watermark, self.folded_to):
            return  # folded already (by recovery, or at its first delivery to this process)
        async with self._lock:
            self.state = evolve(self.state, event, self.clock(), rx.cause)
            self.folded_to = rx.message.seq

    def on_heartbeat(self, node: str, at: float | None = None) -> None:
        self.state = heartbeat(self.state, node, self.clock() if at is None else at)

    async def probe(self) -> bool:
        """One round trip with the bus (a request the server itself answers: JetStream's
        account info, which every service may ask): whether the monitor hears it now. Not
        nats-py's `flush(timeout)`: a PONG arriving after its timeout raises in the client's
        read loop and drops what came with it. Without a client (an in-process log) there is
        nothing to lose touch with."""
        nc = self._nc
        if nc is None:
            return True
        if not getattr(nc, "is_connected", False):
            return False
        try:
            await nc.request(PROBE_SUBJECT, b"", timeout=max(0.05, min(2.0, self.state.blind_gap / 2)))  # type: ignore[attr-defined]
        except Exception:  # nats-py's timeout / no responders / closed: not heard
            return False
        return True

    async def check(self) -> list[Report]:
        """Report what is lost now; returns what was appended (for tests and logs)."""
        publisher = self.publisher or self.service
        heard = await self.probe()
        async with self._lock:
            if heard:
                before = self.state.reached
                self.state = reached(self.state, self.clock())
                if before is not None and self.state.reached - before > self.state.blind_gap:
                    log.warning("node monitor could not reach the bus for %.1fs: every node's "
                                "silence counts from now", self.state.reached - before)  # fmt: skip
            elif blind(self.state, self.clock()):
                if not self._deaf:
                    log.warning("node monitor cannot reach the bus: no node is declared lost "
                                "until it can hear them again")  # fmt: skip
                self._deaf = True
                return []
            self._deaf = not heard and self._deaf
            reports = decide(self.state, self.clock())
            written: list[Report] = []
            ends: dict[str, list[Report]] = {}  # job subject → its tasks' ends, in order
            for r in reports:
                if isinstance(r.event, NodeLost):
                    log.warning("node %s lost: %s", r.event.node, r.event.reason)
                    await publisher.publish(Outgoing(self.subjects.node(r.event.node), r.event, msg_id=r.msg_id))
                    written.append(r)
                    self.state = evolve(self.state, r.event, self.clock())
                else:
                    ends.setdefault(self.subjects.job(r.event.namespace, r.event.name), []).append(r)
            for subject, job_ends in ends.items():
                written += await self._finish(publisher, subject, job_ends)
        return written

    async def _finish(self, publisher: EventService, subject: str, ends: list[Report]) -> list[Report]:
        """Append lost tasks' ends, each only if the log still has it running on its node,
        after the job subject's last event: the monitor's view may lag the log (a busy or
        cut-off consumer), and a second `TaskFinished` for a pod that had ended turned a
        Succeeded pod Failed and restarted its job. A task found ended is folded as such; a
        subject that moved since it was read (a `Conflict`) is read again at the next check."""
        last_seq = 0
        latest: dict[str, Event] = {}  # task → its last start or end in the log
        async for msg in self.log.replay(1, subject):
            last_seq = msg.seq
            got = await self._decode(msg)
            if got is not None and isinstance(got[0], TaskStarted | TaskFinished):
                latest[got[0].task] = got[0]
        written: list[Report] = []
        for r in ends:
            event = r.event
            assert isinstance(event, TaskFinished)
            last = latest.get(event.task)
            if isinstance(last, TaskStarted) and last.node == event.node:
                out = Outgoing(subject, event, expected_last_subject_seq=last_seq, msg_id=r.msg_id)
                result = await publisher.publish(out)
                if isinstance(result, Conflict):
                    break  # the job moved on meanwhile: judged again from the log next check
                last_seq = result.seq
                written.append(r)
            # written, or ended (or moved) already in the log: not running there any more
            self.state = evolve(self.state, event, self.clock())
        return written

    async def start(self, nc: object | None = None) -> None:
        """Subscribe to heartbeats (if a NATS client is given) and check periodically."""
        self._nc = nc
        if nc is not None:
            # probing from now on: the bus was heard at start (recovery just read the log), so a
            # broker frozen before the first round trip is a gap too, not a "never probes"
            self.state = reached(self.state, self.clock())

            async def received(msg: object) -> None:
                beat = decode_beat(msg.data)  # type: ignore[attr-defined]
                if beat is not None:
                    self.on_heartbeat(beat.node)

            self._sub = await nc.subscribe(all_heartbeats(self.subjects), cb=received)  # type: ignore[attr-defined]
        self._loop = asyncio.create_task(self._run(), name="node-monitor")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.check_every)
            try:
                await self.check()
            except Exception:
                log.exception("node liveness check failed; retrying")

    async def aclose(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()  # type: ignore[attr-defined]
            self._sub = None
