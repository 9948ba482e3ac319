"""The allocator's shell: rebuild ledgers from the log, then commit proposals and releases.

Recovery reads only the last message of every node and card subject (O(nodes + cards)), because
every ledger event carries the card's usage after it. Writes use the card subjects' last
sequences as expectations; when another allocator got there first, the affected cards are
re-read and the proposal is decided again against the fresher ledgers.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

import msgspec

from contracts.base import Event
from contracts.devices import CardSpec
from contracts.envelope import TYPE
from contracts.events import (
    BindingFailed,
    JobDeleted,
    NodeRegistered,
    PlacementProposed,
    PlacementRejected,
    TaskFinished,
)
from contracts.registry import default_registry
from services.allocator.adopt import resolve_existing
from services.allocator.commit import (
    CardWrite,
    CommitPlan,
    Refusal,
    owner_of,
    plan_commit,
    plan_commits,
    plan_release,
)
from services.core.devices import VendorRegistry, build_vendors
from services.core.ledger import (
    CardState,
    RegisterCard,
    Rejection,
    RetireCard,
    decide,
    evolve,
    state_from_last_event,
)
from services.runtime.eventlog import BatchCommitted, Conflict, EventLog, StoredMessage
from services.runtime.faults import fault_point
from services.runtime.service import EventService, Outgoing, Received, TransientError

log = logging.getLogger(__name__)

MAX_RETRIES = 5


class Allocator:
    def __init__(
        self, event_log: EventLog, name: str = "allocator", vendors: VendorRegistry | None = None
    ) -> None:
        self.log = event_log
        self.vendors = vendors or build_vendors()
        self.subjects = event_log.subjects
        self.cards: dict[str, CardState] = {}
        self.card_seq: dict[str, int] = {}
        self.specs: dict[str, CardSpec] = {}
        self.holdings: dict[str, set[str]] = defaultdict(set)
        self.by_node: dict[str, set[str]] = defaultdict(set)  # node -> its cards' uuids
        self.commits = 0
        self.group_commits = 0  # of which committed several to one atomic batch
        self.rejections = 0
        self.service = EventService(
            name=name,
            log=event_log,
            filter_subjects=[self.subjects.all_nodes(), self.subjects.all_jobs()],
            handlers={
                NodeRegistered: self.on_node_registered,  # type: ignore[dict-item]
                PlacementProposed: self.on_proposal,  # type: ignore[dict-item]
                TaskFinished: self.on_task_finished,  # type: ignore[dict-item]
                BindingFailed: self.on_binding_failed,  # type: ignore[dict-item]
                JobDeleted: self.on_job_deleted,  # type: ignore[dict-item]
            },
            group_handlers={PlacementProposed: self.on_proposals},  # type: ignore[dict-item]
        )

    # --- projection ----------------------------------------------------------------------------

    def _set(self, card: str, state: CardState, seq: int) -> None:
        """Install a card's new state and keep the owner → cards index in step with it."""
        old = self.cards.get(card)
        before = set(old.usage.owners) if old else set()
        after = set(state.usage.owners)
        self.cards[card] = state
        self.card_seq[card] = seq
        if state.spec is not None:
            self.by_node[state.spec.node].add(card)
        for owner in before - after:
            self.holdings[owner].discard(card)
            if not self.holdings[owner]:
                del self.holdings[owner]
        for owner in after - before:
            self.holdings[owner].add(card)

    def _apply(self, card: str, event: Event, seq: int) -> None:
        state = self.cards.get(card) or CardState(uuid=card)
        self._set(card, evolve(state, event), seq)  # type: ignore[arg-type]

    def _load(self, card: str, msg: StoredMessage) -> None:
        event = default_registry().decode(msg.headers[TYPE], msg.data)
        state = state_from_last_event(card, self.specs.get(card), event)  # type: ignore[arg-type]
        if state.spec is not None:
            self.specs[card] = state.spec
        self._set(card, state, msg.seq)

    async def recover(self) -> None:
        """Rebuild from the last node and card messages only."""
        for msg in await self.log.last_per_subject(self.subjects.all_nodes()):
            if msg.headers.get(TYPE) == "NodeRegistered":
                node = default_registry().decode("NodeRegistered", msg.data)
                for card in node.cards:  # type: ignore[attr-defined]
                    self.specs[card.uuid] = card
        for msg in await self.log.last_per_subject(self.subjects.all_cards()):
            _, ids = self.subjects.parse(msg.subject)
            self._load(ids[1], msg)
        log.info("recovered %d cards, %d owners", len(self.cards), len(self.holdings))

    async def _refresh(self, cards: Iterable[str]) -> None:
        for card in cards:
            spec = self.specs.get(card) or (self.cards[card].spec if card in self.cards else None)
            if spec is None:
                continue
            msg = await self.log.last(self.subjects.card(spec.node, card))
            if msg is not None:
                self._load(card, msg)

    # --- writes --------------------------------------------------------------------------------

    async def _write(self, writes: list[CardWrite], tail: list[Outgoing], rx: Received) -> bool:
        """Append card writes + tail events as one atomic batch; False on a stale view."""
        outs: list[Outgoing] = []
        seen: set[str] = set()
        for w in writes:
            expected = None if w.card in seen else self.card_seq.get(w.card, 0)
            seen.add(w.card)
            outs.append(Outgoing(self.subjects.card(w.node, w.card), w.event, expected))
        outs.extend(tail)
        if not outs:
            return True
        result = await self.service.publish_batch(outs, rx)
        if isinstance(result, Conflict):
            log.info("stale ledger view (%s): re-reading", result)
            return False
        assert isinstance(result, BatchCommitted)
        for i, w in enumerate(writes):
            self._apply(w.card, w.event, result.first_seq + i)
        return True

    # --- handlers ------------------------------------------------------------------------------

    async def on_node_registered(self, event: NodeRegistered, rx: Received) -> None:
        for _attempt in range(MAX_RETRIES):
            writes: list[CardWrite] = []
            for spec in event.cards:
                self.specs[spec.uuid] = spec
                state = self.cards.get(spec.uuid) or CardState(uuid=spec.uuid)
                result = decide(state, RegisterCard(spec=spec))
                if isinstance(result, Rejection):
                    log.warning("card %s not registered: %s", spec.uuid, result.reason)
                    continue
                writes.extend(CardWrite(spec.uuid, spec.node, e) for e in result)
            listed = {c.uuid for c in event.cards}
            for uuid in self.node_cards(event.node):
                state = self.cards.get(uuid)
                if uuid in listed or state is None:
                    continue
                gone = decide(state, RetireCard())  # the node no longer reports it (HAMi health)
                if not isinstance(gone, Rejection):
                    writes.extend(CardWrite(uuid, event.node, e) for e in gone)
            if await self._write(writes, [], rx):
                return
            await self._refresh(s.uuid for s in event.cards)
        raise TransientError(f"node {event.node}: card ledgers kept moving")

    def node_cards(self, node: str) -> list[str]:
        return sorted(self.by_node.get(node, ()))

    async def on_proposals(self, items: list[tuple[PlacementProposed, Received]]) -> int:
        """Commit a run of proposals in ONE atomic batch (one round trip, one fsync) when each
        fits after the ones before it; returns how many were committed. Anything else — a
        refusal, a redelivery, a stale view — goes through `on_proposal` one at a time."""
        fresh = []
        for e, rx in items:
            if e.existing:
                break  # booked one at a time (its slices are resolved against the ledgers first)
            fresh.append((e, rx))
        items = fresh
        plans = plan_commits([(e, rx.message.seq) for e, rx in items], self.cards, self.holdings)
        if len(plans) < 2:
            return 0
        entries, writes, seen = [], [], set()
        for plan, (event, rx) in zip(plans, items, strict=False):
            outs = []
            for w in plan.writes:
                expected = None if w.card in seen else self.card_seq.get(w.card, 0)
                seen.add(w.card)
                outs.append(Outgoing(self.subjects.card(w.node, w.card), w.event, expected))
                writes.append((len(entries) + len(outs) - 1, w))
            outs.append(Outgoing(self.subjects.job(event.namespace, event.name), plan.committed))
            entries += [self.service.entry(o, rx, i) for i, o in enumerate(outs)]
        result = await self.log.append_batch(entries)
        if isinstance(result, Conflict):
            log.info("stale ledger view for a group of %d (%s): one by one", len(plans), result)
            await self._refresh(seen)
            return 0
        assert isinstance(result, BatchCommitted)
        for position, w in writes:
            self._apply(w.card, w.event, result.first_seq + position)
        self.commits += len(plans)
        self.group_commits += len(plans)
        fault_point("allocator.after-commit")
        return len(plans)

    async def on_proposal(self, event: PlacementProposed, rx: Received) -> None:
        original = event
        touched = {a.card for p in event.placements for a in p.slices}
        for _attempt in range(MAX_RETRIES):
            if original.existing:
                by_node = {p.node: self.node_cards(p.node) for p in original.placements}
                resolved = resolve_existing(original, self.cards, by_node, self.vendors)
                if isinstance(resolved, Refusal) and "no registered cards" in resolved.reason:
                    raise TransientError(resolved.reason)  # its node registers soon
                if isinstance(resolved, PlacementProposed):
                    event = resolved
                    touched = {a.card for p in event.placements for a in p.slices}
            plan = plan_commit(event, self.cards, self.holdings, rx.message.seq)
            if isinstance(plan, Refusal) and _attempt == 0:
                await self._refresh(touched)  # refuse only on a fresh view of the cards
                plan = plan_commit(event, self.cards, self.holdings, rx.message.seq)
            if isinstance(plan, Refusal):
                self.rejections += 1
                subject = self.subjects.job(event.namespace, event.name)
                rejected = PlacementRejected(
                    namespace=event.namespace,
                    name=event.name,
                    reason=plan.reason,
                    proposal_seq=rx.message.seq,
                )
                await self.service.publish(Outgoing(subject, rejected), rx)
                return
            assert isinstance(plan, CommitPlan)
            if plan.already_done:
                return  # redelivered after a crash: the atomic batch already landed
            committed = plan.committed
            if original.existing:
                committed = msgspec.structs.replace(committed, existing=True)
            tail = [Outgoing(self.subjects.job(event.namespace, event.name), committed)]
            if await self._write(list(plan.writes), tail, rx):
                self.commits += 1
                fault_point("allocator.after-commit")
                return
            await self._refresh(touched)
        raise TransientError(f"{event.namespace}/{event.name}: ledgers kept moving")

    async def _release(self, owners: set[str], reason: str, rx: Received) -> None:
        for _attempt in range(MAX_RETRIES):
            writes = plan_release(owners, self.cards, self.holdings, reason)
            held = {c for o in owners for c in self.holdings.get(o, ())}
            if await self._write(writes, [], rx):
                return
            await self._refresh(held)
        raise TransientError("release: ledgers kept moving")

    async def on_task_finished(self, event: TaskFinished, rx: Received) -> None:
        owner = owner_of(event.namespace, event.name, event.task)
        await self._release({owner}, event.reason or f"exit {event.exit_code}", rx)

    async def on_binding_failed(self, event: BindingFailed, rx: Received) -> None:
        owner = owner_of(event.namespace, event.name, event.task)
        await self._release({owner}, f"binding failed: {event.reason}", rx)

    async def on_job_deleted(self, event: JobDeleted, rx: Received) -> None:
        prefix = owner_of(event.namespace, event.name, "")
        owners = {o for o in self.holdings if o.startswith(prefix)}
        await self._release(owners, "job deleted", rx)

    # --- queries -------------------------------------------------------------------------------

    def card_records(self) -> list[dict[str, object]]:
        """The `cards[]` records of a simulate report, for `tessera get cards`."""
        out = []
        for uuid in sorted(
            self.cards, key=lambda u: (self.cards[u].spec.node if self.cards[u].spec else "", u)
        ):
            state = self.cards[uuid]
            spec = state.spec
            if spec is None:
                continue
            u = state.usage
            out.append(
                {
                    "node": spec.node,
                    "uuid": uuid,
                    "type": spec.type,
                    "index": spec.index,
                    "memory_total": spec.memory,
                    "memory_used": u.memory_used,
                    "cores_total": state.core_capacity,
                    "cores_used": u.cores_used,
                    "slices_used": u.slices_used,
                    "slices_total": spec.split_count,
                    "healthy": u.healthy,
                    "owners": list(u.owners),
                }
            )
        return out

    async def api_cards(self, _request: bytes) -> bytes:
        return msgspec.json.encode(self.card_records())
