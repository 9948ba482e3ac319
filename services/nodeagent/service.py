"""The node-agent's shell: register the hosted nodes, run committed tasks, report outcomes.

One process hosts many simulated nodes. At start it registers them (only where the log does
not already say the same), rebuilds the runtime projection by replaying the job subjects, and
reports whatever the rebuilt state owes (tasks committed but not started, runs whose duration
elapsed while it was down). Then every job event is folded into the projection and
`runtime.decide` says what to append; a timer wakes the same decision at the next run's end.

Redelivery is harmless twice over: events at or below the last sequence folded are skipped
(STYLE §10), and a commit already known by its message id creates no new run. Heartbeats go to
core NATS per node (not the log); a `NodeLost` about a hosted node means the monitor missed us,
so the node registers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from opentelemetry import context as otel_context

from contracts.base import Event
from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUpdated,
    NodeLost,
    NodeRegistered,
    NodesListed,
    PlacementCommitted,
    TaskFinished,
    TaskStarted,
)
from contracts.registry import default_registry
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.nodeagent.heartbeat import BeatSink, encode_beat, heartbeat_subject
from services.nodeagent.monitor import NodeMonitor
from services.nodeagent.recovery import RuntimeFold
from services.nodeagent.registration import listing_owed, needs_registration, registration_msg_id
from services.nodeagent.runtime import NodeRuntime, decide, evolve, next_deadline, running
from services.runtime.eventlog import Conflict, EventLog
from services.runtime.service import (
    EventService,
    Handler,
    Outgoing,
    Received,
    TransientError,
    chain,
    decode_stored,
)
from services.runtime.snapshot import Retention, Snapshots
from services.runtime.waits import within

#: the events whose handling span a run's later reports continue (a tuple built once: a union
#: built per delivery cost ~0.35 µs of every node agent's handling, issue 29)
_TRACED = (PlacementCommitted, EvictionRequested, JobDeleted)

log = logging.getLogger(__name__)

#: Job-subject events the runtime folds.
RUNTIME_EVENTS: tuple[type[Event], ...] = (
    JobSubmitted,
    JobUpdated,
    PlacementCommitted,
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    TaskStarted,
    TaskFinished,
)
_RUNTIME_TYPES = frozenset(cls.type_name() for cls in RUNTIME_EVENTS)

MAX_REGISTER_ATTEMPTS = 5
#: commits and stops whose trace is remembered for their pods' reports (oldest forgotten first)
MAX_TRACES = 10_000
#: an explicit empty context: a report with no known trace must not join the current span's
NO_TRACE = otel_context.Context()


class NodeAgent:
    def __init__(
        self,
        event_log: EventLog,
        nodes: Sequence[NodeRegistered],
        name: str = "nodeagent",
        heartbeat_every: float = 1.0,
        beat: BeatSink | None = None,
        clock: Callable[[], float] = time.time,
        monitor: NodeMonitor | None = None,
        monitor_nc: object | None = None,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.registry = default_registry()
        self.nodes = {n.node: n for n in nodes}
        self.state = NodeRuntime(nodes=frozenset(self.nodes))
        self.applied_seq = 0
        self.heartbeat_every = heartbeat_every
        self.beat = beat
        self.clock = clock
        self.monitor = monitor
        self.monitor_nc = monitor_nc  # where a hosted monitor hears heartbeats
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.traces: dict[str, otel_context.Context] = {}  # commit or stop → the trace it continues
        handlers: dict[type[Event], Handler] = {
            cls: self.on_job_event  # type: ignore[misc]
            for cls in RUNTIME_EVENTS
        }
        handlers[NodeLost] = self.on_node_lost  # type: ignore[assignment]
        if monitor is not None:
            for cls, h in monitor.handlers.items():
                # the monitor first: it never fails, so a redelivery after the host's failure
                # is one the monitor folded already
                handlers[cls] = chain(h, handlers[cls]) if cls in handlers else h
        self.service = EventService(
            name=name,
            log=event_log,
            filter_subjects=[self.subjects.all_nodes(), self.subjects.all_jobs()],
            handlers=handlers,
            registry=self.registry,
        )
        if monitor is not None:
            monitor.publisher = self.service
        self.keep_finished = DEFAULT_KEEP_FINISHED
        self.snapshots = Snapshots(event_log, self._projection(), on_poison=self.service.park_once)

    def _projection(self) -> RuntimeFold:
        return RuntimeFold(self.subjects, self.service.name, self.state.nodes, _RUNTIME_TYPES,
                           self.keep_finished)  # fmt: skip

    def retain(self, retention: Retention) -> None:
        """Snapshots and how many finished jobs to remember (before `recover`)."""
        self.keep_finished = retention.keep_finished
        self.state = replace(self.state, keep=self.keep_finished)
        self.snapshots.projection = self._projection()
        self.snapshots.store, self.snapshots.every = retention.store, retention.snapshot_every

    # --- start ---------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Register, beat, rebuild, report what is owed, then start the timer. Heartbeats start
        before the rebuild: a replay longer than the monitor's node timeout made a restarted
        agent's own nodes lost, and their pods failed."""
        wrote = [await self.register(node) for node in self.nodes.values()]
        listed = NodesListed(agent=self.service.name, nodes=len(self.nodes))  # the scheduler waits for it
        if await listing_owed(self.log, sum(wrote)):
            await self.service.publish(Outgoing(self.subjects.inventory(listed.agent), listed))
        self._beat()
        await self._rebuild()
        if self.monitor is not None:
            await self.monitor.recover()
        await self._act()
        self.start()

    async def register(self, node: NodeRegistered) -> bool:
        """Append `NodeRegistered` unless it is already the node's last event; True if written."""
        subject = self.subjects.node(node.node)
        for _attempt in range(MAX_REGISTER_ATTEMPTS):
            last = await self.log.last(subject)
            # an undecodable last event (parked) says nothing: register over it
            last_event = await decode_stored(last, self.service.park_once) if last else None
            if not needs_registration(node, last_event):
                return False
            after = last.seq if last else 0
            out = Outgoing(subject, node, after, registration_msg_id(node, after))
            if not isinstance(await self.service.publish(out), Conflict):
                log.info("registered node %s (%d cards)", node.node, len(node.cards))
                return True
        raise TransientError(f"node {node.node}: subject kept moving while registering")

    async def _rebuild(self) -> None:
        """The runtime at the log's last sequence: its snapshot and the tail, or every job
        event from #1. What the consumer delivers at or below that sequence is folded already."""
        seq = await self.log.last_sequence()
        self.state = await self.snapshots.recover(seq)
        self.applied_seq = seq
        log.info("rebuilt runtime up to #%d: %d runs, %d ended jobs kept (--keep-finished %d)",
                 seq, len(running(self.state)), len(self.state.ended), self.keep_finished)  # fmt: skip

    def _beat(self) -> None:
        if self.beat is not None and not any(t.get_name() == "nodeagent-hb" for t in self._tasks):
            self._tasks.append(asyncio.create_task(self._heartbeats(), name="nodeagent-hb"))

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._timers(), name="nodeagent-timers"))
        self._beat()
        if self.monitor is not None:
            self._tasks.append(asyncio.create_task(self.monitor.start(self.monitor_nc)))

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.monitor is not None:
            await self.monitor.aclose()

    # --- handlers ------------------------------------------------------------------------------

    async def on_job_event(self, event: Event, rx: Received) -> None:
        if isinstance(event, _TRACED):
            self._trace_of(rx)
        if rx.message.seq > self.applied_seq:
            async with self._lock:
                self.state = evolve(self.state, event, rx.cause)
                self.applied_seq = rx.message.seq
        await self._act(rx)  # also after a skipped redelivery: retries a failed report

    def _trace_of(self, rx: Received) -> None:
        """Remember a commit's (or a stop's) trace: its pods' reports continue it, whenever they
        fall due and whichever event's handling (or timer) appends them. Not state: after a
        restart reports of older runs start no trace rather than join a wrong one."""
        self.traces.pop(rx.cause, None)
        self.traces[rx.cause] = rx.trace or otel_context.get_current()
        while len(self.traces) > MAX_TRACES:
            del self.traces[next(iter(self.traces))]

    async def on_node_lost(self, event: NodeLost, rx: Received) -> None:
        node = self.nodes.get(event.node)
        if node is not None:
            log.warning(
                "node %s was declared lost (%s): registering again", node.node, event.reason
            )
            await self.register(node)

    # --- acting --------------------------------------------------------------------------------

    async def _act(self, cause: Received | None = None) -> int:
        """Append what the runtime owes now, folding each report as it lands."""
        async with self._lock:
            emissions = decide(self.state, self.clock())
            subject = self.subjects.job
            outs = [Outgoing(subject(e.event.namespace, e.event.name), e.event, msg_id=e.msg_id,
                             context=self.traces.get(e.cause, NO_TRACE))
                    for e in emissions]  # fmt: skip
            # a burst reports many jobs: only the cause's own job names it as its cause
            mine = cause.message.subject if cause is not None else None
            entries = [self.service.entry(o, cause if o.subject == mine else None) for o in outs]
            await self.log.append_pipelined(entries)  # one round trip for a burst of reports
            for e in emissions:
                self.state = evolve(self.state, e.event)
        if emissions:
            self._wake.set()
        return len(emissions)

    async def _timers(self) -> None:
        while True:
            deadline = next_deadline(self.state)
            timeout = None if deadline is None else max(0.0, deadline - self.clock())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), timeout)
            try:
                await self._act()
            except Exception:
                log.exception("reporting due tasks failed; retrying")
                await asyncio.sleep(1.0)

    async def _heartbeats(self) -> None:
        assert self.beat is not None
        while True:
            now = self.clock()
            for node in self.nodes:
                try:
                    await self.beat(heartbeat_subject(self.subjects, node), encode_beat(node, now))
                except Exception:
                    log.warning("heartbeat for %s not sent", node, exc_info=True)
            await asyncio.sleep(self.heartbeat_every)

