"""The simulation loop: admission → log → projection → `decide` → allocator/ledger → node agent.

Every fact is appended to an in-memory `MemoryLog` (the contracts events) and folded into the
scheduler's projection; the report is derived from the log alone (`report.build_report`), so a
replay of the written JSONL reproduces it exactly. Time is virtual: the clock jumps to the next
arrival or task completion; sessions run at each instant while they still change something.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import msgspec

from contracts import hami
from contracts.base import Event
from contracts.events import (
    EvictionRequested,
    JobPhaseChanged,
    JobRejected,
    JobSubmitted,
    NodeRegistered,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    QueueCreated,
    SchedulerConfigured,
    SliceAssignment,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.owners import owner_key
from contracts.registry import default_registry
from contracts.subjects import subject_of
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core import ledger
from services.core.devices import DeviceConfig, VendorRegistry
from services.core.holdback import book_running, unfitted_warning
from services.core.scheduling import lifecycle, record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PIPELINES_END, SchedulerConf
from services.core.scheduling.decide import decide
from services.core.scheduling.memo import SessionMemo
from services.core.scheduling.view import SchedulerView
from services.core.workload import RunningPod, Workload, dependson
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Entry

SESSION_HEADER = "Tessera-Session"
TIME_HEADER = "Tessera-Time"
MAX_SESSIONS_PER_INSTANT = 20


@dataclass
class Simulation:
    conf: SchedulerConf
    vendors: VendorRegistry
    device_config: DeviceConfig = field(default_factory=DeviceConfig)
    until: float | None = None
    max_cycles: int | None = None
    log: MemoryLog = field(default_factory=MemoryLog)
    #: virtual times at which MAX_SESSIONS_PER_INSTANT sessions in a row each changed the
    #: cluster and the run moved on: a loop (evict, place again, evict…) a live scheduler
    #: would keep running, one session a second
    unsettled: list[float] = field(default_factory=list)
    #: the configuration's texts: recorded first in the log, and referenced by every session's
    #: decisions, so `tessera replay --verify` can re-run them (None: sessions not recorded)
    config: SchedulerConfigured | None = None

    def __post_init__(self) -> None:
        self.registry = default_registry()
        self.view = SchedulerView(assume=False)  # the decisions' view; commits are immediate
        self.projection = self.view.projection
        self.conf_seq = 0
        self.cards: dict[str, ledger.CardState] = {}
        self.now = 0.0
        self.sessions = 0
        #: when the last session's time rules turn (`Decisions.revisit_at`: sla's waiting
        #: time, cdp's cooldown): the virtual clock stops there too
        self.revisit: float | None = None
        self.arrivals: list[tuple[float, int, JobSpec, tuple[RunningPod, ...]]] = []
        self.warnings: dict[tuple[str, str], tuple[str, ...]] = {}  # admission's clamps, per job
        self.ends: dict[tuple[str, str, str], float | None] = {}  # (job key, pod) → end time
        self.proposed: dict[str, tuple[TaskPlacement, ...]] = {}
        self.retries: dict[str, int] = {}
        #: job → (when its last restart round began, the pods of the run it ended): the round's
        #: pods stop at once here, so the round is that moment — a pod of that run failing then
        #: is one more pod of it (the queue service's `Flow.round_began`)
        self.round: dict[str, tuple[float, frozenset[str]]] = {}
        self.shown: dict[str, str] = {}  # job → the phase its last JobPhaseChanged showed
        self.job_done: set[str] = set()
        self.pg_phase: dict[str, str] = {}
        #: job → its committed pods not started yet: their task's `dependsOn` is not ready, as
        #: Volcano's job controller makes them only then (`dependson.py`; the cluster's job
        #: controller holds them by the same rule)
        self.held: dict[str, set[str]] = {}
        self._session_tag = 0
        #: what one session leaves the next (unchanged nodes' working state, memo.py)
        self.memo = SessionMemo()

    # --- log ------------------------------------------------------------------------------

    def _headers(self, event: Event, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {**(extra or {}), **self.registry.envelope(event).to_headers()}
        headers[TIME_HEADER] = repr(self.now)
        if self._session_tag:
            headers[SESSION_HEADER] = str(self._session_tag)
        return headers

    def emit(self, event: Event, extra: Mapping[str, str] | None = None) -> int:
        entry = Entry(subject_of(self.log.subjects, event), self.registry.encode(event),
                      self._headers(event, extra))  # fmt: skip
        result = self.log.append_now(entry)
        seq = getattr(result, "seq", 0)
        self._fold(seq, event)
        return seq

    def emit_batch(self, events: Sequence[Event]) -> None:
        entries = [
            Entry(subject_of(self.log.subjects, e), self.registry.encode(e), self._headers(e))
            for e in events
        ]
        result = self.log.append_batch_now(entries)
        first = getattr(result, "first_seq", None) or getattr(result, "first", 0)
        for i, e in enumerate(events):
            self._fold(int(first) + i, e)

    def _fold(self, seq: int, event: Event) -> None:
        """Fold one appended event, keeping the phase each job last showed (`shown`), whether a
        JobPhaseChanged said it or a proposal or commit implied it."""
        moved = self.view.apply(seq, event)
        if isinstance(event, JobPhaseChanged):
            self.shown[f"{event.namespace}/{event.name}"] = event.phase
        elif moved is not None:
            self.shown[moved] = self.projection.jobs[moved].phase

    # --- setup ----------------------------------------------------------------------------

    def load(self, nodes: Sequence[NodeRegistered], workload: Workload) -> None:
        if self.config is not None:
            self.conf_seq = self.emit(self.config)
        for node in nodes:
            self.emit(node)
            for card in node.cards:
                self.cards[card.uuid] = ledger.initial_state(card.uuid)
                events = ledger.decide(self.cards[card.uuid], ledger.RegisterCard(card))
                assert isinstance(events, list)
                for ev in events:
                    self.cards[card.uuid] = ledger.evolve(self.cards[card.uuid], ev)
                    self.emit(ev)
        queues: list[QueueSpec] = lifecycle.default_queues(q.name for q in workload.queues)
        for q in [*queues, *workload.queues]:
            self.emit(QueueCreated(spec=q))
        for obj in workload.storage:  # claims, volumes, classes: before any pod names them
            self.emit(obj)
        for quota in workload.quotas:  # before any job of their namespace is enqueued
            self.emit(quota)
        for hn in workload.hypernodes:  # the network tiers, before any gang asks for one
            self.emit(hn)
        for ns in workload.namespaces:  # their labels, before any pod's affinity term reads them
            self.emit(ns)
        # One JobRejected per refused object with every rule it broke, as `apply` answers: one
        # per rule left the report with the last of them alone (`report` keeps an object's last).
        refused: dict[tuple[str, str, str], list[str]] = {}
        for r in workload.rejections:
            refused.setdefault((r.kind, r.namespace, r.name), []).append(r.message())
        for (kind, namespace, name), reasons in refused.items():
            pods = workload.waiting.get((namespace, name), ()) if kind == "PodGroup" else ()
            self.emit(JobRejected(namespace=namespace, name=name, reasons=tuple(reasons), pods=pods))
        for w in workload.warnings:
            key = (w.namespace, w.name)
            self.warnings[key] = (*self.warnings.get(key, ()), w.line())
        running: dict[tuple[str, str], list[RunningPod]] = {}
        for rp in workload.running:
            running.setdefault((rp.namespace, rp.job), []).append(rp)
        for i, job in enumerate(workload.jobs):
            self.arrivals.append(
                (job.arrive_at, i, job, tuple(running.get((job.namespace, job.name), ())))
            )
        self.arrivals.sort(key=lambda a: (a[0], a[1]))

    def _submit_due(self) -> bool:
        changed = False
        while self.arrivals and self.arrivals[0][0] <= self.now:
            _, _, job, running = self.arrivals.pop(0)
            booked, unfitted = self._book_existing(job, running)
            warnings = (*self.warnings.get((job.namespace, job.name), ()), *unfitted)
            self.emit(JobSubmitted(spec=job, warnings=warnings))
            for rp, placement in booked:
                self._existing(job, rp, placement)
            changed = True
        return changed

    def _book_existing(
        self, job: JobSpec, running: Sequence[RunningPod]
    ) -> tuple[list[tuple[RunningPod, TaskPlacement]], list[str]]:
        """Each pre-existing Running pod's cards, before its job is submitted: from HAMi
        annotations, else its requests fitted on its node as the node is (its annotations: the
        hami-core mode); one that does not fit keeps its vendors' cards there out of use, with a
        warning naming it and its node. Later pods of the job see earlier ones' slices."""
        staged: dict[str, ledger.CardState] = {}
        booked: list[tuple[RunningPod, TaskPlacement]] = []
        unfitted: list[str] = []
        for rp in running:
            slices = self._slices_from_annotations(rp) if rp.devices else ()
            if rp.devices and not slices:
                here = [staged.get(u) or self.cards[u] for u in self.projection.node_cards.get(rp.node, ())]
                node = self.projection.nodes.get(rp.node)
                picked, failed = book_running(here, rp.devices, registry=self.vendors,
                                              config=self.device_config,
                                              node_annotations=node.annotations if node else None,
                                              pod_annotations=rp.annotations)  # fmt: skip
                if failed is not None:
                    unfitted.append(unfitted_warning(job.namespace, rp.pod, rp.node, failed,
                                                     [c for c, _ in picked]))  # fmt: skip
                slices = tuple(SliceAssignment(card=c, node=rp.node, slice=sl) for c, sl in picked)
            owner = owner_key(job.namespace, job.name, rp.pod)
            for a in ledger.per_card(slices):
                state = staged.get(a.card) or self.cards[a.card]
                got = ledger.decide(state, ledger.ReserveSlice(owner, a.slice))
                if isinstance(got, list):
                    for ev in got:
                        state = ledger.evolve(state, ev)
                    staged[a.card] = state
            booked.append((rp, TaskPlacement(task=rp.pod, node=rp.node, slices=slices)))
        return booked, unfitted

    def _existing(self, job: JobSpec, rp: RunningPod, placement: TaskPlacement) -> None:
        """A pre-existing Running pod: commit its booking and start it (it runs already)."""
        key = f"{job.namespace}/{job.name}"
        if self._commit(job.namespace, job.name, (placement,), 0, proposal_seq=0):
            self._start(job, (placement,), hold=False)
        self.ends[(key, rp.pod, "")] = self._end_of(job, rp.pod)

    def _slices_from_annotations(self, rp: RunningPod) -> tuple[SliceAssignment, ...]:
        """`hami.io/<CW>-devices-allocated` → slices on known cards (`hami.booked_slice`)."""
        out: list[SliceAssignment] = []
        for a in hami.annotated_slices(rp.node, rp.annotations, rp.init_containers):
            if a.card not in self.cards:
                continue
            spec = self.cards[a.card].spec
            assert spec is not None
            booked = hami.booked_slice(spec, a.slice.memory, a.slice.cores, a.slice.template, a.slice.slots)
            out.append(msgspec.structs.replace(a, slice=booked))
        return tuple(out)

    # --- allocator + node agent -----------------------------------------------------------

    def _commit(self, ns: str, name: str, placements: tuple[TaskPlacement, ...], based_on: int,
                proposal_seq: int) -> bool:  # fmt: skip
        staged: dict[str, ledger.CardState] = {}
        events: list[Event] = []
        for p in placements:
            owner = owner_key(ns, name, p.task)
            for s in ledger.per_card(p.slices):
                state = staged.get(s.card, self.cards[s.card])
                got = ledger.decide(state, ledger.ReserveSlice(owner, s.slice))
                if isinstance(got, ledger.Rejection):
                    self.emit(PlacementRejected(namespace=ns, name=name, reason=f"{s.card}: {got.reason}",
                                                proposal_seq=proposal_seq))  # fmt: skip
                    return False
                for ev in got:
                    state = ledger.evolve(state, ev)
                    events.append(ev)
                staged[s.card] = state
        events.append(PlacementCommitted(namespace=ns, name=name, placements=placements,
                                         proposal_seq=proposal_seq, sets_phase=True))  # fmt: skip
        self.emit_batch(events)
        self.cards.update(staged)
        return True

    def _start(self, job: JobSpec, placements: tuple[TaskPlacement, ...], hold: bool = True) -> None:
        """Start the committed pods, each once its task's `dependsOn` is ready (`hold`): the
        others wait in `held` for the pods they depend on, started here or later. Started all
        at once, a task began before the one it depends on ran (nginx3 with one of nginx2's
        five pods started), an order no cluster shows."""
        key = f"{job.namespace}/{job.name}"
        if not hold or not any(t.depends_on for t in job.tasks):
            for p in placements:
                self._run(job, p.task, p.node)
            return
        self.held.setdefault(key, set()).update(p.task for p in placements)
        self._start_held(key)

    def _run(self, job: JobSpec, pod: str, node: str) -> None:
        key = f"{job.namespace}/{job.name}"
        self.emit(TaskStarted(namespace=job.namespace, name=job.name, task=pod, node=node, at=self.now))
        self.ends[(key, pod, "")] = self._end_of(job, pod)

    def _start_held(self, key: str) -> bool:
        """Start the job's held pods whose tasks' `dependsOn` is ready now, in the job's task
        order, again while a start readies another task; True if any started."""
        held = self.held.get(key)
        job = self.projection.jobs.get(key)
        if not held or job is None:
            return False
        tasks = self.projection.tasks.get(key, {})

        def ready_pods(t: TaskSpec) -> int:  # a task's pods started (running) or succeeded
            return sum(tasks[p].status in (st.RUNNING, st.SUCCEEDED)
                       for p, role, _, _ in st.task_names(job.spec) if role == t.name and p in tasks)  # fmt: skip

        started = False
        progress = True
        while progress:
            progress = False
            for pod, _, _, t in st.task_names(job.spec):
                if pod not in held or not dependson.task_ready(t, job.spec.tasks, ready_pods):
                    continue
                held.discard(pod)
                snap = tasks.get(pod)
                if snap is not None and snap.status == st.BOUND:
                    self._run(job.spec, pod, snap.node)
                    progress = started = True
        if not held:
            self.held.pop(key, None)
        return started

    def _start_all_held(self) -> bool:
        """Held pods whose dependencies became ready (started, or succeeded, since)."""
        return any([self._start_held(key) for key in sorted(self.held)])

    def _end_of(self, job: JobSpec, pod: str) -> float | None:
        for pname, _, _, t in st.task_names(job):
            if pname == pod:
                return None if t.duration is None else self.now + t.duration
        return None

    def _release(
        self, ns: str, name: str, pod: str, slices: Sequence[SliceAssignment], reason: str
    ) -> None:
        owner = owner_key(ns, name, pod)
        for s in ledger.per_card(tuple(slices)):
            got = ledger.decide(self.cards[s.card], ledger.ReleaseSlice(owner, reason))
            if isinstance(got, list):
                for ev in got:
                    self.cards[s.card] = ledger.evolve(self.cards[s.card], ev)
                    self.emit(ev)

    def _finish(self, ns: str, name: str, pod: str, exit_code: int, reason: str) -> None:
        key = f"{ns}/{name}"
        task = self.projection.tasks.get(key, {}).get(pod)
        if task is None:
            return
        slices = task.slices
        self.emit(TaskFinished(namespace=ns, name=name, task=pod, node=task.node, exit_code=exit_code,
                               reason=reason, at=self.now))  # fmt: skip
        self._release(ns, name, pod, slices, reason or "finished")
        self.ends.pop((key, pod, ""), None)
        self.held.get(key, set()).discard(pod)  # a held pod evicted or killed never starts

    # --- one session ----------------------------------------------------------------------

    def session(self) -> bool:
        """One session at the virtual now, or none when nothing waits, as the live scheduler
        (`run_sessions`): every action acts for a waiting job or pod, so such a session would
        decide and append nothing — yet replaying the openb trace at its own times ran 2.9
        sessions per pod, ~65 % of them over a cluster where nothing waited, each rebuilding
        the 1,213-node snapshot (800 pods took 190 s)."""
        if not self.projection.waiting():
            self.revisit = None  # no waiting job: no time rule turns for one
            return False
        self.sessions += 1
        self._session_tag = self.sessions
        snap = self.projection.snapshot()
        snap = replace(snap, now=self.now)  # the simulation's virtual clock
        d = decide(snap, self.conf, memo=self.memo)
        self.revisit = d.revisit_at
        events = record.decision_events(d, session=self.sessions, mode="simulate", outstanding={},
                                        last_reasons=self.view.unschedulable, proposed=self.proposed,
                                        admits_in_proposal=self.config is None or self.config.admits_in_proposal,
                                        verdicts_by_words=self.config is None or self.config.verdicts_by_words,
                                        pipelines_end=self.conf.rules >= PIPELINES_END)  # fmt: skip
        headers: dict[str, str] = {}
        if self.config is not None and events:
            headers = record.SessionRef(self.sessions, snap.seq, snap.now, self.conf_seq,
                                        record.input_digests(snap, self.config, self.memo)).headers()  # fmt: skip
        # a proposal holds its JobPlacement's own tuple: whether it commits now or was only
        # reserved in the session (pipelined) is that placement's
        pipelined = {id(jp.placements): jp.pipelined for jp in d.placements}
        changed = False
        for e in events:
            seq = self.emit(e, headers)
            match e:
                case JobPhaseChanged():
                    changed = True
                case PlacementProposed(admits=True) if pipelined[id(e.placements)]:
                    changed = True  # admitted (the phase change it carries), reserved only
                case EvictionRequested():
                    key = f"{e.namespace}/{e.name}"
                    kind = self.projection.jobs[key].spec.kind if key in self.projection.jobs else "Job"
                    self._finish(e.namespace, e.name, e.task, 137,
                                 "evicted" if kind != "Pod" else "evicted-deleted")  # fmt: skip
                    changed = True
                case PlacementProposed() if not pipelined[id(e.placements)]:
                    if self._commit(e.namespace, e.name, e.placements, d.based_on, seq):
                        self._start(self.projection.jobs[f"{e.namespace}/{e.name}"].spec, e.placements)
                        changed = True
                case _:
                    pass
        changed = self._start_all_held() or changed
        self._sync_lifecycle()
        self._session_tag = 0
        return changed

    def _sync_lifecycle(self) -> None:
        for key, job in list(self.projection.jobs.items()):
            if key in self.job_done:
                continue
            sync = lifecycle.sync_job(job.spec, job.phase, self.shown.get(key, ""), self.projection.tasks[key].values())
            if sync.running:
                self.emit(JobPhaseChanged(namespace=job.spec.namespace, name=job.spec.name, phase="Running",
                                          reason=sync.reason))  # fmt: skip
            if sync.terminal:
                self._terminate(key, sync.terminal, sync.end)

    def _terminate(self, key: str, phase: str, reason: str) -> None:
        job = self.projection.jobs[key]
        for pod, t in list(self.projection.tasks[key].items()):
            if t.status in (st.RUNNING, st.BOUND):
                self._finish(job.spec.namespace, job.spec.name, pod, 137, "killed")
        self.job_done.add(key)
        self.round.pop(key, None)
        self.emit(
            JobPhaseChanged(
                namespace=job.spec.namespace, name=job.spec.name, phase=phase, reason=reason
            )
        )

    def _task_finished(self, key: str, pod: str) -> None:
        job = self.projection.jobs.get(key)
        if job is None:
            return
        spec = next((t for p, _, _, t in st.task_names(job.spec) if p == pod), None)
        code = spec.exit_code if spec else 0
        self._finish(job.spec.namespace, job.spec.name, pod, code, "")
        began, ran = self.round.get(key, (-1.0, frozenset()))
        if code != 0 and began == self.now and pod in ran:
            # its job restarts at this moment (a pod of the run it ends failing with the one
            # restarted): Volcano's Restarting state kills it and makes it again, no retry
            # counted — RestartPod with two pods failing together spent two retries per run. A
            # failure later (a pod run again while others wait for room, or one that ran on)
            # is a new one: its policy, a retry — while any restarted pod waited for room, a
            # pod run again failed for ever for free
            self.emit(TaskFinished(namespace=job.spec.namespace, name=job.spec.name, task=pod, node="",
                                   exit_code=code, reason="restarted", at=self.now))  # fmt: skip
            return
        retry = self.retries.get(key, 0)
        cause = "PodFailed" if code != 0 else "TaskCompleted"
        if code == 0 and not lifecycle.task_completed(job.spec, spec, self.projection.tasks[key].values()):
            return
        decision = lifecycle.on_pod_failed(job.spec, spec, code, retry, cause)
        if decision.phase == "Restarting":
            self.retries[key] = retry + 1
            targets = lifecycle.restart_targets(decision.action, pod, spec, self.projection.tasks[key])
            self.round[key] = (self.now, frozenset(p for p, t in self.projection.tasks[key].items()
                                                   if t.status in (st.RUNNING, st.BOUND)))  # fmt: skip
            for p in targets:
                t = self.projection.tasks[key][p]
                if t.status in (st.RUNNING, st.BOUND):
                    self._finish(job.spec.namespace, job.spec.name, p, 137, "restarted")
                elif t.status in (st.FAILED, st.SUCCEEDED):  # as the queue service: all run again
                    self.emit(TaskFinished(namespace=job.spec.namespace, name=job.spec.name, task=p,
                                           node="", exit_code=code, reason="restarted", at=self.now))  # fmt: skip
            self.emit(JobPhaseChanged(namespace=job.spec.namespace, name=job.spec.name, phase="Restarting",
                                      reason=f"{decision.action}: retry {retry + 1}/{job.spec.max_retry}"))  # fmt: skip
        elif decision.phase:
            self._terminate(key, decision.phase, f"{decision.action} on {cause}")

    # --- main loop ------------------------------------------------------------------------

    def run(self, on_session: Callable[[int, float], None] | None = None) -> None:
        """Run to the end (or to `until` / `max_cycles`); `on_session(sessions, now)` after each
        session that did something lets a shell show progress (it cannot change the run)."""
        self._submit_due()
        while True:
            for _ in range(MAX_SESSIONS_PER_INSTANT):
                if self.max_cycles is not None and self.sessions >= self.max_cycles:
                    return
                if not self.session():
                    break
                if on_session is not None:
                    on_session(self.sessions, self.now)
            else:  # every session changed something: a loop of decisions, said, not hidden
                self.unsettled.append(self.now)
            # (arrivals are sorted: the next is the first — a list of them all at every step made
            # a long trace quadratic, the openb review)
            next_times = [self.arrivals[0][0]] if self.arrivals else []
            next_times += [e for e in self.ends.values() if e is not None]
            if self.revisit is not None and self.revisit > self.now:
                # a job past its sla waiting time on an otherwise quiet cluster was let through
                # only at the next arrival or end, or never
                next_times.append(self.revisit)
            if not next_times:
                return
            nxt = min(next_times)
            if self.until is not None and nxt > self.until:
                return
            self.now = max(self.now, nxt)
            for (key, pod, _), end in sorted(self.ends.items(), key=lambda kv: (kv[1] or 0, kv[0])):
                if end is not None and end <= self.now:
                    self._task_finished(key, pod)
            self._start_all_held()  # a task that succeeded readies those depending on it
            self._sync_lifecycle()
            self._submit_due()


def load_simulation(
    conf: SchedulerConf, vendors: VendorRegistry, nodes: Sequence[NodeRegistered], workload: Workload,
    *, until: float | None = None, cycles: int | None = None, device_config: DeviceConfig | None = None,
    config: SchedulerConfigured | None = None,
) -> Simulation:  # fmt: skip
    sim = Simulation(conf, vendors, device_config or DeviceConfig(), until, cycles, config=config)
    sim.load(nodes, workload)
    return sim

