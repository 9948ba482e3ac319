"""DESIGN §9's invariants checked over a whole log, event by event (the chaos suite's judge).

A fault (kill -9 of any service or of nats-server, a replica racing another) may delay work but
must never leave a trace in the log that a correct system could not have written. `audit` folds
every event from sequence 1 and reports two kinds of findings:

* **broken** — the log itself is wrong, at a sequence, forever: a card over its capacity (or a
  carried usage that disagrees with the fold of the card's history), a gang committed below its
  `minAvailable`, a commit whose slices are not on the ledgers in the same batch, a pod
  committed or started twice in one run, a start without a commit, a pod that had ended
  ending again (a terminal phase changed: a late "node lost" over a real exit 0);
* **unsettled** — the state at the end is not (yet) the one the log promises: a pod neither
  finished, running, nor pending with a reason; ledgers that do not hold exactly the running
  pods' slices. These may still settle (the allocator releases after it reads a finish); a
  caller waits for them to clear and reports what is left at its deadline.

Pure: no I/O, no clock. A "run" of a pod lasts from its commit to its `TaskFinished` (or its
job's deletion); starting it again needs a new commit, and a new commit needs the run ended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts.base import Event
from contracts.devices import CardSpec, SliceSpec
from contracts.events import (
    CardHealthChanged,
    CardRegistered,
    CardRetired,
    JobDeleted,
    JobSubmitted,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    SliceReleased,
    SliceReserved,
    TaskFinished,
    TaskStarted,
)
from contracts.owners import job_prefix, owner_key
from services.core import ledger
from services.core.scheduling.snapshot import BACK_TO_PENDING

#: Pod phases a pod may end a round in without a reason.
SETTLED_PHASES = frozenset({"Succeeded", "Failed", "Running", "Evicted", "Rejected"})
#: Pod phases that wait; they must say why.
WAITING_PHASES = frozenset({"Pending", "Pipelined"})

IDLE, COMMITTED, STARTED = "idle", "committed", "started"


@dataclass
class Run:
    """One pod's current run: where its last commit put its slices, and whether it started."""

    state: str = IDLE
    commit_seq: int = 0
    slices: dict[str, SliceSpec] = field(default_factory=dict)  # card -> slice


@dataclass
class Findings:
    broken: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    commits: int = 0
    starts: int = 0

    @property
    def clean(self) -> bool:
        return not self.broken and not self.unsettled


@dataclass
class Audit:
    """The fold: card ledgers re-derived from their history, and every pod's run."""

    cards: dict[str, ledger.CardState] = field(default_factory=dict)
    specs: dict[str, CardSpec] = field(default_factory=dict)
    min_available: dict[tuple[str, str], int] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)  # owner key -> its run
    #: owner key -> the sequence of its pod's own end, while no new run started (a pod in a
    #: terminal phase: a restart's or an eviction's end sends it back to Pending, not this)
    ended: dict[str, int] = field(default_factory=dict)
    findings: Findings = field(default_factory=Findings)
    #: the log was compacted (`tessera compact`): a card's first event may be any ledger event,
    #: whose carried usage is then the card's state (its history is gone, not wrong)
    compacted: bool = False

    def _broken(self, seq: int, what: str) -> None:
        self.findings.broken.append(f"#{seq}: {what}")

    def _run(self, namespace: str, name: str, task: str) -> Run:
        return self.runs.setdefault(owner_key(namespace, name, task), Run())

    def apply(self, seq: int, event: Event) -> None:
        match event:
            case NodeRegistered():
                for spec in event.cards:
                    self.specs[spec.uuid] = spec
            case CardRegistered() | SliceReserved() | SliceReleased() | CardHealthChanged() | CardRetired():
                self._ledger(seq, event)
            case JobUpdated(spec=spec):
                self.min_available[(spec.namespace, spec.name)] = spec.min_available
            case PlacementCommitted():
                self._commit(seq, event)
            case TaskStarted():
                run = self._run(event.namespace, event.name, event.task)
                self.findings.starts += 1
                if run.state == IDLE:
                    self._broken(seq, f"{event.namespace}/{event.task} started without a commit")
                elif run.state == STARTED:
                    self._broken(seq, f"{event.namespace}/{event.task} started twice in one run "
                                      f"(committed at #{run.commit_seq})")  # fmt: skip
                run.state = STARTED
            case TaskFinished():
                owner = owner_key(event.namespace, event.name, event.task)
                run = self.runs.pop(owner, None)
                if event.reason in BACK_TO_PENDING:
                    self.ended.pop(owner, None)
                elif run is None and owner in self.ended:
                    self._broken(seq, f"{event.namespace}/{event.task} ended again after its end at "
                                      f"#{self.ended[owner]} (exit code {event.exit_code}"
                                      f"{', ' + event.reason if event.reason else ''}): "
                                      "a pod in a terminal phase changed phase")  # fmt: skip
                else:
                    self.ended[owner] = seq
            case JobDeleted() | JobSubmitted():
                if isinstance(event, JobSubmitted):
                    self.min_available[(event.spec.namespace, event.spec.name)] = event.spec.min_available
                    prefix = job_prefix(event.spec.namespace, event.spec.name)
                else:
                    prefix = job_prefix(event.namespace, event.name)
                for owner in [o for o in self.ended if o.startswith(prefix)]:
                    del self.ended[owner]  # made anew (or gone): its pods' past ends are history
                if isinstance(event, JobDeleted):
                    for owner in [o for o in self.runs if o.startswith(prefix)]:
                        del self.runs[owner]
            case _:
                pass

    def _ledger(self, seq: int, event: ledger.LedgerEvent) -> None:
        uuid = event.card.uuid if isinstance(event, CardRegistered) else event.card
        state = self.cards.get(uuid)
        if state is None and self.compacted and not isinstance(event, CardRegistered):
            state = ledger.CardState(uuid=uuid, spec=self.specs.get(uuid), usage=event.usage)
        state = ledger.evolve(state or ledger.CardState(uuid=uuid, spec=self.specs.get(uuid)), event)
        self.cards[uuid] = state
        if event.usage != state.usage:
            self._broken(seq, f"card {uuid}: carried usage disagrees with its history's fold")
        for problem in ledger.check_invariants(state):
            self._broken(seq, f"card {uuid} over capacity: {problem}")

    def _commit(self, seq: int, event: PlacementCommitted) -> None:
        ns, name = event.namespace, event.name
        self.findings.commits += 1
        for p in event.placements:
            run = self._run(ns, name, p.task)
            if run.state != IDLE and not event.existing:
                self._broken(seq, f"{ns}/{p.task} committed again in one run "
                                  f"(first at #{run.commit_seq})")  # fmt: skip
            run.state = STARTED if event.existing else COMMITTED
            run.commit_seq = seq
            self.ended.pop(owner_key(ns, name, p.task), None)  # a new run: it may end again
            run.slices = {a.card: a.slice for a in ledger.per_card(p.slices)}
            owner = owner_key(ns, name, p.task)
            for a in ledger.per_card(p.slices):  # the ledger events precede the commit in its atomic batch
                held = self.cards.get(a.card)
                if held is None and self.compacted:
                    continue  # the card's history before its last event is gone
                if held is None or held.slice_of(owner) != a.slice:
                    self._broken(seq, f"{ns}/{p.task}: committed slice on {a.card} not on its ledger")
        need = self.min_available.get((ns, name), 1)
        prefix = job_prefix(ns, name)
        live = sum(1 for o, r in self.runs.items() if o.startswith(prefix) and r.state != IDLE)
        if not event.existing and live < need:
            self._broken(seq, f"gang {ns}/{name}: {live} pods placed, minAvailable {need}")

    def settle(self, pods: Iterable[dict]) -> Findings:
        """The end-of-log checks; `pods` are a report's pod records (phase, reason)."""
        f = self.findings
        f.unsettled = []
        for p in pods:
            phase, reason = p.get("phase", ""), p.get("reason", "")
            if phase in SETTLED_PHASES or (phase in WAITING_PHASES and reason):
                continue
            f.unsettled.append(f"pod {p.get('namespace')}/{p.get('name')}: {phase} "
                               f"{'without a reason' if phase in WAITING_PHASES else ''}".rstrip())  # fmt: skip
        held = {(card, s.owner): s.slice for card, st in self.cards.items() for s in st.usage.slices}
        running = {(card, owner): sl for owner, r in self.runs.items() for card, sl in r.slices.items()}
        for key in sorted(held.keys() - running.keys()):
            f.unsettled.append(f"card {key[0]}: slice of {key[1]} held, the pod does not run")
        for key in sorted(running.keys() - held.keys()):
            f.unsettled.append(f"card {key[0]}: running {key[1]} holds no slice there")
        for key in sorted(held.keys() & running.keys()):
            if held[key] != running[key]:
                f.unsettled.append(f"card {key[0]}: {key[1]} holds another slice than committed")
        return f

    def ledgers(self) -> dict[str, tuple[str, ...]]:
        """card -> owners, as the fold of the log has them (to compare with a service's view)."""
        return {uuid: st.usage.owners for uuid, st in self.cards.items()}


def audit(events: Iterable[tuple[int, Event]], pods: Iterable[dict] = (),
          compacted: bool = False) -> Findings:  # fmt: skip
    a = Audit(compacted=compacted)
    for seq, event in events:
        a.apply(seq, event)
    return a.settle(pods)
