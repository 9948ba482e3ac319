"""The scheduler's shell: fold every event into the projection, run a session when something
relevant arrived (debounced) or on a period, and append what the session concluded.

The session itself is the pure `decide(snapshot, conf)`; this shell only keeps the projection,
remembers which proposals are outstanding (so a job is not proposed twice while the allocator
decides) and appends `JobUnschedulable` only when a job's reason changes (DESIGN §3).
"""

from __future__ import annotations

import asyncio
import logging
import time

from opentelemetry import trace

from contracts.base import Event
from contracts.events import (
    ALL_EVENTS,
    EvictionRequested,
    JobPhaseChanged,
    PlacementProposed,
)
from services.core.observe import Series
from services.core.observe.volcano import session_series
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import SchedulerConf, default_conf
from services.core.scheduling.decide import decide
from services.runtime.eventlog import Appended, EventLog
from services.runtime.lease import Lease
from services.runtime.service import EventService, Outgoing, Received
from services.runtime.snapshot import Retention, Snapshots
from services.scheduler.metrics import SessionMetrics
from services.scheduler.view import SchedulerView, ViewFold

log = logging.getLogger(__name__)
tracer = trace.get_tracer("tessera.scheduler")


class Scheduler:
    def __init__(
        self,
        event_log: EventLog,
        conf: SchedulerConf | None = None,
        period: float = 1.0,
        debounce: float = 0.05,
        lease: Lease | None = None,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.conf = conf or default_conf()
        self.period = period
        self.debounce = debounce
        #: with replicas, only the lease holder runs sessions; without one (in-process tests,
        #: a single replica) this scheduler always does
        self.lease = lease
        self.view = SchedulerView()
        self.sessions = 0
        self.recovered_seq = 0  # events at or below were folded by `recover`
        self.own: set[int] = set()  # our appends, folded when written, skipped when delivered
        self._dirty = asyncio.Event()
        self.service = EventService(
            name="scheduler",
            log=event_log,
            filter_subjects=[self.subjects.events],
            handlers=dict.fromkeys(ALL_EVENTS, self.on_event),  # type: ignore[arg-type]
        )
        assert self.service.metrics is not None
        self.session_metrics = SessionMetrics(self.service.metrics)
        self.last_series: list[Series] = []  # the gauges of the last session's decisions
        self.last_attempts = (0, 0)  # tasks (scheduled, unschedulable) of the last session
        self.snapshots = Snapshots(event_log, ViewFold(self.subjects.events),
                                   on_poison=self.service.park_once)  # fmt: skip

    def retain(self, retention: Retention) -> None:
        """Snapshots (before `recover`); the view forgets ended jobs by itself."""
        self.snapshots.store, self.snapshots.every = retention.store, retention.snapshot_every

    # the view's parts, as the session code and tests read them
    @property
    def projection(self) -> st.ClusterProjection:
        return self.view.projection

    @property
    def outstanding(self) -> dict[str, int]:
        return self.view.outstanding

    @property
    def unschedulable(self) -> dict[str, str]:
        return self.view.unschedulable

    def _apply(self, seq: int, event: Event) -> None:
        self.view.apply(seq, event)

    def _fold(self, seq: int, event: Event) -> None:
        if seq <= self.recovered_seq:
            return  # already folded during recovery
        if seq in self.own:
            self.own.discard(seq)
            return  # folded when we wrote it
        self._apply(seq, event)

    async def on_event(self, event: Event, rx: Received) -> None:
        self._fold(rx.message.seq, event)
        self._dirty.set()

    async def recover(self) -> None:
        """Fold the log up to its end, then follow it from there. Every replica reads every
        event (`EventService.follow_from`), not a share of one durable: a projection built
        from half the log places pods on cards that are taken and never learns why others
        wait (issue 12 item 6)."""
        self.recovered_seq = await self.log.last_sequence()
        self.view = await self.snapshots.recover(self.recovered_seq)
        self.service.follow_from = self.recovered_seq + 1
        self._dirty.set()

    def session_events(self) -> list[Outgoing]:
        """One session: freeze, decide, and the events to append (pure apart from counters)."""
        self.sessions += 1
        snap = self.projection.snapshot()
        with tracer.start_as_current_span("session", attributes={"tessera.session": self.sessions,
                                                                  "tessera.based_on": snap.seq}) as span:  # fmt: skip
            decisions = decide(snap, self.conf)
            span.set_attribute("tessera.placements", len(decisions.placements))
            span.set_attribute("tessera.unschedulable", len(decisions.unschedulable))
        self.last_series = session_series(snap, decisions)
        s = self.subjects
        out: list[Outgoing] = []
        for ph in decisions.phases:
            out.append(Outgoing(s.job(ph.namespace, ph.name), JobPhaseChanged(
                namespace=ph.namespace, name=ph.name, phase=ph.phase, reason=ph.reason)))  # fmt: skip
        for ev in decisions.evictions:
            out.append(Outgoing(s.job(ev.namespace, ev.name), EvictionRequested(
                namespace=ev.namespace, name=ev.name, task=ev.task, reason=ev.reason)))  # fmt: skip
        scheduled = 0
        for jp in decisions.placements:
            key = f"{jp.namespace}/{jp.name}"
            if jp.pipelined or key in self.outstanding:
                continue  # pipelined = reserved in-session only; outstanding = allocator deciding
            scheduled += len(jp.placements)
            out.append(Outgoing(s.job(jp.namespace, jp.name), PlacementProposed(
                namespace=jp.namespace, name=jp.name, based_on=decisions.based_on,
                placements=jp.placements, session=self.sessions)))  # fmt: skip
        for u in decisions.unschedulable:
            key = f"{u.namespace}/{u.name}"
            if self.unschedulable.get(key) != u.key:
                self.unschedulable[key] = u.key
                out.append(Outgoing(s.job(u.namespace, u.name),
                                    u.event(decisions.based_on, self.sessions)))  # fmt: skip
        self.last_attempts = (scheduled, sum(u.tasks for u in decisions.unschedulable))
        return out

    async def run_sessions(self, stopping: asyncio.Event) -> None:
        """Session loop: on new events (after a short debounce) or every `period` seconds."""
        took = 0.0
        while not stopping.is_set():
            try:
                await asyncio.wait_for(self._dirty.wait(), self.period)
                # debounce, and at least as long as the last session took: under a stream of
                # events sessions then use at most about half the CPU, and each one sees more
                await asyncio.sleep(max(self.debounce, took))
            except TimeoutError:
                pass
            self._dirty.clear()
            if self.lease is not None and not self.lease.held():
                continue  # a standby replica: it keeps its projection, the leader decides
            started = time.perf_counter()
            try:
                await self._session()
                took = time.perf_counter() - started
            except Exception:  # the log is briefly unreachable, a bug in one session: go on
                log.exception("session %d failed; retrying on the next trigger", self.sessions)
                self.session_metrics.failed()
                self._dirty.set()
                await asyncio.sleep(self.period)

    async def _session(self) -> None:
        based_on = self.projection.seq
        started = time.perf_counter()
        outs = [
            Outgoing(o.subject, o.event, msg_id=f"sched:{based_on}#{i}")  # same snapshot → same
            for i, o in enumerate(self.session_events())  # decisions → deduplicated ids
        ]
        decided = time.perf_counter()
        results = await self.log.append_pipelined([self.service.entry(o) for o in outs])
        self.session_metrics.session(decided - started, time.perf_counter() - decided,
                                     *self.last_attempts, self.last_series)  # fmt: skip
        for out, result in zip(outs, results, strict=True):
            if isinstance(result, Appended) and not result.duplicate:
                # Fold our own decision now, so the next session neither repeats a phase
                # change nor re-proposes a job before the log delivers it back to us.
                self.own.add(result.seq)
                self._apply(result.seq, out.event)

    async def background(self, stopping: asyncio.Event) -> None:
        if self.lease is None:
            await self.run_sessions(stopping)
            return
        await asyncio.gather(self.lease.keep(stopping, self._dirty), self.run_sessions(stopping))
