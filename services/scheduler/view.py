"""What the scheduler folds from the log: the cluster projection plus the proposals it assumed
(Volcano's cache "assume") and the last reason it logged per job — as one value, so recovery
can start from a snapshot of it (`services.runtime.snapshot`) and fold only the log's tail.

Every field is a fold of the log (the scheduler's own proposals and reasons included, read back
from the log), so a snapshot plus the tail equals a replay from #1. A job that ends leaves
`unschedulable` with the projection: the scheduler's memory is bounded by what is live.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import msgspec

from contracts.base import Event
from contracts.devices import SliceSpec
from contracts.events import (
    JobDeleted,
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
from services.core.scheduling.decisions import unschedulable_key
from services.core.scheduling.projection_state import ProjectionState, projection_of, state_of
from services.runtime.eventlog import StoredMessage
from services.runtime.snapshot import shape_of


@dataclass
class SchedulerView:
    projection: st.ClusterProjection = field(default_factory=st.ClusterProjection)
    outstanding: dict[str, int] = field(default_factory=dict)  # job key -> seq of its unanswered proposal
    assumed_tasks: dict[str, set[str]] = field(default_factory=dict)  # job key -> pods its proposal assumed
    assumed: dict[str, dict[str, SliceSpec]] = field(default_factory=dict)  # card -> owner -> slice
    unschedulable: dict[str, str] = field(default_factory=dict)  # job key -> last reason logged

    def apply(self, seq: int, event: Event) -> None:
        self.projection.apply(seq, event)
        if isinstance(event, JobDeleted | JobPhaseChanged):
            key = f"{event.namespace}/{event.name}"
            if key not in self.projection.jobs:  # ended: no session decides about it again
                self.unschedulable.pop(key, None)
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


class StoredView(msgspec.Struct, frozen=True, kw_only=True):
    projection: ProjectionState
    outstanding: dict[str, int]
    assumed_tasks: dict[str, list[str]]  # sets, sorted: the same bytes in every process
    assumed: dict[str, dict[str, SliceSpec]]
    unschedulable: dict[str, str]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StoredView)


class ViewFold:
    name = "scheduler"
    types: frozenset[str] | None = None

    def __init__(self, pattern: str) -> None:
        self.patterns = (pattern,)

    def version(self) -> str:
        return shape_of(StoredView)

    def empty(self) -> SchedulerView:
        return SchedulerView()

    def fold(self, state: SchedulerView, msg: StoredMessage, event: Event) -> SchedulerView:
        state.apply(msg.seq, event)
        return state

    def encode(self, state: SchedulerView) -> bytes:
        return _ENCODER.encode(StoredView(
            projection=state_of(state.projection), outstanding=state.outstanding,
            assumed_tasks={k: sorted(v) for k, v in state.assumed_tasks.items()},
            assumed=state.assumed, unschedulable=state.unschedulable,
        ))  # fmt: skip

    def decode(self, data: bytes) -> SchedulerView:
        s = _DECODER.decode(data)
        return SchedulerView(projection_of(s.projection), s.outstanding,
                             {k: set(v) for k, v in s.assumed_tasks.items()}, s.assumed,
                             s.unschedulable)  # fmt: skip
