"""NVIDIA GPUs in MIG mode: MIG instances carved by the device config's ``knownMigGeometries``.

HAMi's NVIDIA plugin registers a GPU with MIG enabled as ``"mode": "mig"``
(``hami.io/node-nvidia-register``). HAMi's scheduler does not book such a card by memory like a
soft (hami-core) card: ``Fit`` → ``CustomFilterRule``/``selectMigCandidate`` picks the smallest
MIG profile whose memory holds the request (equal memory: fewer slices first) that has a free
hardware placement on the card, ``AddResourceUsage`` books the *profile's* memory and cores, and
``PatchAnnotations`` writes ``hami.io/vgpu-mig-allocations`` (profile + placement per container
device), which the node's device plugin needs to create the instance.

Where HAMi reads each profile's placements from NVML, Tessera takes them from the allowed
geometries (HAMi's chart ``knownMigGeometries``: per model, lists of ``name/memory/count``),
which the registration copies onto the card (``CardSpec.mig_geometries``):

* a geometry's instances lie side by side in its order; an instance spans
  ``ceil(memory / smallest profile memory of the model)`` memory slices — for the chart's
  A100-80GB: ``1g.10gb`` at 0..6, ``2g.20gb`` at 0, 2, 4 (+ ``1g.10gb`` at 6), ``3g.40gb`` at 0
  and 4, ``7g.79gb`` at 0 (8 slices), which are the placements NVML reports for those profiles;
* a placement is free when it overlaps no instance on the card and a geometry holds it together
  with every instance there (a card is carved one allowed way at a time);
* placements are tried in HAMi's order (``orderedMigPlacements``): ``1g.``/``3g.`` from the
  highest start, others from the lowest; a profile's cores are its compute slices over the
  model's largest (``2g`` of ``7g``: 28 %), unless the geometry says ``core``.

The same arithmetic serves the fit (which instance a pod gets) and the allocator's ledger
(:func:`ledger_refusal`: an instance that overlaps another, is not a placement of any geometry
compatible with the card's instances, or books other memory/cores than its profile is refused,
so no proposal over-commits a card). A MIG card whose model has no geometry is kept off as
before: the fit refuses it (:data:`CARD_IN_MIG_MODE`) and every view says :data:`MIG_WORDS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from contracts.devices import CardSpec, CardUsage, MigGeometry, MigInstance, SliceSpec

#: the mode HAMi's NVIDIA plugin registers a MIG-enabled GPU with
MIG_MODE = "mig"
#: the per-card fit reason for a MIG card with no geometry (HAMi style, "1/1 CardInMigMode")
CARD_IN_MIG_MODE = "CardInMigMode"
#: HAMi's reason when no allowed profile with a free placement holds the request
MIG_INFEASIBLE = "CardMigTopologyInfeasible"
#: what a user reads wherever a MIG card without geometries is shown or refused
MIG_WORDS = "MIG mode: Tessera does not carve MIG instances yet"
NO_GEOMETRY_WORDS = "MIG mode with no knownMigGeometries for its model: Tessera does not carve it"
#: HAMi's pod annotation for the node's device plugin (``MigAllocationsAnnotation``)
MIG_ALLOCATIONS = "hami.io/vgpu-mig-allocations"


@dataclass(frozen=True, slots=True)
class Slot:
    """One instance position of a geometry: profile, memory, cores, placement."""

    profile: str
    memory: int
    cores: int
    start: int
    size: int

    @property
    def instance(self) -> MigInstance:
        return MigInstance(profile=self.profile, start=self.start, size=self.size)


def in_mig_mode(card: CardSpec) -> bool:
    """A card HAMi's plugin registered with MIG enabled."""
    return card.mode == MIG_MODE


def carved(card: CardSpec) -> bool:
    """A MIG card Tessera serves: its model has geometries in the device config."""
    return in_mig_mode(card) and bool(card.mig_geometries)


def kept_off(card: CardSpec) -> bool:
    """A MIG card no pod is placed on: no geometry for its model."""
    return in_mig_mode(card) and not card.mig_geometries


def mig_reason(card: CardSpec) -> str | None:
    """The fit's reason to keep a pod off ``card`` (None: not a kept-off MIG card)."""
    return CARD_IN_MIG_MODE if kept_off(card) else None


def _compute_slices(profile: str) -> int:
    head = profile.partition(".")[0]
    return int(head[:-1]) if head.endswith("g") and head[:-1].isdigit() else 1


@cache
def layouts(geometries: tuple[MigGeometry, ...]) -> tuple[tuple[Slot, ...], ...]:
    """Each geometry's instance positions (see the module text)."""
    profiles = [p for g in geometries for p in g.profiles]
    if not profiles:
        return ()
    unit = min(p.memory for p in profiles)
    widest = max(_compute_slices(p.name) for p in profiles)
    out = []
    for g in geometries:
        start, slots = 0, []
        for p in g.profiles:
            size = -(-p.memory // unit)
            cores = p.cores or _compute_slices(p.name) * 100 // widest
            for _ in range(p.count):
                slots.append(Slot(p.name, p.memory, cores, start, size))
                start += size
        out.append(tuple(slots))
    return tuple(out)


def instances_of(slices: Iterable[SliceSpec]) -> tuple[MigInstance, ...]:
    return tuple(i for s in slices for i in s.mig)


def usage_instances(usage: CardUsage) -> tuple[MigInstance, ...]:
    return instances_of(s.slice for s in usage.slices)


def _overlap(a: MigInstance | Slot, b: MigInstance | Slot) -> bool:
    return a.start < b.start + b.size and b.start < a.start + a.size


def _compatible(layout: tuple[Slot, ...], held: Sequence[MigInstance]) -> bool:
    own = {s.instance for s in layout}
    return all(i in own for i in held)


def _order(slot: Slot) -> int:
    return -slot.start if slot.profile.startswith(("1g.", "3g.")) else slot.start


def pick(card: CardSpec, held: Sequence[MigInstance], memory: int) -> Slot | None:
    """The instance a request of ``memory`` MB gets on ``card`` holding ``held``: the smallest
    profile (memory, then slices) with memory ≥ the request and a free placement in a geometry
    compatible with ``held``, the placement in HAMi's order; None when there is none."""
    candidates: dict[MigInstance, Slot] = {}
    for layout in layouts(card.mig_geometries):
        if not _compatible(layout, held):
            continue
        for slot in layout:
            if slot.memory >= memory and not any(_overlap(slot, h) for h in held):
                candidates.setdefault(slot.instance, slot)
    if not candidates:
        return None
    return min(candidates.values(), key=lambda s: (s.memory, s.size, s.profile, _order(s)))


def slot_for(card: CardSpec, instance: MigInstance) -> Slot | None:
    for layout in layouts(card.mig_geometries):
        for slot in layout:
            if slot.instance == instance:
                return slot
    return None


def ledger_refusal(card: CardSpec, held: Sequence[MigInstance] = (), new: SliceSpec | None = None) -> str | None:
    """Why the allocator's ledger books ``new`` on ``card`` holding instances ``held`` (None: it
    may): a MIG card without geometries takes nothing; on one with geometries a slice must hold
    instances of its geometries, overlapping none on the card, all of them together in one
    geometry, booking exactly their profiles' memory and cores — a proposal from an older
    scheduler, or one made on a stale view, never over-packs the card."""
    if not in_mig_mode(card):
        if new is not None and new.mig:
            return f"MigInstanceOnSoftCard: card {card.uuid} is not in MIG mode"
        return None
    if not card.mig_geometries:
        return f"{CARD_IN_MIG_MODE}: card {card.uuid} is in {MIG_WORDS} ({NO_GEOMETRY_WORDS})"
    if new is None:
        return None
    if not new.mig:
        return f"{MIG_INFEASIBLE}: card {card.uuid} is in MIG mode and the slice names no MIG instance"
    memory = cores = 0
    taken = list(held)
    for inst in new.mig:
        slot = slot_for(card, inst)
        if slot is None:
            return (f"{MIG_INFEASIBLE}: {inst.profile} at {inst.start}+{inst.size} is not a placement "
                    f"of card {card.uuid}'s MIG geometries")  # fmt: skip
        clash = next((h for h in taken if _overlap(inst, h)), None)
        if clash is not None:
            return (f"{MIG_INFEASIBLE}: {inst.profile} at {inst.start}+{inst.size} overlaps "
                    f"{clash.profile} at {clash.start}+{clash.size} on card {card.uuid}")  # fmt: skip
        taken.append(inst)
        memory += slot.memory
        cores += slot.cores
    if not any(_compatible(layout, taken) for layout in layouts(card.mig_geometries)):
        return (f"{MIG_INFEASIBLE}: no MIG geometry of card {card.uuid} holds "
                + ", ".join(f"{i.profile} at {i.start}" for i in taken))  # fmt: skip
    if (new.memory, new.cores) != (memory, cores):
        return (f"{MIG_INFEASIBLE}: the slice books {new.memory} MB/{new.cores} cores, its MIG "
                f"instances {memory} MB/{cores} cores")  # fmt: skip
    return None


def card_note(card: CardSpec, usage: CardUsage | None = None) -> str:
    """The note a card row carries ("" for an ordinary card): why a MIG card is kept off, or
    the MIG instances carved on it."""
    if kept_off(card):
        return MIG_WORDS
    if not carved(card):
        return ""
    held = sorted(usage_instances(usage), key=lambda i: i.start) if usage is not None else []
    if not held:
        return "MIG: no instances"
    return "MIG: " + ", ".join(f"{i.profile}@{i.start}" for i in held)


def mig_words(kind: str, cards: Sequence[CardSpec], codes: str) -> tuple[str, str, float]:
    """Explain's words for a node whose matching cards are all in MIG mode: what keeps the pod
    off and what would let it land (no freeing helps: infinite distance)."""
    mig = [c for c in cards if kept_off(c)]
    types = ", ".join(sorted({c.type for c in mig}))
    n = len(mig)
    return (f"{kind}: the node's {n} card{'s' if n > 1 else ''} ({types}) {'are' if n > 1 else 'is'} "
            f"in {MIG_WORDS} [{codes}]",
            "run the pod on a node whose GPUs are not in MIG mode, give the device config "
            "knownMigGeometries for this model, or turn MIG off on this node's GPUs (HAMi's "
            "plugin then registers them for sharing)", float("inf"))  # fmt: skip


def allocations_annotation(entries: Sequence[tuple[int, int, str, MigInstance]]) -> str:
    """HAMi's ``hami.io/vgpu-mig-allocations`` value (``EncodeMigAllocations``): a JSON list of
    ``{containerIndex, deviceIndex, gpuUUID, profile, placement: {start, size}}``, one per MIG
    device; the runtime identity (migUUID, GI/CI ids) is the device plugin's to fill in."""
    return json.dumps([{"containerIndex": c, "deviceIndex": d, "gpuUUID": uuid, "profile": i.profile,
                        "placement": {"start": i.start, "size": i.size}}
                       for c, d, uuid, i in entries], separators=(",", ":"))  # fmt: skip
