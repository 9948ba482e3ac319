"""The allocator's shell: rebuild ledgers from the log, then commit proposals and releases.

Recovery reads only the last message of every node and card subject (O(nodes + cards)), because
every ledger event carries the card's usage after it, plus the job subjects above the consumer's
ack floor for the answers (`answers.py`): a proposal the log already answered is never committed
again, however late it is redelivered. Writes use the card subjects' last sequences as
expectations, and the answer the job subject's: when another allocator got there first, the
affected cards (or the job's new events) are re-read and the proposal is judged again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import ChainMap, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

import msgspec

from contracts.base import Event
from contracts.devices import CardSpec
from contracts.envelope import msg_id
from contracts.events import (
    STALE_VIEW,
    BindingFailed,
    JobDeleted,
    JobPhaseChanged,
    JobUpdated,
    NodeRegistered,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    TaskFinished,
)
from contracts.owners import job_prefix, owner_key, parse_owner
from services.allocator.adopt import NOT_REGISTERED_YET, resolve_existing, running_proposal
from services.allocator.answers import ANSWERED, OPEN, Answers
from services.allocator.answers import FOLDED as ANSWER_TYPES
from services.allocator.commit import (
    CardWrite,
    CommitPlan,
    PlacedOn,
    Refusal,
    plan_commit,
    plan_commits,
    plan_release,
)
from services.core.devices import VendorRegistry, build_vendors
from services.core.holdback import Unfitted
from services.core.ledger import (
    CardState,
    RegisterCard,
    Rejection,
    RetireCard,
    decide,
    evolve,
    state_from_last_event,
)
from services.core.observe import hami
from services.runtime.eventlog import (
    MAX_BATCH,
    BatchCommitted,
    Conflict,
    Duplicate,
    Entry,
    EventLog,
    StoredMessage,
)
from services.runtime.exposition import GaugeText
from services.runtime.faults import fault_point
from services.runtime.service import (
    EventService,
    Outgoing,
    Received,
    TransientError,
    decode_stored,
)
from services.runtime.snapshot import Retention
from services.runtime.tasks import cancel_all
from services.runtime.telemetry import header_trace_id
from services.runtime.waits import within

log = logging.getLogger(__name__)

MAX_RETRIES = 5
NODE_REGISTERED = frozenset({NodeRegistered.type_name()})


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
        #: job prefix (`job_prefix`) → its owners in `holdings`: a job's deletion finds them
        #: without walking every owner on every card (~1 ms at 10,000 running pods)
        self.job_holders: dict[str, set[str]] = {}
        self.by_node: dict[str, set[str]] = defaultdict(set)  # node -> its cards' uuids
        self.answers = Answers()
        self.node_seq: dict[str, int] = {}  # node -> sequence of its newest NodeRegistered
        self.node_annotations: dict[str, dict[str, str]] = {}  # its hami-core mode, for adoption
        self.commits = 0
        self.group_commits = 0  # of which committed several to one atomic batch
        self.group_registrations = 0  # nodes registered several to one atomic batch
        self.rejections = 0
        self.stale = 0  # proposals recognised from the log as answered or stale
        self.view_seq = 0  # every event up to here is folded into the view (`follow_view`)
        self._moved = asyncio.Event()
        self.following = False  # in-process drivers without `background` judge on own writes
        #: where a running pod that does not fit its node's cards is told of beyond the log
        #: line (on a cluster: a Warning Event on the pod, by the Kubernetes edge)
        self.on_unfitted: Callable[[Unfitted], Awaitable[None]] | None = None
        self.service = EventService(
            name=name,
            log=event_log,
            filter_subjects=[self.subjects.all_nodes(), self.subjects.all_jobs()],
            handlers={
                NodeRegistered: self.on_node_registered,  # type: ignore[dict-item]
                PlacementProposed: self.on_proposal,  # type: ignore[dict-item]
                PlacementCommitted: self.on_answer,  # type: ignore[dict-item]
                PlacementRejected: self.on_answer,  # type: ignore[dict-item]
                JobPhaseChanged: self.on_answer,  # type: ignore[dict-item]
                JobUpdated: self.on_answer,  # type: ignore[dict-item]
                TaskFinished: self.on_task_finished,  # type: ignore[dict-item]
                BindingFailed: self.on_binding_failed,  # type: ignore[dict-item]
                JobDeleted: self.on_job_deleted,  # type: ignore[dict-item]
            },
            group_handlers={PlacementProposed: self.on_proposals,  # type: ignore[dict-item]
                            NodeRegistered: self.on_nodes_registered},  # type: ignore[dict-item]
        )
        assert self.service.metrics is not None
        self._hami = GaugeText(hami.SPECS, const=(hami.ZONE,))
        self.service.metrics.export_text(self._card_text)

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
                job = self.job_holders.get(_job_of(owner))
                if job is not None:
                    job.discard(owner)
                    if not job:
                        del self.job_holders[_job_of(owner)]
        for owner in after - before:
            self.holdings[owner].add(card)
            self.job_holders.setdefault(_job_of(owner), set()).add(owner)

    def _apply(self, card: str, event: Event, seq: int) -> None:
        if seq <= self.card_seq.get(card, 0):
            return  # folded already (our write seen by the follower first, or the reverse)
        state = self.cards.get(card) or CardState(uuid=card)
        self._set(card, evolve(state, event), seq)  # type: ignore[arg-type]

    async def _load(self, card: str, msg: StoredMessage) -> None:
        """A card from its last ledger event; if that one is poison (parked), from the fold of
        the card's history without it — one bad message must not hide a card's bookings."""
        event = await decode_stored(msg, self.service.park_once, registry=self.service.registry)
        if event is not None:
            state = state_from_last_event(card, self.specs.get(card), event)  # type: ignore[arg-type]
        else:
            state = CardState(uuid=card, spec=self.specs.get(card))
            async for old in self.log.replay(1, msg.subject):
                if old.seq >= msg.seq:
                    break
                e = await decode_stored(old, self.service.park_once, registry=self.service.registry)
                if e is not None:
                    state = evolve(state, e)  # type: ignore[arg-type]
        if state.spec is not None:
            self.specs[card] = state.spec
        if msg.seq <= self.card_seq.get(card, 0):
            # the view folded a newer event of the card while this one was read (`_refresh`
            # after a conflict reads card after card): installing it would undo that booking
            # in the view for good — the follower has passed it (the race test saw a card
            # shown free that a replica had reserved)
            return
        self._set(card, state, msg.seq)

    def retain(self, retention: Retention) -> None:
        """`--keep-finished` bounds the answers as it bounds every service's finished jobs (the
        allocator keeps no snapshot: its recovery scans only above its ack floor)."""
        self.answers = Answers(retention.keep_finished)

    async def recover(self) -> None:
        """Rebuild the ledgers from the last node and card messages only, and what the log has
        answered from the job subjects above the consumer's ack floor: everything it can
        deliver again lies there, and so does every answer or ending that makes it stale. (A
        new durable starts at 0 and scans the whole job history, once.)"""
        self.view_seq = await self.log.last_sequence()  # what `follow_view` starts after
        floor = await self.log.ack_floor(self.service.durable)
        self.answers.since = floor + 1
        await self._scan(self.subjects.all_jobs(), floor + 1)
        for msg in await self.log.last_per_subject(self.subjects.all_nodes()):
            node = await decode_stored(msg, self.service.park_once, NODE_REGISTERED)
            if isinstance(node, NodeRegistered):
                self.node_seq[node.node] = msg.seq
                self.node_annotations[node.node] = node.annotations
                for card in node.cards:
                    self.specs[card.uuid] = card
        for msg in await self.log.last_per_subject(self.subjects.all_cards()):
            _, ids = self.subjects.parse(msg.subject)
            await self._load(ids[1], msg)
        log.info("recovered %d cards, %d owners, answers of %d jobs above #%d", len(self.cards),
                 len(self.holdings), len(self.answers.jobs), floor)  # fmt: skip

    async def _scan(self, subject: str, start: int) -> None:
        """Fold the answers and endings on job subjects from `start` (only those types are
        decoded; every message moves the subject's known last sequence)."""
        async for msg in self.log.replay(start, subject):
            _, ids = self.subjects.parse(msg.subject)
            self.answers.seen(ids[0], ids[1], msg.seq)
            event = await decode_stored(msg, self.service.park_once, ANSWER_TYPES)
            if event is not None:
                self.answers.apply(msg.seq, event)

    # --- the view follows the log ---------------------------------------------------------------

    async def background(self, stopping: asyncio.Event) -> None:
        """Fold every card, node and job event into the view, whoever wrote it.

        Replicas share the durable's deliveries, so a replica learns of the other's commits and
        releases only here: without it a replica's cards differ from the log, and a
        `TaskFinished` reaching the replica that did not commit the pod released nothing — the
        slices stayed booked forever (issue 12 item 6)."""
        self.following = True
        follower = asyncio.create_task(self._follow())
        try:
            await stopping.wait()
        finally:
            await cancel_all([follower])  # (a reader that retries: cancelled until it ends)

    async def _follow(self) -> None:
        while True:  # a follower that stopped would stall every handler behind the barrier
            try:
                async for msg in self.log.follow(self.view_seq + 1, self.subjects.events):
                    await self._observe(msg)
                    self.view_seq = msg.seq
                    self._moved.set()
                    self._moved = asyncio.Event()
            except Exception:
                log.exception("following the log from #%d failed; again", self.view_seq + 1)
                await asyncio.sleep(0.5)  # back off, then read on from where the view is

    async def _observe(self, msg: StoredMessage) -> None:
        kind, ids = self.subjects.parse(msg.subject)
        if kind == "card":
            if msg.seq <= self.card_seq.get(ids[1], 0):
                return  # our own write, or read since (`_refresh`)
            event = await decode_stored(msg, self.service.park_once, registry=self.service.registry)
            if event is not None:
                self._apply(ids[1], event, msg.seq)
        elif kind == "job":
            self.answers.seen(ids[0], ids[1], msg.seq)
            event = await decode_stored(msg, self.service.park_once, ANSWER_TYPES)
            if event is not None:
                self.answers.apply(msg.seq, event)
        elif kind == "node":
            node = await decode_stored(msg, self.service.park_once, NODE_REGISTERED)
            if isinstance(node, NodeRegistered):
                self.node_seq[node.node] = max(self.node_seq.get(node.node, 0), msg.seq)
                if msg.seq >= self.node_seq[node.node]:
                    self.node_annotations[node.node] = node.annotations
                for card in node.cards:
                    self.specs[card.uuid] = card

    async def _seen_up_to(self, seq: int, timeout: float = 10.0) -> None:
        """Wait until the view holds every event before `seq`: a delivery is judged on the log
        as it was when the event was appended, whatever the other replicas did meanwhile."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.following and self.view_seq < seq - 1:
            moved = self._moved
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TransientError(f"view at #{self.view_seq}, behind #{seq}")
            with contextlib.suppress(TimeoutError):
                await within(moved.wait(), left)

    async def _catch_up(self, namespace: str, name: str, after: int) -> None:
        """Read what landed on one job subject after `after` (a conflict said something did)."""
        await self._scan(self.subjects.job(namespace, name), after + 1)

    async def _refresh(self, cards: Iterable[str]) -> None:
        for card in cards:
            spec = self.specs.get(card) or (self.cards[card].spec if card in self.cards else None)
            if spec is None:
                continue
            msg = await self.log.last(self.subjects.card(spec.node, card))
            if msg is not None:
                await self._load(card, msg)

    # --- writes --------------------------------------------------------------------------------

    async def _write(
        self, writes: list[CardWrite], tail: list[Outgoing], rx: Received, part: str = ""
    ) -> BatchCommitted | Conflict | Duplicate:
        """Append card writes + tail events as one atomic batch, folding the card writes.
        `part` names one of several batches a message's writes are cut into (their ids)."""
        outs: list[Outgoing] = []
        seen: set[str] = set()
        for i, w in enumerate(writes):
            expected = None if w.card in seen else self.card_seq.get(w.card, 0)
            seen.add(w.card)
            mid = msg_id(rx.cause, i, f"{self.service.name}:{part}") if part else ""
            outs.append(Outgoing(self.subjects.card(w.node, w.card), w.event, expected, mid))
        outs.extend(tail)
        if not outs:
            return BatchCommitted(0, 0, 0)
        result = await self.service.publish_batch(outs, rx)
        if isinstance(result, Conflict | Duplicate):
            log.info("batch not written (%s): re-reading", result)
            return result
        for i, w in enumerate(writes):
            self._apply(w.card, w.event, result.first_seq + i)
        return result

    async def _card_batch(self, writes: list[CardWrite], rx: Received, part: str = "") -> bool:
        """Ledger-only writes (registrations, releases). True when done — written, or found
        written before (a duplicate: this very batch landed; re-read the cards); False on a
        stale view: the caller plans again on the refreshed cards."""
        result = await self._write(writes, [], rx, part)
        if isinstance(result, BatchCommitted):
            return True
        await self._refresh({w.card for w in writes})
        return isinstance(result, Duplicate)

    # --- handlers ------------------------------------------------------------------------------

    async def on_node_registered(self, event: NodeRegistered, rx: Received) -> None:
        await self._seen_up_to(rx.message.seq)
        if rx.message.seq < self.node_seq.get(event.node, 0):
            return  # an older registration replayed (a new durable): the newer one stands
        self.node_seq[event.node] = rx.message.seq
        self.node_annotations[event.node] = event.annotations
        for _attempt in range(MAX_RETRIES):
            writes = self._registration_writes(event)
            unfitted: list[Unfitted] = []
            writes.extend(self._book_running(event, writes, unfitted))
            if await self._card_batch(writes, rx):
                await self._say_unfitted(unfitted)  # once, for the booking that landed
                return
        raise TransientError(f"node {event.node}: card ledgers kept moving")

    def _registration_writes(self, event: NodeRegistered) -> list[CardWrite]:
        """The ledger events a node's registration asks for: each card registered (or its spec
        changed), each card it no longer reports retired."""
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
        return writes

    async def on_nodes_registered(self, items: list[tuple[NodeRegistered, Received]]) -> int:
        """A run of registrations (a cluster's start: one per node) in ONE atomic batch, as
        `on_proposals` commits proposals: one round trip where 5,000 nodes took 5,000. An older
        registration replayed is passed over, as `on_node_registered` does; a node with running
        pods to book, one met again in the run, or a batch over the server's limit ends the
        run, and the rest go through `on_node_registered`. Returns how many it settled."""
        await self._seen_up_to(items[-1][1].message.seq)
        entries: list[Entry] = []
        writes: list[tuple[int, CardWrite]] = []
        taken: dict[str, Received] = {}  # node → the registration written for it
        cards: set[str] = set()
        count = 0
        for event, rx in items:
            if rx.message.seq < self.node_seq.get(event.node, 0):
                count += 1  # an older registration replayed: the newer one stands (nothing)
                continue
            if event.running or event.node in taken:
                break
            planned = self._registration_writes(event)
            if len(entries) + len(planned) > MAX_BATCH or any(w.card in cards for w in planned):
                break
            for i, w in enumerate(planned):
                out = Outgoing(self.subjects.card(w.node, w.card), w.event, self.card_seq.get(w.card, 0))
                writes.append((len(entries), w))
                entries.append(self.service.entry(out, rx, i))
                cards.add(w.card)
            taken[event.node] = rx
            count += 1
        if len(taken) < 2:
            return 0
        for event, rx in items[:count]:
            if rx is taken.get(event.node):
                self.node_seq[event.node] = rx.message.seq
                self.node_annotations[event.node] = event.annotations
        if entries and await self._group_batch(entries, writes, cards, f"registrations of {len(taken)} nodes") is None:
            return 0
        self.group_registrations += len(taken)
        return count

    async def _group_batch(self, entries: list[Entry], writes: list[tuple[int, CardWrite]], cards: set[str],
                           what: str) -> BatchCommitted | None:  # fmt: skip
        """A group handler's one atomic batch, its card writes (at their positions) folded; None
        when it was not written (the cards re-read: the group goes one by one)."""
        result = await self.log.append_batch(entries)
        if isinstance(result, Conflict | Duplicate):
            log.info("%s not written (%s): one by one", what, result)
            await self._refresh(cards)
            return None
        for position, w in writes:
            self._apply(w.card, w.event, result.first_seq + position)
        return result

    async def _say_unfitted(self, unfitted: list[Unfitted]) -> None:
        for u in unfitted:
            log.warning("%s", u.text)
            if self.on_unfitted is not None:
                try:
                    await self.on_unfitted(u)
                except Exception as exc:  # a Warning not shown never stops the booking
                    log.warning("warning about %s/%s not shown: %s", u.namespace, u.pod, exc)

    def _book_running(self, event: NodeRegistered, writes: list[CardWrite],
                      unfitted: list[Unfitted]) -> list[CardWrite]:  # fmt: skip
        """Slices of the pods already running on a newly registered node, in the same batch as
        its cards: no proposal (they all come after this registration) can take them first."""
        staged: dict[str, CardState] = {}
        for w in writes:
            staged[w.card] = evolve(staged.get(w.card) or self.cards.get(w.card) or CardState(uuid=w.card), w.event)  # type: ignore[arg-type]
        view = ChainMap(staged, self.cards)
        here = {event.node: sorted({c.uuid for c in event.cards})}
        out: list[CardWrite] = []
        for task in event.running:
            if self.holdings.get(owner_key(task.namespace, task.job, task.task)):
                continue  # booked already
            resolved = resolve_existing(running_proposal(event.node, task), view, here, self.vendors,
                                        annotations={event.node: event.annotations}, warnings=unfitted)  # fmt: skip
            plan = resolved if isinstance(resolved, Refusal) else plan_commit(resolved, view, self.holdings)
            if isinstance(plan, Refusal):
                log.warning("running pod %s/%s on %s not booked: %s", task.namespace, task.task,
                            event.node, plan.reason)  # fmt: skip
                continue
            for w in plan.writes:
                staged[w.card] = evolve(view[w.card], w.event)  # type: ignore[arg-type]
            out.extend(plan.writes)
        return out

    def node_cards(self, node: str) -> list[str]:
        return sorted(self.by_node.get(node, ()))

    async def on_answer(self, event: Event, rx: Received) -> None:
        """Answers (ours, a replica's) and job endings: what makes later redeliveries stale."""
        self.answers.apply(rx.message.seq, event)

    def _open(
        self, items: list[tuple[PlacementProposed, Received]]
    ) -> list[tuple[PlacementProposed, Received]]:
        """The leading run of proposals the log has not answered, one per job (a second one of
        the same job needs the first one's answer folded before it is judged)."""
        run, jobs = [], set()
        for event, rx in items:
            key = (event.namespace, event.name)
            self.answers.seen(*key, rx.message.seq)
            if key in jobs or self.answers.verdict(*key, rx.message.seq) != OPEN:
                break
            if self._history_needed(event):
                break  # read that job's subject first (`on_proposal`)
            jobs.add(key)
            run.append((event, rx))
        return run

    def _history_needed(self, event: PlacementProposed) -> int:
        if all(p.slices for p in event.placements):
            return 0  # the ledgers say what carded tasks hold
        return self.answers.history_needed(event.namespace, event.name, event.based_on)

    def _placed_on(self, event: PlacementProposed) -> PlacedOn:
        ns, name = event.namespace, event.name
        return lambda task: self.answers.placed_on(ns, name, task)

    def _committed_out(self, plan: CommitPlan, event: PlacementProposed, rx: Received) -> Outgoing:
        """The `PlacementCommitted`, expecting the job subject unchanged since we last saw it:
        an answer, deletion or ending that landed meanwhile fails the whole batch."""
        expected = self.answers.expected_seq(event.namespace, event.name, rx.message.seq)
        return Outgoing(self.subjects.job(event.namespace, event.name), plan.committed, expected)

    async def on_proposals(self, items: list[tuple[PlacementProposed, Received]]) -> int:
        """Commit a run of proposals in ONE atomic batch (one round trip, one fsync) when each
        is open and fits after the ones before it; returns how many were committed. Anything
        else — answered or stale, a refusal, a stale view — goes through `on_proposal`."""
        await self._seen_up_to(items[-1][1].message.seq)
        items = self._open(items)
        fresh = []
        for e, rx in items:
            if e.existing:
                break  # booked one at a time (its slices are resolved against the ledgers first)
            fresh.append((e, rx))
        items = fresh
        plans = plan_commits([(e, rx.message.seq) for e, rx in items], self.cards, self.holdings,
                             placed_on=self._placed_on)  # fmt: skip
        if len(plans) < 2:
            return 0
        entries, writes, seen, commits = [], [], set(), []
        for plan, (event, rx) in zip(plans, items, strict=False):
            outs = []
            for w in plan.writes:
                expected = None if w.card in seen else self.card_seq.get(w.card, 0)
                seen.add(w.card)
                outs.append(Outgoing(self.subjects.card(w.node, w.card), w.event, expected))
                writes.append((len(entries) + len(outs) - 1, w))
            outs.append(self._committed_out(plan, event, rx))
            commits.append((len(entries) + len(outs) - 1, plan.committed))
            entries += [self.service.entry(o, rx, i) for i, o in enumerate(outs)]
        result = await self._group_batch(entries, writes, seen, f"group of {len(plans)}")
        if result is None:
            return 0
        for (position, committed), (_, rx) in zip(commits, items, strict=False):
            self.answers.apply(result.first_seq + position, committed)
            say_committed(committed, rx)
        self.commits += len(plans)
        self.group_commits += len(plans)
        fault_point("allocator.after-commit")
        return len(plans)

    async def _reject(self, event: PlacementProposed, rx: Received, reason: str) -> bool:
        """Answer with `PlacementRejected` (the scheduler re-plans); False if the job subject
        moved meanwhile (re-read, re-judge)."""
        ns, name, seq = event.namespace, event.name, rx.message.seq
        rejected = PlacementRejected(namespace=ns, name=name, reason=reason, proposal_seq=seq)
        out = Outgoing(self.subjects.job(ns, name), rejected,
                       self.answers.expected_seq(ns, name, seq),
                       msg_id(rx.cause, 0, f"{self.service.name}-reject"))  # fmt: skip
        result = await self.service.publish(out, rx)
        if isinstance(result, Conflict):
            await self._catch_up(ns, name, self.answers.expected_seq(ns, name, seq))
            return False
        self.answers.apply(result.seq, rejected)
        self.rejections += 1
        log.info("refused %s/%s's proposal #%d: %s", ns, name, seq, reason,
                 extra={"trace_id": header_trace_id(rx.message.headers)})  # fmt: skip
        return True

    def _moved_since(self, event: PlacementProposed, card: str) -> str:
        """How the refusing card's ledger moved after the view the proposal was decided on, in
        words ("" if it did not). Refused there, the proposal lost a race — another job's
        commit took the card first — and the scheduler, told so, remembers no refusal:
        remembered, it kept the job off the nodes that had the only free cards, for good, on a
        cluster where nothing else changed (a stream of 500 Volcano Jobs left the last one
        waiting). The scheduler's next view has the card as it is now."""
        now = self.card_seq.get(card, 0)
        for p in event.placements:
            for a in p.slices:
                if a.card == card and 0 < a.expected_seq < now:
                    return f"card {card} changed after the proposal's view (#{a.expected_seq} → #{now})"
        return ""

    async def on_proposal(self, event: PlacementProposed, rx: Received) -> None:
        """Commit, reject, or recognise as already answered — judged from the log, never from
        the duplicate window (issue 12 item 1)."""
        ns, name, seq = event.namespace, event.name, rx.message.seq
        await self._seen_up_to(seq)
        self.answers.seen(ns, name, seq)
        if start := self._history_needed(event):  # a cardless task's commit may lie below the floor
            await self._scan(self.subjects.job(ns, name), start)
            self.answers.known(ns, name, start)
        original = event
        touched = {a.card for p in event.placements for a in p.slices}
        refreshed = False
        for _attempt in range(MAX_RETRIES):
            verdict = self.answers.verdict(ns, name, seq)
            if verdict == ANSWERED:
                self.stale += 1
                return  # redelivered: committed or rejected before (by us or a replica)
            if verdict != OPEN:
                self.stale += 1
                if await self._reject(event, rx, verdict):
                    return
                continue
            if original.existing:  # already runs: its slices from annotations, or fitted
                by_node = {p.node: self.node_cards(p.node) for p in original.placements}
                unfitted: list[Unfitted] = []
                resolved = resolve_existing(original, self.cards, by_node, self.vendors, self.holdings,
                                            annotations=self.node_annotations, warnings=unfitted)  # fmt: skip
                await self._say_unfitted(unfitted)
                if isinstance(resolved, Refusal) and NOT_REGISTERED_YET in resolved.reason:
                    raise TransientError(resolved.reason)  # its node registers soon
                if isinstance(resolved, PlacementProposed):
                    event = resolved
                    touched = {a.card for p in event.placements for a in p.slices}
            where = self._placed_on(event)
            plan = plan_commit(event, self.cards, self.holdings, seq, where)
            if isinstance(plan, Refusal) and not refreshed:
                await self._refresh(touched)  # refuse only on a fresh view of the cards
                refreshed = True
                plan = plan_commit(event, self.cards, self.holdings, seq, where)
            if isinstance(plan, CommitPlan) and original.existing:
                plan = replace(plan, committed=msgspec.structs.replace(plan.committed, existing=True),
                               already_done=False)  # booked with its node: still answer it  # fmt: skip
            if isinstance(plan, Refusal) or plan.already_done:
                # already_done: every task holds what is proposed by an earlier commit (its
                # slices, or its node), so a second commit would start the pods again
                reason = plan.reason if isinstance(plan, Refusal) else "already placed as proposed"
                if isinstance(plan, Refusal) and (moved := self._moved_since(event, plan.card)):
                    reason = f"{STALE_VIEW}: {moved}; {reason}"
                if await self._reject(event, rx, reason):
                    return
                continue
            if len(plan.writes) + 1 > MAX_BATCH:
                # one atomic batch cannot hold it: answered, where the server's refusal of the
                # batch was a handler failure — parked, the job never answered, waiting for good
                reason = (f"the gang needs {len(plan.writes)} card ledger writes and its commit in one atomic "
                          f"batch; the log takes at most {MAX_BATCH} messages in one "
                          "(nats-server jetstream.limits.batch.max_msgs)")  # fmt: skip
                if await self._reject(event, rx, reason):
                    return
                continue
            result = await self._write(
                list(plan.writes), [self._committed_out(plan, event, rx)], rx
            )
            if isinstance(result, BatchCommitted):
                self.answers.apply(result.last_seq, plan.committed)
                self.commits += 1
                say_committed(plan.committed, rx)
                fault_point("allocator.after-commit")
                return
            job_subject = self.subjects.job(ns, name)
            if isinstance(result, Duplicate) or result.subject == job_subject:
                await self._catch_up(ns, name, self.answers.expected_seq(ns, name, seq))
            await self._refresh(touched)
        raise TransientError(f"{ns}/{name}: ledgers kept moving")

    async def _release(self, owners: set[str], reason: str, rx: Received) -> None:
        for _attempt in range(MAX_RETRIES):
            writes = plan_release(owners, self.cards, self.holdings, reason)
            if len(writes) <= MAX_BATCH:
                if await self._card_batch(writes, rx):
                    return
                continue
            # more than one atomic batch holds (a deleted job placed by several commits): owner
            # by owner in batches — releases need no atomicity across owners, and one cut off
            # by a crash is planned again from the ledgers at the redelivery
            done = True
            for first, chunk in _owner_chunks(writes, MAX_BATCH):
                done = await self._card_batch(chunk, rx, f"release:{first}") and done
            if done:
                return
        raise TransientError("release: ledgers kept moving")

    async def on_task_finished(self, event: TaskFinished, rx: Received) -> None:
        ns, name, seq = event.namespace, event.name, rx.message.seq
        await self._seen_up_to(seq)  # the commit of the run it ends, by whichever replica
        self.answers.seen(ns, name, seq)
        applies = self.answers.release_applies(ns, name, event.task, seq)
        self.answers.apply(seq, event)  # the task no longer holds its node (cardless ones too)
        if not applies:
            return  # an older run's end, redelivered after the task was placed again
        owner = owner_key(ns, name, event.task)
        await self._release({owner}, event.reason or f"exit {event.exit_code}", rx)

    async def on_binding_failed(self, event: BindingFailed, rx: Received) -> None:
        ns, name, seq = event.namespace, event.name, rx.message.seq
        await self._seen_up_to(seq)
        # delivered again after the task was placed anew (a reset from an ack floor below it,
        # past the duplicate window): it is about the earlier run, not the slices held now
        applies = self.answers.release_applies(ns, name, event.task, seq)
        self.answers.apply(seq, event)
        if not applies:
            return
        owner = owner_key(ns, name, event.task)
        await self._release({owner}, f"binding failed: {event.reason}", rx)

    async def on_job_deleted(self, event: JobDeleted, rx: Received) -> None:
        ns, name, seq = event.namespace, event.name, rx.message.seq
        await self._seen_up_to(seq)
        self.answers.apply(seq, event)
        prefix = job_prefix(ns, name)
        owners = {o for o in self.job_holders.get(prefix, ())
                  if self.answers.release_applies(ns, name, parse_owner(o)[2], seq)}  # fmt: skip
        await self._release(owners, "job deleted", rx)

    # --- queries -------------------------------------------------------------------------------

    def _card_text(self) -> str:
        """HAMi's card gauges at scrape time (the probe server's thread): `dict()` copies the
        mapping in one step under the GIL and every `CardState` is frozen, so a scrape sees
        each card as one ledger event left it, and formats only the cards that changed."""
        cards = dict(self.cards)
        order = sorted(cards, key=lambda u: (cards[u].spec.node if cards[u].spec else "", u))
        return self._hami.render_each(((u, cards[u]) for u in order),
                                      lambda state: hami.card_series([state]))  # type: ignore[list-item]  # fmt: skip

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
        """The cards as the log has them when asked: the view is caught up to the stream's
        last message first (another replica's commit reaches this one's view a moment after
        it lands), for at most a few seconds — then it answers with what it has."""
        if self.following:
            with contextlib.suppress(Exception):
                await self._seen_up_to(await self.log.last_sequence() + 1, timeout=3.0)
        return msgspec.json.encode(self.card_records())


def say_committed(committed: PlacementCommitted, rx: Received) -> None:
    """One INFO line per commit (a job's pods bound to their cards): the job, where, and for a
    single pod its cards; in the trace of the proposal it answers."""
    placements = committed.placements
    nodes = ",".join(dict.fromkeys(p.node for p in placements))
    if len(placements) == 1:
        where = f"on {nodes} cards {','.join(a.card for a in placements[0].slices) or '-'}"
    else:
        where = f"{len(placements)} pods on {nodes} ({sum(len(p.slices) for p in placements)} card slices)"
    log.info("committed %s/%s%s %s", committed.namespace, committed.name,
             " (running already)" if committed.existing else "", where,
             extra={"trace_id": header_trace_id(rx.message.headers)})  # fmt: skip


def _job_of(owner: str) -> str:
    """The `job_prefix` of an owner key (its task is the part after the last `/`)."""
    return owner[: owner.rfind("/") + 1]


def _owner_chunks(writes: list[CardWrite], size: int) -> list[tuple[str, list[CardWrite]]]:
    """Release writes cut into batches of at most `size`, an owner's writes never split, each
    named by its first owner (its messages' ids: a batch planned again after a crash, starting
    from an owner whose release never landed, is not taken for one that did)."""
    chunks: list[tuple[str, list[CardWrite]]] = []
    by_owner: dict[str, list[CardWrite]] = {}
    for w in writes:
        by_owner.setdefault(str(getattr(w.event, "owner", "")), []).append(w)
    for owner in sorted(by_owner):
        mine = by_owner[owner]
        if not chunks or len(chunks[-1][1]) + len(mine) > size:
            chunks.append((owner, []))
        chunks[-1][1].extend(mine)
    return chunks
