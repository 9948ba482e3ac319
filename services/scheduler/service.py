"""The scheduler's shell: fold every event into the projection, run a session when something
relevant arrived (debounced) or on a period, and append what the session concluded. A period
opens none over a log unchanged since a session that concluded nothing (`_concluded`).

The session itself is the pure `decide(snapshot, conf)` over a `SchedulerView` of the log (the
projection with outstanding proposals assumed); `record.decision_events` says which conclusions
become events (a job is not proposed twice while the allocator decides, `JobUnschedulable` only
when a job's reason changes, DESIGN §3). Every decision carries its session's headers
(`record.SessionRef`) and a session opens only on a view that is exactly the log up to its
`based_on`: `tessera replay --verify` rebuilds that view and must reach the same decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from opentelemetry import trace

from contracts.base import Event
from contracts.envelope import TYPE
from contracts.events import (
    ALL_EVENTS,
    CardRegistered,
    JobSubmitted,
    JobUnschedulable,
    NodeRegistered,
    NodesListed,
    PlacementProposed,
    SchedulerConfigured,
)
from contracts.subjects import subject_of
from services.core.observe import Series
from services.core.observe.volcano import session_series
from services.core.scheduling import record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import not_run
from services.core.scheduling.decide import decide, plugin_names
from services.core.scheduling.memo import SessionMemo
from services.core.scheduling.view import SchedulerView
from services.runtime.collector import paused as collector_paused
from services.runtime.eventlog import Appended, EventLog
from services.runtime.lease import Lease
from services.runtime.service import EventService, Outgoing, Received, decode_stored
from services.runtime.snapshot import Retention, Snapshots
from services.runtime.waits import unless_stopped, within
from services.scheduler.metrics import SessionMetrics
from services.scheduler.tracing import JobTraces, decision_spans
from services.scheduler.view import ViewFold

log = logging.getLogger(__name__)
tracer = trace.get_tracer("tessera.scheduler")

#: Nodes register in a burst when the node agent lists the cluster (its start, ours): a session
#: opened in the middle of one judges the pods on the nodes registered so far and tells the
#: rest "no node has a free Ascend910B3" — a status and a Warning per pod, seconds before they
#: are placed (issue 29: 500 such verdicts at every cold start of 500 nodes). Like
#: kube-scheduler waiting for its informers to sync, a scheduler deployed with a node agent
#: (`await_inventory`) opens no session before the agent's `NodesListed` is in the log…
INVENTORY_HOLD = 30.0
#: …(at most this long: a cluster without an agent still gets its pods judged). Without an agent
#: (nodes appended by other means) a session waits until registrations have been quiet this
#: long…
REGISTRATION_QUIET = 0.3
#: …but is never held longer than this (registrations that never stop must not stop sessions)
REGISTRATION_HOLD = 3.0
#: the gauges of a scheduler with nothing waiting are at most this old (s): `_refresh_gauges`
GAUGE_EVERY = 5.0


class Scheduler:
    """`config` is the record of the configuration (texts as the operator wrote them): it is
    what the scheduler decides with and what it writes into the log for replays."""

    def __init__(
        self,
        event_log: EventLog,
        config: SchedulerConfigured | None = None,
        period: float = 1.0,
        debounce: float = 0.05,
        lease: Lease | None = None,
        registration_quiet: float = REGISTRATION_QUIET,
        await_inventory: bool = False,
        clock: Callable[[], float] = time.time,
        gauge_every: float | None = None,
        quiet_clock: Callable[[], float] | None = None,
    ) -> None:
        self.log = event_log
        #: the session's `now` where the log's is behind it (see `session_events`)
        self.clock = clock
        self.subjects = event_log.subjects
        self.config = config or record.configured()
        self.conf = record.conf_of(self.config)
        for line in not_run(self.conf, plugin_names()):
            log.warning("volcano-scheduler.conf: %s", line)
        for line in self.conf.vendors.catalogue.not_acted_on if self.conf.vendors else ():
            log.warning("device-config.yaml: %s", line)
        self.period = period
        self.debounce = debounce
        #: with replicas, only the lease holder runs sessions; without one (in-process tests,
        #: a single replica) this scheduler always does
        self.lease = lease
        self.view = SchedulerView()
        #: what one session leaves the next: unchanged nodes' working state (memo.py)
        self.memo = SessionMemo()
        self.traces = JobTraces()  # the trace each job's decisions continue
        self.sessions = 0
        self.conf_seq = 0  # the SchedulerConfigured our sessions reference
        self.recovered_seq = 0  # events at or below were folded by `recover`
        #: the last sequence we appended: no session opens before the log delivered it back,
        #: so every snapshot is exactly the log up to its `based_on` (what a replay rebuilds)
        self.written = 0
        #: the subjects of an append that failed part-way (acks lost): some of its events may
        #: be in the log at sequences we were never told; no session until we know them
        self.uncertain: list[str] = []
        self._dirty = asyncio.Event()
        self._registered_at = -1e9  # loop time the last node or card registration was folded
        self._inventory_deadline: float | None = None
        self.registration_quiet = registration_quiet
        #: what registrations' quiet spell is timed by (the loop's clock): a test steps its own,
        #: as a machine under load stretched the gaps between its registrations past `quiet`
        self.quiet_clock = quiet_clock
        self.await_inventory = await_inventory
        #: set once the log holds a node agent's `NodesListed` (or we stopped waiting for one)
        self.listed = asyncio.Event()
        self.held_for_inventory = 0  # session triggers held while the inventory was incomplete
        self.holding = asyncio.Event()  # set at the first of them (what a test can await)
        self.service = EventService(
            name="scheduler",
            log=event_log,
            filter_subjects=[self.subjects.events],
            handlers=dict.fromkeys(ALL_EVENTS, self.on_event),  # type: ignore[arg-type]
        )
        assert self.service.metrics is not None
        self.session_metrics = SessionMetrics(self.service.metrics)
        if lease is not None:
            self.session_metrics.leader = lease.held
        self.last_series: list[Series] = []  # the gauges of the last session's decisions
        #: the log sequence `last_series` were computed at (None: not since we started) and the
        #: loop time they were: see `_refresh_gauges`
        self._series_seq: int | None = None
        self._series_at = -1e9
        #: how often at most the gauges are recomputed while nothing waits (`_refresh_gauges`):
        #: a scrape comes every 15-30 s, and each recomputation opens a session (70-180 ms of CPU
        #: at 500 nodes and 3,000 jobs), which every period would be a tenth of a core in churn
        self.gauge_every = max(period, GAUGE_EVERY) if gauge_every is None else gauge_every
        #: the configuration with no actions: a session opened and closed without deciding
        #: anything, for its gauges (`_refresh_gauges`)
        self._gauge_conf = replace(self.conf, actions=())
        self.last_attempts = (0, 0)  # tasks (scheduled, unschedulable) of the last session
        #: the log sequence of the last session that appended nothing, and when its decisions'
        #: time rules turn (`Decisions.revisit_at`): see `_concluded`
        self._quiet: tuple[int, float | None] | None = None
        self._revisit: float | None = None  # the last session's `Decisions.revisit_at`
        #: set at each session trigger that found the log unchanged since such a session (what
        #: a test can await)
        self.settled = asyncio.Event()
        self.snapshots = Snapshots(event_log, ViewFold(self.subjects.events),
                                   on_poison=self.service.park_once)  # fmt: skip
        # the view is the fold of the followed log and nothing else (sessions only read it):
        # a snapshot is the view itself, no copy folded beside it
        self.snapshots.live = lambda: (self.view.seq, self.view)

    def retain(self, retention: Retention) -> None:
        """Snapshots (before `recover`); the view forgets ended jobs by itself."""
        self.snapshots.store, self.snapshots.every = retention.store, retention.snapshot_every

    @property
    def projection(self) -> st.ClusterProjection:
        return self.view.projection

    @property
    def outstanding(self) -> dict[str, int]:
        return self.view.outstanding

    @property
    def unschedulable(self) -> dict[str, str]:
        return self.view.unschedulable

    def _fold(self, seq: int, event: Event) -> None:
        if seq <= self.recovered_seq:
            return  # already folded during recovery
        self._apply(seq, event)

    def _apply(self, seq: int, event: Event) -> None:
        self.view.apply(seq, event)
        if isinstance(event, SchedulerConfigured) and event == self.config:
            self.conf_seq = self.conf_seq or seq  # ours is in the log already (another replica)

    async def on_event(self, event: Event, rx: Received) -> None:
        self.traces.observe(rx.message, event)
        self.view.note_session(rx.message.headers)
        self._fold(rx.message.seq, event)
        if isinstance(event, NodeRegistered | CardRegistered):
            self._registered_at = self._quiet_now()
        elif isinstance(event, NodesListed):
            self.listed.set()
        self._dirty.set()

    async def _inventory_settled(self) -> None:
        """Wait until the log's nodes are the cluster's: the node agent's listing when one is
        deployed (INVENTORY_HOLD), else a quiet spell in registrations (REGISTRATION_QUIET)."""
        if self.listed.is_set():
            return  # later registrations are nodes joining one by one, as any scheduler sees them
        if not self.await_inventory:
            await self._registrations_settled()
            return
        self.held_for_inventory += 1
        self.holding.set()
        if self.held_for_inventory == 1:
            log.info("no session until the node agent has listed the cluster (at most %.0f s)", INVENTORY_HOLD)
        loop = asyncio.get_running_loop()
        if self._inventory_deadline is None:
            self._inventory_deadline = loop.time() + INVENTORY_HOLD
        try:
            await within(self.listed.wait(), max(self._inventory_deadline - loop.time(), 0.0))
        except TimeoutError:
            log.warning("no node agent listed the cluster within %.0f s: scheduling on the %d nodes "
                        "registered", INVENTORY_HOLD, len(self.projection.nodes))  # fmt: skip
            self.listed.set()

    def _quiet_now(self) -> float:
        return self.quiet_clock() if self.quiet_clock is not None else asyncio.get_running_loop().time()

    async def _registrations_settled(self) -> None:
        """Wait while nodes are registering (see REGISTRATION_QUIET), at most REGISTRATION_HOLD s."""
        quiet = self.registration_quiet
        deadline = self._quiet_now() + max(REGISTRATION_HOLD, 10 * quiet)
        for _ in range(30):  # each pass waits at least a third of `quiet`
            end = min(self._registered_at + quiet, deadline)
            if self._quiet_now() >= end:
                return
            await asyncio.sleep(max(end - self._quiet_now(), quiet / 3))

    async def recover(self) -> None:
        """Fold the log up to its end, then follow it from there. Every replica reads every
        event (`EventService.follow_from`), not a share of one durable: a projection built
        from half the log places pods on cards that are taken and never learns why others
        wait (issue 12 item 6)."""
        self.recovered_seq = await self.log.last_sequence()
        self.view = await self.snapshots.recover(self.recovered_seq)
        await self._resume_traces()
        if await self.log.last_per_subject(self.subjects.all_inventory()):
            self.listed.set()  # listed before we started (a restart): the log's nodes are complete
        self.service.follow_from = self.recovered_seq + 1
        await self._record_config()
        self._dirty.set()

    async def _resume_traces(self) -> None:
        """Know again the trace of every job still waiting: the fold above (snapshot or replay)
        delivers nothing to `on_event`, so a job waiting across a restart had its placement,
        commit and start in a trace rooted at our session, cut off from its submission. Read
        from the job's `JobSubmitted` (its sequence is the view's `created`), as `on_event`
        takes it: the subject's last message may be in another trace (a `JobUpdated` under its
        request's, a command's eviction, an older session's verdict of an untraced job). Only
        the waiting: a running job's decisions are its evictions, in their own causes' traces."""
        projection = self.projection
        wanted = [(key, job.created) for key, job in sorted(projection.jobs.items()) if projection.job_waits(key)]
        gate = asyncio.Semaphore(64)  # direct gets in flight: a backlog's restart, not one by one

        async def one(key: str, seq: int) -> None:
            async with gate:
                msg = await self.log.at(seq)
            if msg is not None and msg.headers.get(TYPE) == JobSubmitted.type_name():
                self.traces.resume(key, msg)

        await asyncio.gather(*(one(key, seq) for key, seq in wanted))

    async def _record_config(self) -> None:
        """Append our configuration unless the log's last one for this scheduler is ours:
        sessions reference it by sequence (`record.CONF`), so a replay re-runs them with it."""
        last = await self.log.last_per_subject(self.subjects.scheduler(self.config.scheduler))
        if last:
            recorded = await decode_stored(last[-1], self.service.park_once)
            if recorded == self.config:
                self.conf_seq = last[-1].seq
                return
        # the rules' generation in the id too: an upgraded scheduler's record of the same texts
        # is a new one (the log's older record re-runs its sessions by its older rules), not a
        # duplicate of it for JetStream's window to drop
        rules = f":rules{self.config.rules}" if self.config.rules else ""
        result = await self.service.publish(Outgoing(
            self.subjects.scheduler(self.config.scheduler), self.config,
            msg_id=f"sched-conf:{record.conf_digest(self.config)}{rules}"))  # fmt: skip
        if isinstance(result, Appended):
            self.conf_seq = result.seq
            self.written = max(self.written, result.seq)

    def session_events(self) -> list[Outgoing]:
        """One session: freeze, decide, and the events to append (pure apart from counters)."""
        self.sessions = max(self.sessions, self.view.session) + 1
        view = self.view
        snap = view.snapshot()
        if self.config.mode == "service" and (now := self.clock()) > snap.now:
            # the log's clock moves only with events that carry a time (a pod started): a job
            # waiting out its sla time on a quiet cluster waited until some other pod started.
            # The session runs at the wall clock, recorded in its SessionRef for replays.
            snap = replace(snap, now=now)
        with tracer.start_as_current_span("session", attributes={"tessera.session": self.sessions,
                                                                  "tessera.based_on": snap.seq}) as span:  # fmt: skip
            started = time.time_ns()
            with collector_paused():
                decisions = decide(snap, self.conf, memo=self.memo)
            span.set_attribute("tessera.placements", len(decisions.placements))
            span.set_attribute("tessera.unschedulable", len(decisions.unschedulable))
            events = record.decision_events(
                decisions, session=self.sessions, mode=self.config.mode, outstanding=view.outstanding,
                last_reasons=view.unschedulable, proposed={},
                admits_in_proposal=self.config.admits_in_proposal, verdicts_by_words=self.config.verdicts_by_words,
            )  # fmt: skip
            self.last_series = session_series(snap, decisions)
            scheduled = sum(len(e.placements) for e in events if isinstance(e, PlacementProposed))
            self.last_attempts = (scheduled, sum(u.tasks for u in decisions.unschedulable))
            self._revisit = decisions.revisit_at
            if not events:
                return []
            contexts = decision_spans(tracer, span, started, events, view, self.traces, self.subjects)
        ref = record.SessionRef(self.sessions, snap.seq, snap.now, self.conf_seq,
                                record.input_digests(snap, self.config, self.memo))  # fmt: skip
        headers = ref.headers()
        return [Outgoing(subject_of(self.subjects, e), e, headers=headers,
                         context=contexts[f"{e.namespace}/{e.name}"])  # type: ignore[attr-defined]
                for e in events]  # fmt: skip

    def caught_up(self) -> bool:
        """Whether the log delivered back everything we appended (see `written`)."""
        return self.view.seq >= self.written

    async def run_sessions(self, stopping: asyncio.Event) -> None:
        """Session loop: on new events (after a short debounce) or every `period` seconds."""
        took = 0.0
        while not stopping.is_set():
            try:
                await within(self._dirty.wait(), self.period)
                # debounce, and at least as long as the last session took: under a stream of
                # events sessions then use at most about half the CPU, and each one sees more
                await within(stopping.wait(), max(self.debounce, took))
            except TimeoutError:
                pass
            if stopping.is_set():
                break
            turn = self.session_metrics.turn  # what each turn found: /metrics' loop state
            if not self.listed.is_set():
                turn("holding")
                if not await unless_stopped(self._inventory_settled(), stopping):
                    break  # stopped while holding for the cluster's nodes
            self._dirty.clear()
            if self.lease is not None and not self.lease.held():
                turn("standby")
                continue  # a standby replica: it keeps its projection, the leader decides
            if self.uncertain and not await self._resync():
                turn("resyncing")
                continue
            if not self.caught_up():
                turn("catching_up")
                continue  # our last decisions are on their way back: decide on them, not before
            if not self.projection.waiting():
                turn("idle")
                self._refresh_gauges()  # …but what it exports moved with the log
                continue  # nothing waits: the session would decide and append nothing
            if self._concluded():
                turn("settled")
                self.settled.set()
                continue
            turn("deciding")
            started = time.perf_counter()
            try:
                await self._session()
                took = time.perf_counter() - started
            except Exception:  # the log is briefly unreachable, a bug in one session: go on
                log.exception("session %d failed; retrying on the next trigger", self.sessions)
                turn("failed")
                self.session_metrics.failed()
                self._dirty.set()
                with contextlib.suppress(TimeoutError):
                    await within(stopping.wait(), self.period)

    def _concluded(self) -> bool:
        """Whether a session now would conclude nothing new: the last one appended nothing (or
        only its verdicts, see `_session`) and the log has not moved since (the view is the
        log's fold and nothing else), nor has the clock reached a time rule's turn. `decide` is a function of the snapshot, so it would
        reach the same decisions, and the same decisions append nothing the second time. With a
        backlog longer than the cluster, the period's session over every waiting job cost
        ~0.27 s of CPU each second on a full 500-node cluster that nothing changed (issue 29);
        kube-scheduler, too, leaves unschedulable pods until an event could make them fit."""
        if self._quiet is None or self._quiet[0] != self.view.seq:
            return False
        turn = self._quiet[1]
        # off the service mode a session's clock is the log's, which moves only with the log
        return turn is None or self.config.mode != "service" or self.clock() < turn

    def _refresh_gauges(self) -> None:
        """Volcano's queue and job gauges when no session runs because nothing waits: Volcano
        opens a session every period and its close sets them (allocated, pod groups, and the gang
        plugin's unschedulable counts of every job), so pods that ended, a waiting job deleted
        and a restart show there within a period. Here the sessions skipped cost nothing
        (issue 29), so the gauges are those of a session opened and closed with no actions —
        the values one with actions reaches when nothing waits (no action moves a task then) —
        and only when the log moved since they were computed (once after a start), at most once
        per `gauge_every` (5 s): a log that keeps moving while nothing waits (pods ending) costs
        one session opening per 5 s, an idle one nothing. `volcano_e2e_scheduling_latency` and
        the attempts do not count these (README, Metrics)."""
        if self._series_seq == self.view.seq:
            return
        now = asyncio.get_running_loop().time()
        if now - self._series_at < self.gauge_every:
            return  # the loop wakes within a period (`run_sessions`): they are computed then
        snap = self.view.snapshot()
        with collector_paused():
            decisions = decide(snap, self._gauge_conf)
        self.last_series = session_series(snap, decisions)
        self.session_metrics.gauges(self.last_series)
        self._series_seq, self._series_at = snap.seq, now

    async def _session(self) -> None:
        based_on = self.projection.seq
        started = time.perf_counter()
        outs = [
            replace(o, msg_id=f"sched:{based_on}#{i}")  # same snapshot → same decisions →
            for i, o in enumerate(self.session_events())  # deduplicated ids
        ]
        self._quiet = None if outs else (based_on, self._revisit)
        decided = time.perf_counter()
        try:
            results = await self.log.append_pipelined([self.service.entry(o) for o in outs])
        except Exception:
            self.uncertain = sorted({o.subject for o in outs})
            raise
        self.session_metrics.session(decided - started, time.perf_counter() - decided,
                                     *self.last_attempts, self.last_series)  # fmt: skip
        self._series_seq, self._series_at = based_on, asyncio.get_running_loop().time()
        for result in results:
            if isinstance(result, Appended):
                self.written = max(self.written, result.seq)
        if outs and all(isinstance(o.event, JobUnschedulable) for o in outs) and [
            r.seq if isinstance(r, Appended) and not r.duplicate else 0 for r in results
        ] == list(range(based_on + 1, based_on + len(outs) + 1)):
            # the log moved by these verdicts alone: folded back, they are each job's last
            # words, which no decision reads (`decision_events` compares with them), so a session
            # on them would conclude nothing — the session after every change of a reason
            self._quiet = (based_on + len(outs), self._revisit)

    async def _resync(self) -> bool:
        """After a failed append, wait for the last message on each subject it wrote to: every
        event of ours that landed is at or below them (they are all subjects we follow, unlike
        the stream's end). A session opened earlier proposed the same pods again on a view
        without their first proposals (issue 29's stall after a lease flap)."""
        try:
            for subject in self.uncertain:
                last = await self.log.last(subject)
                self.written = max(self.written, last.seq if last else 0)
        except Exception:  # still unreachable: try again on the next trigger
            log.warning("log unreachable after a failed append; no session until it answers")
            return False
        self.uncertain = []
        return True

    async def background(self, stopping: asyncio.Event) -> None:
        async def woken_at_stop() -> None:
            """The session loop's wait for events ends at a stop too: it waited out its period
            (1 s), the last of the five services to end every `down` and test teardown."""
            await stopping.wait()
            self._dirty.set()

        keep = [self.lease.keep(stopping, self._dirty)] if self.lease is not None else []
        await asyncio.gather(*keep, self.run_sessions(stopping), woken_at_stop())
