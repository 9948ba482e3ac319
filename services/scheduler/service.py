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
from dataclasses import replace

from opentelemetry import trace

from contracts.base import Event
from contracts.devices import SliceSpec
from contracts.events import (
    ALL_EVENTS,
    EvictionRequested,
    JobPhaseChanged,
    JobUnschedulable,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    SliceReleased,
    SliceReserved,
)
from contracts.owners import job_prefix, owner_key
from services.core import ledger
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import SchedulerConf, default_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import unschedulable_key
from services.runtime.eventlog import Appended, EventLog
from services.runtime.lease import Lease
from services.runtime.service import EventService, Outgoing, Received, replay_decoded

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
        self.projection = st.ClusterProjection()
        self.outstanding: dict[str, int] = {}  # job key -> seq of its unanswered proposal
        self.assumed_tasks: dict[str, set[str]] = {}  # job key -> pods its proposal assumed
        self.assumed: dict[str, dict[str, SliceSpec]] = {}  # card -> owner -> proposed slice
        self.unschedulable: dict[str, str] = {}
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

    def _fold(self, seq: int, event: Event) -> None:
        if seq <= self.recovered_seq:
            return  # already folded during recovery
        if seq in self.own:
            self.own.discard(seq)
            return  # folded when we wrote it
        self._apply(seq, event)

    def _apply(self, seq: int, event: Event) -> None:
        self.projection.apply(seq, event)
        match event:
            case PlacementProposed():
                self.outstanding[f"{event.namespace}/{event.name}"] = seq
                self._assume(event)
            case PlacementCommitted():
                if self._answers_outstanding(event.namespace, event.name, event.proposal_seq):
                    self._settled(event.namespace, event.name)
            case PlacementRejected():
                if self._answers_outstanding(event.namespace, event.name, event.proposal_seq):
                    self._forget(event.namespace, event.name)
            case SliceReserved() | SliceReleased():
                # the ledger's usage is authoritative but does not know our outstanding
                # proposals yet: book them on top again
                for owner, sl in self.assumed.get(event.card, {}).items():
                    self._card_usage(event.card, ledger.ReserveSlice(owner=owner, slice=sl))
            case JobUnschedulable():
                self.unschedulable[f"{event.namespace}/{event.name}"] = unschedulable_key(
                    event.reason, event.why)
            case _:
                pass

    def _answers_outstanding(self, namespace: str, name: str, proposal_seq: int) -> bool:
        """Whether an answer is the one to the job's outstanding proposal (then it is no longer
        outstanding). The allocator also answers stale proposals — an older one of the job, or
        one of a job deleted meanwhile — with a rejection; undoing the current proposal's
        assumptions for those would unbind tasks the allocator is committing or has committed.
        `proposal_seq` 0 is an answer from an older writer: taken as the outstanding one."""
        key = f"{namespace}/{name}"
        if key not in self.outstanding or proposal_seq not in (0, self.outstanding[key]):
            return False
        del self.outstanding[key]
        return True

    # --- assumed placements (Volcano's cache "assume") ----------------------------------------

    def _assume(self, event: PlacementProposed) -> None:
        """Book a proposal in the projection as if committed — tasks Bound, slices on the cards'
        usage — so later sessions neither re-decide the job nor hand its slices to another one
        while the allocator decides. The allocator's ledger events overwrite the usage with the
        authoritative one; a rejection undoes the booking (`_forget`)."""
        key = f"{event.namespace}/{event.name}"
        tasks = self.projection.tasks.get(key)
        if tasks is None:
            return
        assumed = self.assumed_tasks[key] = set()
        for p in event.placements:
            if p.task not in tasks or tasks[p.task].status != st.PENDING:
                continue
            tasks[p.task] = replace(tasks[p.task], status=st.BOUND, node=p.node, slices=p.slices)
            assumed.add(p.task)
            owner = owner_key(event.namespace, event.name, p.task)
            for a in p.slices:
                self.assumed.setdefault(a.card, {})[owner] = a.slice
                self._card_usage(a.card, ledger.ReserveSlice(owner=owner, slice=a.slice))

    def _settled(self, namespace: str, name: str) -> list[tuple[str, str]]:
        """Drop a job's assumed slices (committed: the ledger has them; rejected: undone)."""
        self.assumed_tasks.pop(f"{namespace}/{name}", None)
        prefix = job_prefix(namespace, name)
        dropped = []
        for card in list(self.assumed):
            owners = self.assumed[card]
            for owner in [o for o in owners if o.startswith(prefix)]:
                del owners[owner]
                dropped.append((card, owner))
            if not owners:
                del self.assumed[card]
        return dropped

    def _forget(self, namespace: str, name: str) -> None:
        """Undo a rejected proposal's assumptions: its slices, and its tasks back to Pending —
        only the tasks it assumed, not those an earlier commit of the job bound."""
        key = f"{namespace}/{name}"
        assumed = self.assumed_tasks.get(key, set())
        for card, owner in self._settled(namespace, name):
            self._card_usage(card, ledger.ReleaseSlice(owner=owner, reason="rejected"))
        tasks = self.projection.tasks.get(key, {})
        for pod in assumed:
            t = tasks.get(pod)
            if t is not None and t.status == st.BOUND:
                tasks[pod] = replace(t, status=st.PENDING, node="", slices=())

    def _card_usage(self, uuid: str, command: ledger.Command) -> None:
        snap = self.projection.cards.get(uuid)
        if snap is None:
            return
        state = ledger.CardState(uuid=uuid, spec=snap.spec, usage=snap.usage)
        events = ledger.decide(state, command)
        if isinstance(events, ledger.Rejection):
            return  # the allocator will refuse it; nothing to book
        for e in events:
            state = ledger.evolve(state, e)
        self.projection.cards[uuid] = replace(snap, usage=state.usage)

    async def on_event(self, event: Event, rx: Received) -> None:
        self._fold(rx.message.seq, event)
        self._dirty.set()

    async def recover(self) -> None:
        """Fold the log up to its end, then follow it from there. Every replica reads every
        event (`EventService.follow_from`), not a share of one durable: a projection built
        from half the log places pods on cards that are taken and never learns why others
        wait (issue 12 item 6)."""
        self.recovered_seq = await self.log.last_sequence()
        async for msg, event in replay_decoded(self.log, [self.subjects.events], self.recovered_seq,
                                                on_poison=self.service.park_once):
            self._apply(msg.seq, event)
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
        s = self.subjects
        out: list[Outgoing] = []
        for ph in decisions.phases:
            out.append(Outgoing(s.job(ph.namespace, ph.name), JobPhaseChanged(
                namespace=ph.namespace, name=ph.name, phase=ph.phase, reason=ph.reason)))  # fmt: skip
        for ev in decisions.evictions:
            out.append(Outgoing(s.job(ev.namespace, ev.name), EvictionRequested(
                namespace=ev.namespace, name=ev.name, task=ev.task, reason=ev.reason)))  # fmt: skip
        for jp in decisions.placements:
            key = f"{jp.namespace}/{jp.name}"
            if jp.pipelined or key in self.outstanding:
                continue  # pipelined = reserved in-session only; outstanding = allocator deciding
            out.append(Outgoing(s.job(jp.namespace, jp.name), PlacementProposed(
                namespace=jp.namespace, name=jp.name, based_on=decisions.based_on,
                placements=jp.placements, session=self.sessions)))  # fmt: skip
        for u in decisions.unschedulable:
            key = f"{u.namespace}/{u.name}"
            if self.unschedulable.get(key) != u.key:
                self.unschedulable[key] = u.key
                out.append(Outgoing(s.job(u.namespace, u.name),
                                    u.event(decisions.based_on, self.sessions)))  # fmt: skip
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
                self._dirty.set()
                await asyncio.sleep(self.period)

    async def _session(self) -> None:
        based_on = self.projection.seq
        outs = [
            Outgoing(o.subject, o.event, msg_id=f"sched:{based_on}#{i}")  # same snapshot → same
            for i, o in enumerate(self.session_events())  # decisions → deduplicated ids
        ]
        results = await self.log.append_pipelined([self.service.entry(o) for o in outs])
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
