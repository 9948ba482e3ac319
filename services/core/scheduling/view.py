"""What a scheduler knows when it opens a session, folded from the log alone.

The scheduler service and `tessera replay --verify` both fold the log through this one class,
so a session re-run from the log sees the very snapshot the service saw: the projection, plus
the proposals still waiting for the allocator's answer booked as if committed (Volcano's cache
"assume"), plus the last pending reason recorded per job (a reason is appended only when it
changes), plus the nodes where the allocator refused a job's proposal (`refused`).

A refusal stands until something it may depend on changes: the job (submitted again, updated,
committed, ended), or one of its nodes (registered or lost, a card released, registered or
changing health, a pod there finished, its binding refused, a job on it ended), or the labels
of a namespace its pods are judged by (their own namespace's, or any, for a job whose affinity
terms select namespaces by label). Until then a
session places the job elsewhere; refused on `MAX_REFUSED_NODES` nodes in a row, nowhere
(a new node lifts that). So a proposal refused for a reason the next session cannot change is
never proposed again unchanged — the loop of issue 27 — and the pod waits with the refusal as
its reason. Nothing here reads a clock or the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from contracts.base import Event
from contracts.devices import SliceSpec
from contracts.events import (
    STALE_VIEW,
    BindingFailed,
    CardHealthChanged,
    CardRegistered,
    CardRetired,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUnschedulable,
    JobUpdated,
    NamespaceChanged,
    NamespaceDeleted,
    NodeLost,
    NodeRegistered,
    NodeUsage,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    SliceReleased,
    SliceReserved,
    TaskFinished,
)
from contracts.owners import job_prefix, owner_key
from contracts.workloads import JobSpec
from services.core import ledger
from services.core.retention import ended
from services.core.scheduling import snapshot as st
from services.core.scheduling.decisions import unschedulable_key
from services.core.scheduling.record import SESSION

#: a job refused on this many nodes since anything changed is placed on none until it does
MAX_REFUSED_NODES = 3
#: answers to a proposal made stale by the log (the job updated, answered, ended): no refusal
STALE = "stale proposal"


@dataclass
class SchedulerView:
    """`assume=False` is the simulation's view: it commits in the session, so nothing is ever
    outstanding and the projection alone is what its sessions decide on.

    Every field is a fold of the log, so a snapshot of it plus the log's tail equals a replay
    from #1 (`services.scheduler.view`). A job that ends leaves `unschedulable` with the
    projection: the memory is bounded by what is live."""

    projection: st.ClusterProjection = field(default_factory=st.ClusterProjection)
    outstanding: dict[str, int] = field(default_factory=dict)  # job key -> seq of its unanswered proposal
    assumed_tasks: dict[str, set[str]] = field(default_factory=dict)  # job key -> pods its proposal assumed
    assumed: dict[str, dict[str, SliceSpec]] = field(default_factory=dict)  # card -> owner -> slice
    unschedulable: dict[str, str] = field(default_factory=dict)  # job key -> its last reason logged (unschedulable_key)
    assume: bool = True
    refused: dict[str, st.Refused] = field(default_factory=dict)  # job key -> where the allocator refused it
    #: job owner prefix -> the cards its outstanding proposal assumed (derived from `assumed`,
    #: not stored): settling a job visits its own cards, not every card with an assumption —
    #: a walk over all of them per commit was 30 % of a busy scheduler (issue 29's profile)
    job_cards: dict[str, dict[str, None]] = field(default_factory=dict, repr=False, compare=False)
    #: the highest session number the log's decisions carry (their `Tessera-Session` header):
    #: a restarted scheduler, or a standby taking over, numbers its sessions on from it, so
    #: "session 3" names one session of the log, not one per process that ran
    session: int = 0

    def __post_init__(self) -> None:
        if self.assumed and not self.job_cards:
            self.job_cards = cards_by_job(self.assumed)

    @property
    def seq(self) -> int:
        return self.projection.seq

    def snapshot(self) -> st.Snapshot:
        snap = self.projection.snapshot()
        return replace(snap, refused=dict(self.refused)) if self.refused else snap

    def note_session(self, headers: Mapping[str, str]) -> None:
        """Fold a message's session header (the log's, not the event's: a session that only
        changed phases or evicted writes its number in headers alone)."""
        if (raw := headers.get(SESSION)) is not None and raw.isdigit() and (n := int(raw)) > self.session:
            self.session = n

    def apply(self, seq: int, event: Event) -> str | None:
        """Fold one event; returns what `ClusterProjection.apply` does (a phase implied)."""
        changed = self._changes(event) if self.refused else None
        moved = self.projection.apply(seq, event)
        if changed is not None:
            self._lift(*changed)
        elif isinstance(event, NamespaceChanged | NamespaceDeleted) and self.refused:
            self._lift_namespace(event.name)
        if isinstance(event, BindingFailed) and event.retry_at > 0:
            self._hold(f"{event.namespace}/{event.name}", event)
        if isinstance(event, JobDeleted | JobPhaseChanged):
            key = f"{event.namespace}/{event.name}"
            if key not in self.projection.jobs:  # ended: no session decides about it again
                self.unschedulable.pop(key, None)
        match event:
            case JobUnschedulable():
                self.unschedulable[f"{event.namespace}/{event.name}"] = unschedulable_key(
                    event.reason, event.why)
            case _ if not self.assume:
                pass
            case PlacementProposed() if f"{event.namespace}/{event.name}" in self.outstanding:
                pass  # a second proposal made on a view that had not read the first (`_assume`)
            case PlacementProposed():
                self.outstanding[f"{event.namespace}/{event.name}"] = seq
                self._assume(event)
            case PlacementCommitted():
                if self._answers_outstanding(event.namespace, event.name, event.proposal_seq):
                    self._settled(event.namespace, event.name)
                else:
                    self._committed_elsewhere(event)
            case PlacementRejected():
                if self._answers_outstanding(event.namespace, event.name, event.proposal_seq):
                    key = f"{event.namespace}/{event.name}"
                    nodes = self._assumed_nodes(key)  # where the proposal put them, before undone
                    self._forget(event.namespace, event.name)
                    self._refuse(key, event.reason, nodes)
            case SliceReserved() | SliceReleased() | CardHealthChanged() | CardRegistered():
                # the ledger's usage is authoritative but does not know our outstanding
                # proposals yet: book them on top again — a card's registration too: the
                # allocator's genesis of a card can follow a proposal on it (the node's own
                # registration listed it first), and its empty usage freed the card in this
                # view only; the next session proposed another job onto it, refused
                card = event.card.uuid if isinstance(event, CardRegistered) else event.card
                for owner, sl in self.assumed.get(card, {}).items():
                    self._card_usage(card, ledger.ReserveSlice(owner=owner, slice=sl))
            case _:
                pass
        return moved

    # --- refusals ------------------------------------------------------------------------------

    def _assumed_nodes(self, key: str) -> list[str]:
        tasks = self.projection.tasks.get(key, {})
        return sorted({tasks[p].node for p in self.assumed_tasks.get(key, ()) if p in tasks and tasks[p].node})

    def _refuse(self, key: str, reason: str, nodes: list[str]) -> None:
        if reason.startswith((STALE, STALE_VIEW)) or not nodes or key not in self.projection.jobs:
            return  # the log moved under the proposal: nothing about its nodes
        before = self.refused.get(key)
        there = dict(before.nodes) if before else {}
        there.update((n, reason) for n in nodes)
        everywhere = reason if len(there) >= MAX_REFUSED_NODES else ""
        self.refused[key] = st.Refused(there, everywhere)

    def _hold(self, key: str, event: BindingFailed) -> None:
        """The job's pods were refused by the API server: no node for it until `retry_at` (or a
        change of the job), whatever the allocator said before."""
        if key not in self.projection.jobs:
            return  # (its own change has just lifted any earlier refusal: the last retry wins)
        self.refused[key] = st.Refused(until=event.retry_at, held=event.reason)

    def _changes(self, event: Event) -> tuple[set[str], str, bool] | None:
        """(nodes that changed, the job that changed, whether a node joined), read before the
        projection folds `event` (an ended job's pods still name their nodes then)."""
        match event:
            case NodeRegistered():
                return {event.node}, "", event.node not in self.projection.nodes
            case NodeLost() | NodeUsage():
                return {event.node}, "", False
            case SliceReleased() | CardHealthChanged() | CardRetired():
                return {event.node}, "", False
            case CardRegistered():
                return {event.card.node}, "", False
            case TaskFinished() | BindingFailed():
                return {event.node}, f"{event.namespace}/{event.name}", False
            case JobSubmitted():
                return set(), f"{event.spec.namespace}/{event.spec.name}", False
            case JobUpdated() | PlacementCommitted():
                return set(), f"{event.namespace}/{event.name}", False
            case JobDeleted() | JobPhaseChanged() if ended(event):
                key = f"{event.namespace}/{event.name}"
                tasks = self.projection.tasks.get(key, {})
                return {t.node for t in tasks.values() if t.node and t.status in st.HOLDING}, key, False
            case _:
                return None

    def _lift(self, nodes: set[str], job: str, joined: bool) -> None:
        """Drop the refusals the change may have made wrong: the job's own, and every job's on
        the changed nodes; a node that joined is a place no refusal has seen."""
        self.refused.pop(job, None)
        if not nodes and not joined:
            return
        for key, r in list(self.refused.items()):
            if r.until:
                continue  # held for its pods, not its nodes: lifted by a change of the job only
            left = {n: why for n, why in r.nodes.items() if n not in nodes}
            if not left:
                del self.refused[key]
            elif len(left) < len(r.nodes) or joined:
                self.refused[key] = st.Refused(left)

    def _lift_namespace(self, namespace: str) -> None:
        """A namespace's labels changed: drop the refusals of its jobs and of every job whose
        pods select namespaces by label (inter-pod affinity may read it otherwise now). A job
        held for its pods keeps its hold, as on a node's change."""
        for key, r in list(self.refused.items()):
            if r.until:
                continue
            job = self.projection.jobs.get(key)
            if key.startswith(f"{namespace}/") or (job is not None and _selects_namespaces(job.spec)):
                del self.refused[key]

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

    def _assume(self, event: PlacementProposed) -> None:
        """Book a proposal in the projection as if committed — tasks Bound, slices on the cards'
        usage — so later sessions neither re-decide the job nor hand its slices to another one
        while the allocator decides. The allocator's ledger events overwrite the usage with the
        authoritative one; a rejection undoes the booking (`_forget`).

        A second proposal of a job while one is outstanding is not booked: it was decided on a
        view that had not read the first back (an append whose acks were lost), and booking it
        over the first made the first's commit look refused — the card it took freed in the view
        only, and another pod proposed onto it, refused there for good (issue 29's stall). The
        allocator answers proposals in log order, so the first's answer comes first."""
        key = f"{event.namespace}/{event.name}"
        tasks = self.projection.tasks.get(key)
        if tasks is None:
            return
        assumed = self.assumed_tasks[key] = set()
        self.projection.touch(key)
        for p in event.placements:
            if p.task not in tasks or tasks[p.task].status != st.PENDING:
                continue
            tasks[p.task] = replace(tasks[p.task], status=st.BOUND, node=p.node, slices=p.slices)
            assumed.add(p.task)
            owner = owner_key(event.namespace, event.name, p.task)
            for a in ledger.per_card(p.slices):
                self.assumed.setdefault(a.card, {})[owner] = a.slice
                self.job_cards.setdefault(job_prefix(event.namespace, event.name), {})[a.card] = None
                self._card_usage(a.card, ledger.ReserveSlice(owner=owner, slice=a.slice))

    def _committed_elsewhere(self, event: PlacementCommitted) -> None:
        """A commit of a proposal other than the outstanding one (a second proposal, made
        before the first was read back, committed after the first was refused): its tasks are
        the ledger's now, so the outstanding proposal no longer assumes them — its refusal must
        not send them back to Pending, nor free the slices the commit booked."""
        key = f"{event.namespace}/{event.name}"
        assumed = self.assumed_tasks.get(key)
        if not assumed:
            return
        booked = {(a.card, owner_key(event.namespace, event.name, p.task))
                  for p in event.placements for a in p.slices}  # fmt: skip
        owners = {owner_key(event.namespace, event.name, p.task) for p in event.placements}
        assumed.difference_update(p.task for p in event.placements)
        for card in self.job_cards.get(job_prefix(event.namespace, event.name), {}):
            held = self.assumed.get(card, {})
            for owner in [o for o in held if o in owners]:
                del held[owner]
                if (card, owner) not in booked:  # assumed here, committed on another card
                    self._card_usage(card, ledger.ReleaseSlice(owner=owner, reason="committed elsewhere"))
            if not held:
                self.assumed.pop(card, None)

    def _settled(self, namespace: str, name: str) -> list[tuple[str, str]]:
        """Drop a job's assumed slices (committed: the ledger has them; rejected: undone)."""
        self.assumed_tasks.pop(f"{namespace}/{name}", None)
        prefix = job_prefix(namespace, name)
        dropped = []
        for card in self.job_cards.pop(prefix, {}):
            owners = self.assumed.get(card)
            if owners is None:
                continue
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
        self.projection.touch(key)
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


def _selects_namespaces(spec: JobSpec) -> bool:
    """Whether a pod of the job has an affinity term with a namespaceSelector."""
    for t in spec.tasks:
        pa = t.pod_affinity
        if pa is not None and any(term.namespace_selector is not None for terms in (
                pa.affinity, pa.anti_affinity, pa.preferred, pa.preferred_anti) for term in terms):  # fmt: skip
            return True
    return False


def cards_by_job(assumed: dict[str, dict[str, SliceSpec]]) -> dict[str, dict[str, None]]:
    """`SchedulerView.job_cards` rebuilt from the assumptions (a view restored from a
    snapshot): owner prefix `<ns>/<job>/` -> its cards, in the order they were assumed."""
    out: dict[str, dict[str, None]] = {}
    for card, owners in assumed.items():
        for owner in owners:
            out.setdefault(owner.rsplit("/", 1)[0] + "/", {})[card] = None
    return out
