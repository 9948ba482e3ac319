"""The per-card slice ledger as pure ``decide``/``evolve`` (STYLE §1, DESIGN §4 and §9).

One card's history is its ledger; folding it gives the card's usage. ``decide`` turns a command
into events or a :class:`Rejection` and is the only place the invariants are enforced:

* Σ memory ≤ allocatable (``CardSpec.memory``);
* Σ cores ≤ total (:func:`core_capacity`): ``CardSpec.cores`` — 100 × deviceCoreScaling for
  NVIDIA, aiCore for an Ascend card in template mode — and 100 on an Ascend hami-core card;
* slices ≤ split count (HAMi ``Count``: ``Used < Count``), a slice counting the containers it
  serves (``SliceSpec.slots``);
* an exclusive slice (``exclusive`` or kind ``whole``) is alone on the card;
* an unhealthy or retired card takes no new slices (existing ones stay until released), nor does
  a card in MIG mode whose model has no geometry (``devices/mig.py``);
* on a card in MIG mode a slice holds MIG instances of the card's geometries that overlap no
  instance there and fit one geometry together with all of them, booking exactly their
  profiles' memory and cores (``mig.ledger_refusal``);
* one slice per owner per card: two containers of a pod on one card (HAMi fits each on its own)
  are booked as one slice of their sum (:func:`per_card`). Re-reserving the
  same slice for the same owner is a no-op, so redelivered commands are idempotent; releasing an
  owner that holds nothing produces no event (Unreserve is safe to call twice, STYLE §7).

Every event carries the card's usage *after* it (slices sorted by owner), so
:func:`state_from_last_event` rebuilds a card from its last event alone, and :func:`fold`
rebuilds it from the full history by recomputing each step; both encode byte-identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from contracts.devices import CardSpec, CardUsage, OwnedSlice, SliceKind, SliceSpec
from contracts.events import (
    CardHealthChanged,
    CardRegistered,
    CardRetired,
    SliceAssignment,
    SliceReleased,
    SliceReserved,
)
from services.core.devices.mig import ledger_refusal, usage_instances

LedgerEvent = CardRegistered | SliceReserved | SliceReleased | CardHealthChanged | CardRetired


class CardState(msgspec.Struct, frozen=True, kw_only=True):
    """A card's ledger state: its registration (None before) and its usage."""

    uuid: str
    spec: CardSpec | None = None
    usage: CardUsage = CardUsage()

    @property
    def core_capacity(self) -> int:
        return 0 if self.spec is None else core_capacity(self.spec)

    def slice_of(self, owner: str) -> SliceSpec | None:
        for s in self.usage.slices:
            if s.owner == owner:
                return s.slice
        return None


def core_capacity(spec: CardSpec) -> int:
    """The cores a card's slices may sum to: the registered cores, except on a non-NVIDIA
    hami-core card, where cores are a percentage of the card (100).

    An NVIDIA card registers ``Devcore = 100 × deviceCoreScaling`` and HAMi's ``Fit`` books
    against that ``Totalcore`` (``Totalcore - Usedcores < Coresreq``), so with a scaling of 2
    two 60-core pods share a card: capping it at 100 refused what the scheduler proposed. A card
    registered with 100 cores books exactly as before."""
    if spec.vendor == "nvidia":
        return spec.cores
    return 100 if spec.mode == "hami-core" else spec.cores


def initial_state(uuid: str) -> CardState:
    return CardState(uuid=uuid)


# --- commands --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterCard:
    spec: CardSpec


@dataclass(frozen=True, slots=True)
class ReserveSlice:
    owner: str  # "<namespace>/<job>/<task>"
    slice: SliceSpec


@dataclass(frozen=True, slots=True)
class ReleaseSlice:
    owner: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ChangeHealth:
    healthy: bool


@dataclass(frozen=True, slots=True)
class RetireCard:
    pass


Command = RegisterCard | ReserveSlice | ReleaseSlice | ChangeHealth | RetireCard


@dataclass(frozen=True, slots=True)
class Rejection:
    """A command the ledger refuses; ``reason`` names the rule."""

    reason: str


# --- usage arithmetic ------------------------------------------------------------------------


def is_exclusive(s: SliceSpec) -> bool:
    return s.exclusive or s.kind == "whole"


def usage_of(slices: tuple[OwnedSlice, ...], *, healthy: bool, retired: bool) -> CardUsage:
    """The canonical usage for a set of slices (sorted by owner, sums recomputed)."""
    ordered = tuple(sorted(slices, key=lambda s: s.owner))
    return CardUsage(
        memory_used=sum(s.slice.memory for s in ordered),
        cores_used=sum(s.slice.cores for s in ordered),
        slices_used=sum(s.slice.slots for s in ordered),
        exclusive=any(is_exclusive(s.slice) for s in ordered),
        owners=tuple(s.owner for s in ordered),
        slices=ordered,
        healthy=healthy,
        retired=retired,
    )


_KINDS: frozenset[SliceKind] = frozenset({"whole", "template", "soft"})


def per_card(slices: tuple[SliceAssignment, ...]) -> tuple[SliceAssignment, ...]:
    """A task's slices as its card ledgers book them: one per card. HAMi fits each container of
    a pod on its own, so two containers may take one card (their slices stay apart in the
    placement: the binding's annotation gives each container its own); a ledger holds one slice
    per card per task, so those are booked as one, their sum."""
    if len(slices) < 2 or len({a.card for a in slices}) == len(slices):
        return slices  # nearly every task: a card per slice
    merged: dict[str, SliceAssignment] = {}
    for a in slices:
        had = merged.get(a.card)
        if had is None:
            merged[a.card] = a
            continue
        one, two = had.slice, a.slice
        kind: SliceKind = "template" if one.kind == two.kind == "template" else "soft"
        merged[a.card] = msgspec.structs.replace(had, slice=SliceSpec(
            kind=kind, memory=one.memory + two.memory, cores=one.cores + two.cores,
            template=one.template if kind == "template" else None, exclusive=one.exclusive or two.exclusive,
            slots=one.slots + two.slots, mig=one.mig + two.mig))  # fmt: skip
    return tuple(merged.values())


def _check_reserve(state: CardState, owner: str, s: SliceSpec) -> str | None:
    spec, u = state.spec, state.usage
    if spec is None:
        return f"card {state.uuid} is not registered"
    if u.retired:
        return f"card {state.uuid} is retired"
    if not u.healthy:
        return f"card {state.uuid} is not healthy"
    mig = ledger_refusal(spec, usage_instances(u), s)
    if mig is not None:
        return mig
    if not owner:
        return "slice owner is empty"
    if s.kind not in _KINDS:
        return f"unknown slice kind {s.kind!r}"
    if s.kind == "template" and not s.template:
        return "a template slice needs a template name"
    if s.memory < 0 or s.cores < 0:
        return "slice memory and cores must be >= 0"
    if state.slice_of(owner) is not None:
        return f"{owner} already holds a different slice on card {state.uuid}"
    if s.slots < 1:
        return "slice slots must be >= 1"
    if u.slices_used + s.slots > spec.split_count:
        return f"CardTimeSlicingExhausted: {u.slices_used}/{spec.split_count} slices used"
    if u.exclusive:
        return f"ExclusiveDeviceAllocateConflict: card {state.uuid} holds an exclusive slice"
    if is_exclusive(s) and u.slices_used:
        return f"ExclusiveDeviceAllocateConflict: exclusive slice on a card with {u.slices_used} slices"
    if u.memory_used + s.memory > spec.memory:
        return f"CardInsufficientMemory: {u.memory_used}+{s.memory} > {spec.memory} MB"
    if u.cores_used + s.cores > state.core_capacity:
        return f"CardInsufficientCore: {u.cores_used}+{s.cores} > {state.core_capacity} cores"
    return None


# --- decide / evolve -------------------------------------------------------------------------


def decide(state: CardState, command: Command) -> list[LedgerEvent] | Rejection:
    """Events for ``command`` on ``state``, or why it is refused. Pure; never raises on input."""
    spec, u = state.spec, state.usage
    node = spec.node if spec is not None else ""
    match command:
        case RegisterCard(spec=new):
            if new.uuid != state.uuid:
                return Rejection(f"card uuid {new.uuid} does not match ledger {state.uuid}")
            if spec == new and not u.retired:
                return []
            if new.split_count < 1:
                return Rejection("split count must be >= 1")
            if u.memory_used > new.memory or u.slices_used > new.split_count:
                return Rejection("re-registration would leave the card over-committed")
            probe = CardState(uuid=state.uuid, spec=new, usage=u)
            if u.cores_used > probe.core_capacity:
                return Rejection("re-registration would leave the card over-committed")
            usage = usage_of(u.slices, healthy=new.healthy, retired=False)
            return [CardRegistered(card=new, usage=usage)]
        case ReserveSlice(owner=owner, slice=s):
            if state.slice_of(owner) == s:
                return []  # redelivery: already booked exactly so
            problem = _check_reserve(state, owner, s)
            if problem is not None:
                return Rejection(problem)
            usage = usage_of(
                (*u.slices, OwnedSlice(owner=owner, slice=s)), healthy=u.healthy, retired=u.retired
            )
            return [SliceReserved(card=state.uuid, node=node, owner=owner, slice=s, usage=usage)]
        case ReleaseSlice(owner=owner, reason=reason):
            if state.slice_of(owner) is None:
                return []
            rest = tuple(s for s in u.slices if s.owner != owner)
            usage = usage_of(rest, healthy=u.healthy, retired=u.retired)
            return [
                SliceReleased(card=state.uuid, node=node, owner=owner, usage=usage, reason=reason)
            ]
        case ChangeHealth(healthy=healthy):
            if spec is None:
                return Rejection(f"card {state.uuid} is not registered")
            if healthy == u.healthy:
                return []
            usage = usage_of(u.slices, healthy=healthy, retired=u.retired)
            return [CardHealthChanged(card=state.uuid, node=node, healthy=healthy, usage=usage)]
        case RetireCard():
            if spec is None:
                return Rejection(f"card {state.uuid} is not registered")
            if u.retired:
                return []
            usage = usage_of(u.slices, healthy=u.healthy, retired=True)
            return [CardRetired(card=state.uuid, node=node, usage=usage)]
    return Rejection(f"unknown command {type(command).__name__}")  # pragma: no cover


def evolve(state: CardState, event: LedgerEvent) -> CardState:
    """Apply one event by recomputing the usage from the previous state (not trusting the carried
    usage), so a full fold is an independent check of the state-carrying events."""
    u = state.usage
    match event:
        case CardRegistered(card=spec):
            return CardState(
                uuid=state.uuid,
                spec=spec,
                usage=usage_of(u.slices, healthy=spec.healthy, retired=False),
            )
        case SliceReserved(owner=owner, slice=s):
            rest = tuple(x for x in u.slices if x.owner != owner)
            slices = (*rest, OwnedSlice(owner=owner, slice=s))
            return CardState(
                uuid=state.uuid,
                spec=state.spec,
                usage=usage_of(slices, healthy=u.healthy, retired=u.retired),
            )
        case SliceReleased(owner=owner):
            rest = tuple(x for x in u.slices if x.owner != owner)
            return CardState(
                uuid=state.uuid,
                spec=state.spec,
                usage=usage_of(rest, healthy=u.healthy, retired=u.retired),
            )
        case CardHealthChanged(healthy=healthy):
            return CardState(
                uuid=state.uuid,
                spec=state.spec,
                usage=usage_of(u.slices, healthy=healthy, retired=u.retired),
            )
        case CardRetired():
            return CardState(
                uuid=state.uuid,
                spec=state.spec,
                usage=usage_of(u.slices, healthy=u.healthy, retired=True),
            )
    return state  # pragma: no cover


def fold(uuid: str, events: list[LedgerEvent] | tuple[LedgerEvent, ...]) -> CardState:
    """Replay a card's full history from nothing."""
    state = initial_state(uuid)
    for e in events:
        state = evolve(state, e)
    return state


def state_from_last_event(uuid: str, spec: CardSpec | None, last: LedgerEvent | None) -> CardState:
    """O(1) recovery: the card's state from its registration and its last ledger event.

    ``spec`` is the card's latest registration (``NodeRegistered.cards`` / the last
    ``CardRegistered``); a ``CardRegistered`` last event carries its own spec.
    """
    if last is None:
        return CardState(uuid=uuid, spec=spec)
    if isinstance(last, CardRegistered):
        return CardState(uuid=uuid, spec=last.card, usage=last.usage)
    return CardState(uuid=uuid, spec=spec, usage=last.usage)


_ENCODER = msgspec.json.Encoder()


def encode_state(state: CardState) -> bytes:
    """Canonical bytes of a card state (what replay tests compare)."""
    return _ENCODER.encode(state)


def check_invariants(state: CardState) -> list[str]:
    """Every broken invariant of ``state`` (empty when sound); used by tests and reconciliation."""
    spec, u = state.spec, state.usage
    problems: list[str] = []
    if spec is None:
        if u.slices:
            problems.append("slices on an unregistered card")
        return problems
    if u.memory_used > spec.memory:
        problems.append(f"memory {u.memory_used} > {spec.memory}")
    if u.cores_used > state.core_capacity:
        problems.append(f"cores {u.cores_used} > {state.core_capacity}")
    if u.slices_used > spec.split_count:
        problems.append(f"slices {u.slices_used} > {spec.split_count}")
    if u.exclusive and u.slices_used > 1:
        problems.append("exclusive slice is not alone")
    held = usage_instances(u)
    for i, a in enumerate(held):
        if any(a.start < b.start + b.size and b.start < a.start + a.size for b in held[i + 1:]):
            problems.append(f"MIG instance {a.profile} at {a.start} overlaps another")
    if u != usage_of(u.slices, healthy=u.healthy, retired=u.retired):
        problems.append("usage totals disagree with slices")
    return problems
