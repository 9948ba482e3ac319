"""Huawei Ascend vNPU (HAMi ``huawei.com/<commonWord>``, ``-memory``, ``-core``).

Request rules (hami.md §2.4 ``MutateAdmission`` / ``GenerateResourceRequests``):

* mode: pod annotation ``huawei.com/vnpu-mode: hami-core`` selects soft (hami-core) slicing;
  anything else is template (hard) mode, where any ``-core`` > 0 is rejected;
* template mode rounds ``-memory`` with ``trimMemory`` (``templates.py``); absent memory means
  the whole card; a request above ``memoryCapacity`` is rejected;
* "npu > 1 cannot be split": count > 1 in template mode must ask for whole cards;
* 910C (``superPod: true``): a count of 1 becomes 2 (a module of two NPUs), odd counts > 1 are
  rejected. The "npu > 1" rule reads the count as asked, before that rewrite (HAMi's
  ``MutateAdmission`` tests the quantity it read before writing 2 into the limits), so a 910C
  vNPU of count 1 is admitted: two NPUs, the template on each die of a module; asked as 2 it
  is refused.

Fit (``Devices.Fit``): the hami-core gate is node-wide (node annotation ``hami-vnpu-core``, else
the global ``vnpus.hamiVnpuCore``); since v2.10 annotation-less pods are mode-agnostic. Core
capacity is 100 on hami-core nodes, ``aiCore`` otherwise. 910C takes whole modules
(``idx // 2``) only. Other 910 cards are grouped by NetworkID, the HCCS ring (cards 0-3 and 4-7;
node bonus 10 x largest-group share, HAMi's ``ScoreNode``). HAMi fills a multi-card request from
the group with the most free cards, splitting it where that group is short. Since rules
generation 2 (``config.RING_FIT``) a request that one ring can hold takes the best-fitting ring,
by ascend-for-volcano's module910x8 priorities (``getNPUAllocPriorityArray``: 1 card → a ring
with 1, 3, 2, then 4 free; 2 → 2, 4, then 3; 4 → only a whole ring), so whole rings stay whole
for 4-card pods; a whole single card too (a vNPU slice keeps the card policy's order). On a
910A (Atlas 800 training server) chips of different rings cannot talk over HCCS: a pod of
<= 4 of them that no one ring holds does not fit the node (``RingNotFit``), where
ascend-for-volcano refuses it too (``NodeNotMeetTopologyWarning``) and HAMi would split it. 910B
nodes are fully meshed (ascend-for-volcano's module910bx8 only counts cards), so there the ring is a
preference and a pod is still split when no ring holds it.

Counts (rules generation 3, ``config.RING_COUNT_FIT``): a 910A pod asks 1, 2, 4 or 8 chips, as
ascend-for-volcano's module910x8 requires (``checkSingleTrainMode``: "req npu num is not [1 or 2 or
4 or 8]"; ``judgeNodeAndTaskNPU`` fits no node for another count): 3 would take a ring's chips
but one, 5-7 span both rings. Admission refuses ``huawei.com/Ascend910A`` of another count; a family
name (``huawei.com/Ascend910``) learns its model only at placement, so there such a count does not
fit 910A cards (``RingCountNotFit``) and fits the 910B models, whose module910bx8 takes any count
up to 8. Nodes are ranked (``config.RING_RANK``) by ``topology_score``: the fit of the ring the
pod's cards take there, in module910x8's order (ascend-for-volcano's ``ScoreBestNPUNodes``,
``affScoreList``), so a pod goes where it fills a ring best and leaves whole rings whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from contracts.devices import CardSpec, SliceSpec
from contracts.workloads import DeviceRequest
from services.core.devices.catalogue import AscendChip, Catalogue
from services.core.devices.nvidia import PCT_UNSET
from services.core.devices.resource_values import INT32_MAX, comma_list, read_int
from services.core.devices.templates import trim_memory
from services.core.devices.vendor import NodeGate, ResourceList, SchedulingSwitches
from services.core.devices.violations import Violation

VENDOR = "huawei"
VNPU_MODE = "huawei.com/vnpu-mode"
HAMI_CORE = "hami-core"
NODE_HAMI_CORE = "hami-vnpu-core"
NETWORK_WEIGHT = 10.0  # HAMi Ascend910NetworkWeight
#: cards of an HCCS ring (NetworkID 0: indices 0-3, 1: 4-7)
RING_SIZE = 4
#: chips whose two rings cannot talk to each other: a pod of <= RING_SIZE of them must sit in one
#: ring (ascend-for-volcano module910x8 `judgeNodeAndTaskNPU`; "otherwise the task fails")
RING_BOUND = frozenset({"Ascend910A"})
#: a ring-bound pod that no one ring of the node holds (`RING_BOUND`)
RING_NOT_FIT = "RingNotFit"
#: the chips a pod of a ring-bound chip may ask: one ring's 1, 2 or 4, or the server's 8
#: (ascend-for-volcano module910x8 `checkSingleTrainMode`, `judgeNodeAndTaskNPU`)
RING_COUNTS = (1, 2, 4, 8)
#: a ring-bound chip's pod of another count (`RING_COUNTS`): no node of such chips serves it
RING_COUNT_NOT_FIT = "RingCountNotFit"
#: `RING_COUNTS` in words
RING_COUNTS_WORDS = ", ".join(str(n) for n in RING_COUNTS[:-1]) + f" or {RING_COUNTS[-1]}"


def _soft_there(memory: int) -> str:
    """What the template-mode words promise does not hold on a hami-core node: since HAMi v2.10
    (#2035) a pod without `VNPU_MODE` may land there and is soft-sliced with the memory HAMi's
    webhook wrote into its limits, no cores booked (`make_slice`); said at admission, before
    the node is known, so the pod's owner is not told of a template and AI cores it lacks."""
    return (f"on a hami-core node ({NODE_HAMI_CORE}: \"true\") it is a soft slice of {memory} MB "
            f"instead, with no AI cores booked, as HAMi v2.10 places a pod without {VNPU_MODE}")  # fmt: skip


def ring_count_why(chip: str) -> str:
    """Why a ring-bound chip's pod asks `RING_COUNTS_WORDS` (admission and the wait words)."""
    return (f"{chip} chips talk over HCCS rings of {RING_SIZE}, {RING_COUNTS[-1]} to a server; "
            "ascend-for-volcano's module910x8 refuses other counts")

_SOFT = NodeGate(hami_core=True)
_HARD = NodeGate(hami_core=False)


def use_uuid_annotation(common_word: str) -> str:
    return f"hami.io/use-{common_word}-uuid"


def nouse_uuid_annotation(common_word: str) -> str:
    return f"hami.io/no-use-{common_word}-uuid"


def node_supports_hami_core(
    node_annotations: Mapping[str, str], switches: SchedulingSwitches
) -> bool:
    """Node annotation ``hami-vnpu-core`` ("true"/"false") when present, else the global switch."""
    value = node_annotations.get(NODE_HAMI_CORE)
    if value is not None:
        return value.strip().lower() == "true"
    return switches.hami_vnpu_core


class AscendVendor:
    """HAMi Ascend vNPU over the catalogue's chips and aliases."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self.chips: dict[str, AscendChip] = {c.common_word: c for c in catalogue.ascend}
        # count resource → (resource prefix used for -memory/-core, allowed chips)
        self._entries: list[tuple[str, str, str, str, tuple[AscendChip, ...]]] = []
        for c in catalogue.ascend:
            self._entries.append(
                (c.resource_name, c.resource_memory_name, c.resource_core_name, c.common_word, (c,))
            )
        for alias, types in sorted(catalogue.aliases.items()):
            chips = tuple(self.chips[t] for t in types if t in self.chips)
            if chips and alias not in {e[0] for e in self._entries}:
                word = alias.split("/", 1)[-1]
                self._entries.append((alias, f"{alias}-memory", f"{alias}-core", word, chips))
        self._resources = frozenset(n for e in self._entries for n in e[:3])
        # asked once per container of every pod admitted: built here, not at each call
        self._groups = tuple(frozenset(e[:3]) for e in self._entries)

    @property
    def name(self) -> str:
        return VENDOR

    def resource_names(self) -> frozenset[str]:
        return self._resources

    def resource_groups(self) -> tuple[frozenset[str], ...]:
        return self._groups

    # --- parsing --------------------------------------------------------------------------

    def parse(
        self, limits: ResourceList, requests: ResourceList, annotations: Mapping[str, str]
    ) -> tuple[tuple[DeviceRequest, ...], tuple[Violation, ...]]:
        out: list[DeviceRequest] = []
        violations: list[Violation] = []
        soft = annotations.get(VNPU_MODE, "") == HAMI_CORE
        for count_name, mem_name, core_name, word, chips in self._entries:
            if not any(n in limits or n in requests for n in (count_name, mem_name, core_name)):
                continue
            req = self._parse_one(
                count_name,
                mem_name,
                core_name,
                word,
                chips,
                soft,
                limits,
                requests,
                annotations,
                violations,
            )
            if req is not None:
                out.append(req)
        return tuple(out), tuple(violations)

    def _parse_one(
        self,
        count_name: str,
        mem_name: str,
        core_name: str,
        word: str,
        chips: tuple[AscendChip, ...],
        soft: bool,
        limits: ResourceList,
        requests: ResourceList,
        annotations: Mapping[str, str],
        violations: list[Violation],
    ) -> DeviceRequest | None:
        before = len(violations)
        count = read_int(limits, requests, count_name, violations, minimum=1)
        factor = chips[0].memory_factor
        memory = read_int(limits, requests, mem_name, violations, maximum=INT32_MAX // factor)
        cores = read_int(limits, requests, core_name, violations)
        if count is None and len(violations) == before:
            count = 1  # Volcano: only -memory given means one card
        if not soft and cores:
            violations.append(
                Violation(
                    core_name,
                    str(cores),
                    f"is only supported in hami-core (soft split) mode; set annotation {VNPU_MODE}: {HAMI_CORE}",
                )
            )
        single = chips[0] if len(chips) == 1 else None
        several = count is not None and count > 1  # as asked: before the 910C module rewrite
        if count is not None and single is not None and single.super_pod:
            if count == 1:
                count = 2  # a 910C module is two NPUs
            elif count % 2:
                violations.append(
                    Violation(
                        count_name,
                        str(count),
                        f"must be 1 or 2*n ({single.common_word} allocates modules of 2 NPUs)",
                    )
                )
        if count is not None and count not in RING_COUNTS and all(c.common_word in RING_BOUND for c in chips):
            violations.append(Violation(count_name, str(count), f"must be {RING_COUNTS_WORDS} "
                                        f"({ring_count_why(chips[0].common_word)})"))  # fmt: skip
        asked = memory  # as written, before HAMi's memoryFactor
        if memory is not None and factor > 1:
            memory *= factor
        template: str | None = None
        rounded = ""  # what template mode made of the memory asked, when not that
        mem_mb, mem_pct, exclusive = 0, PCT_UNSET, False
        core_req = min(cores or 0, 100)
        if soft:
            if memory:
                mem_mb = memory
            else:
                mem_pct = 100
        elif memory is None or memory == 0:
            mem_pct, exclusive = 100, True  # whole card
        elif single is None:
            # A family name (`huawei.com/Ascend910`) covers models with different templates: the
            # size is rounded per card at fit time (`_per_card`), once the model is known.
            fits_some = [c for c in chips if trim_memory(c, memory) is not None]
            if not fits_some:
                violations.append(Violation(mem_name, str(memory), "exceeds card capacity "
                                            f"{max(c.memory_capacity for c in chips)}"))  # fmt: skip
            elif several:
                violations.append(Violation(mem_name, str(memory), "vNPU not supported for multiple "
                                            f"devices: {count_name}={count} must request whole cards"))  # fmt: skip
            mem_mb = memory
        else:
            trimmed = trim_memory(single, memory)
            if trimmed is None:
                violations.append(
                    Violation(
                        mem_name, str(memory), f"exceeds card capacity {single.memory_capacity}"
                    )
                )
            elif trimmed.template is None:
                mem_pct, exclusive = 100, True
                rounded = _whole_card_words(single, memory)
            else:
                if several:
                    violations.append(
                        Violation(
                            mem_name,
                            str(memory),
                            f"vNPU not supported for multiple devices: {count_name}={count} must request whole cards",
                        )
                    )
                mem_mb, template, core_req = trimmed.memory, trimmed.template, trimmed.ai_core
                if trimmed.memory != memory:
                    rounded = (f"rounded up to {single.common_word}'s vNPU template {template} ({trimmed.memory} "
                               f"MB, {trimmed.ai_core} aiCores), as HAMi does: a card holds only its "
                               f"templates' sizes; {_soft_there(trimmed.memory)}")  # fmt: skip
        if len(violations) > before or count is None:
            return None
        if soft and cores is not None and cores > 100:
            violations.append(_clamped(core_name, cores))
        if rounded:  # HAMi rounds in silence: "8 GB slices, 8 to a card" held 4
            violations.append(Violation(mem_name, str(asked), rounded, warning=True))
        types = tuple(c.common_word for c in chips)
        return DeviceRequest(
            vendor=VENDOR,
            type=single.common_word if single else word,
            count=count,
            memory=mem_mb,
            memory_pct=mem_pct,
            cores=core_req,
            template=template,
            exclusive=exclusive,
            allowed_types=types if single is None else (),
            mode=HAMI_CORE if soft else "",
            use_uuids=tuple(
                sorted(
                    {u for t in types for u in comma_list(annotations.get(use_uuid_annotation(t)))}
                )
            ),
            nouse_uuids=tuple(
                sorted(
                    {
                        u
                        for t in types
                        for u in comma_list(annotations.get(nouse_uuid_annotation(t)))
                    }
                )
            ),
            resource=count_name,
        )

    # --- fit hooks ------------------------------------------------------------------------

    def node_gate(
        self,
        request: DeviceRequest,
        node_annotations: Mapping[str, str],
        switches: SchedulingSwitches,
    ) -> NodeGate | str:
        """HAMi step 1, the whole-node mode gate (ModeNotFit)."""
        supports = node_supports_hami_core(node_annotations, switches)
        if request.mode == HAMI_CORE:
            return _SOFT if supports else "ModeNotFit"
        if supports and not switches.mode_agnostic and not request.exclusive:
            return "ModeNotFit"  # v2.9: legacy sub-card pods could not use hami-core nodes (#1941)
        return _SOFT if supports else _HARD

    def card_reason(self, card: CardSpec, request: DeviceRequest) -> str | None:
        if request.allowed_types:
            return None if card.type in request.allowed_types else "CardTypeMismatch"
        return None if card.type == request.type else "CardTypeMismatch"

    def core_capacity(self, card: CardSpec, gate: NodeGate) -> int:
        return 100 if gate.hami_core else card.cores

    def _per_card(self, card: CardSpec, request: DeviceRequest) -> DeviceRequest:
        """A family-name vNPU size (template unknown at parse time) rounded for this card's
        model: its template, a whole card, or (too big for this model) more memory than it has."""
        if request.template is not None or request.exclusive or request.mode or not request.memory:
            return request
        chip = self.chips.get(card.type)
        if chip is None or not request.allowed_types:
            return request
        trimmed = trim_memory(chip, request.memory)
        if trimmed is None:
            return msgspec.structs.replace(request, memory=card.memory + 1)
        if trimmed.template is None:
            return msgspec.structs.replace(request, memory=0, memory_pct=100, exclusive=True)
        return msgspec.structs.replace(request, memory=trimmed.memory, template=trimmed.template,
                                       cores=trimmed.ai_core)  # fmt: skip

    def core_request(self, card: CardSpec, request: DeviceRequest, gate: NodeGate) -> int:
        """Whole cards take every core; template slices book their aiCore on template nodes and
        nothing on hami-core nodes (HAMi books Coresreq=0 there); soft slices their ``-core`` %."""
        request = self._per_card(card, request)
        if request.exclusive:
            return self.core_capacity(card, gate)
        if request.template is not None:
            return 0 if gate.hami_core else request.cores
        return min(request.cores, 100)

    def memory_request(self, card: CardSpec, request: DeviceRequest) -> int:
        request = self._per_card(card, request)
        if request.memory == 0 and 0 < request.memory_pct < PCT_UNSET:
            return card.memory * request.memory_pct // 100
        return request.memory

    def make_slice(
        self, card: CardSpec, request: DeviceRequest, gate: NodeGate, memory: int, cores: int
    ) -> SliceSpec:
        request = self._per_card(card, request)
        if request.template is not None and gate.hami_core:
            # v2.10 mode-agnostic: an annotation-less pod on a hami-core node is soft-sliced
            # there (the agent resolves its mode from the node, ascend-device-plugin #106) with
            # the memory HAMi's webhook wrote into its limits; HAMi books no cores for it.
            return SliceSpec(kind="soft", memory=memory, cores=0)
        if request.template is not None:
            return SliceSpec(kind="template", memory=memory, cores=cores, template=request.template)
        if request.exclusive:
            return SliceSpec(kind="whole", memory=memory, cores=cores, exclusive=True)
        total = self.core_capacity(card, gate)
        return SliceSpec(kind="soft", memory=memory, cores=cores, exclusive=cores >= total)

    def cards_needed(
        self, card: CardSpec, request: DeviceRequest, switches: SchedulingSwitches
    ) -> int | str:
        """910C modules of 2; a 910A pod of a count its rings cannot serve fits none of its
        cards (rules generation 3): a family name's pod may still take 910B cards."""
        chip = self.chips.get(card.type)
        if switches.ring_counts and card.type in RING_BOUND and request.count not in RING_COUNTS:
            return RING_COUNT_NOT_FIT
        if chip is not None and chip.super_pod:
            if request.count == 1:
                return 2
            if request.count % 2:
                return "AllocatedCardsInsufficientRequest"
        return request.count

    def select(
        self,
        candidates: Sequence[CardSpec],
        needed: int,
        request: DeviceRequest,
        switches: SchedulingSwitches,
    ) -> Sequence[CardSpec] | str:
        """910C module pairs; 910 NetworkID groups: the best-fitting ring (rules generation 2,
        `switches.ring_fit`), a 910A pod of <= 4 cards in one ring only; else HAMi's fill,
        largest group first."""
        if len(candidates) < needed:
            return "AllocatedCardsInsufficientRequest"
        first = candidates[0]
        chip = self.chips.get(first.type)
        if chip is not None and chip.super_pod and needed > 1:
            return _pairs(candidates, needed)
        if chip is None or not chip.network_grouped:
            return candidates[:needed]
        if switches.ring_fit and (needed > 1 or _whole(request)):
            ring = _best_ring(candidates, needed)
            if ring is not None:
                return ring
            if chip.common_word in RING_BOUND and needed <= RING_SIZE:
                return RING_NOT_FIT
        if len(candidates) == needed or needed == 1:
            return candidates[:needed]
        ordered = sorted(ring_groups(candidates).values(), key=len, reverse=True)  # stable: first-seen on ties
        chosen: list[CardSpec] = []
        for g in ordered:
            for c in g:
                chosen.append(c)
                if len(chosen) == needed:
                    return chosen
        return "AllocatedCardsInsufficientRequest"  # pragma: no cover - len checked above

    def node_bonus(self, chosen: Sequence[CardSpec], request: DeviceRequest) -> float:
        """HAMi ``ScoreNode`` for 910*: 10 x (largest NetworkID group / cards chosen); 0 for 310P."""
        if not chosen:
            return 0.0
        chip = self.chips.get(chosen[0].type)
        if chip is None or not chip.network_grouped:
            return 0.0
        counts: dict[int, int] = {}
        for c in chosen:
            counts[c.network_id] = counts.get(c.network_id, 0) + 1
        return NETWORK_WEIGHT * max(counts.values()) / len(chosen)

    def topology_score(
        self, candidates: Sequence[CardSpec], chosen: Sequence[CardSpec], request: DeviceRequest
    ) -> int:
        """How well the cards fit the HCCS ring they take, as ascend-for-volcano ranks nodes
        (module910x8's ``affScoreList``, ``getNodeBestScore``): `RING_SIZE` when they fill a
        ring's free cards exactly, then 3 leaving a pair, 2 leaving one, 1 leaving three
        (`_leftover_rank`); 0 when a pod one ring could hold spans two (affScore4, "not meet"),
        and no opinion (0) for a vNPU slice, for more cards than a ring has, and for chips
        without rings (310P) or in modules (910C)."""
        if not chosen:
            return 0
        chip = self.chips.get(chosen[0].type)
        needed = len(chosen)
        if chip is None or not chip.network_grouped or chip.super_pod or needed > RING_SIZE:
            return 0
        if needed == 1 and not _whole(request):
            return 0
        rings = {c.network_id for c in chosen}
        if len(rings) > 1:
            return 0
        (ring,) = rings
        return RING_SIZE - _leftover_rank(sum(1 for c in candidates if c.network_id == ring) - needed)


def _whole(request: DeviceRequest) -> bool:
    """A request for whole cards: the fitting candidates are the free cards of each ring."""
    return request.exclusive or (not request.memory and request.memory_pct >= 100)


def _leftover_rank(left: int) -> int:
    """How good it is to leave `left` free cards in a ring: none, then a pair (a 2-card pod's
    room), then one, then more (ascend-for-volcano's module910x8 priorities: 1 card → rings with
    1 > 3 > 2 > 4 free; 2 cards → 2 > 4 > 3)."""
    return {0: 0, 2: 1, 1: 2}.get(left, left)


def ring_groups(cards: Sequence[CardSpec]) -> dict[int, list[CardSpec]]:
    """The cards by NetworkID (HCCS ring), each in the order given."""
    groups: dict[int, list[CardSpec]] = {}
    for c in cards:
        groups.setdefault(c.network_id, []).append(c)
    return groups


def _best_ring(candidates: Sequence[CardSpec], needed: int) -> Sequence[CardSpec] | None:
    """`needed` cards of the one ring that fits best (ties: the ring tried first), or None
    when no ring holds them."""
    rings = [g for g in ring_groups(candidates).values() if len(g) >= needed]
    if not rings:
        return None
    best = min(enumerate(rings), key=lambda ig: (_leftover_rank(len(ig[1]) - needed), ig[0]))[1]
    return best[:needed]


def _whole_card_words(chip: AscendChip, memory: int) -> str:
    """What a size above the largest template became: a whole card, which books the card's
    ``memoryAllocatable`` — HAMi's ``trimMemory`` result, written into the pod's limit — and
    that may be less than asked (310P: 21527 of its 24576 MB capacity). "" when it is exact."""
    alloc = chip.memory_allocatable
    if memory == alloc:
        return ""
    if memory < alloc:
        return (f"is more than {chip.common_word}'s largest vNPU template: rounded up to a whole card "
                f"({alloc} MB), as HAMi does")  # fmt: skip
    return (f"is more than {chip.common_word}'s largest vNPU template: a whole card, which books {alloc} MB "
            f"(its memoryAllocatable), {memory - alloc} MB less than asked — HAMi writes {alloc} into the "
            "limit")  # fmt: skip


def _clamped(name: str, cores: int) -> Violation:
    """HAMi's Fit clamps ``-core`` > 100 silently; Tessera accepts it too, and says so."""
    return Violation(name, str(cores), "is more than a card's 100 % of cores: clamped to 100",
                     warning=True)  # fmt: skip


def _pairs(candidates: Sequence[CardSpec], needed: int) -> Sequence[CardSpec] | str:
    """910C ``computeBestCombination910C``: whole modules (``index // 2``) in try order."""
    modules: dict[int, list[CardSpec]] = {}
    for c in candidates:
        modules.setdefault(c.index // 2, []).append(c)
    chosen: list[CardSpec] = []
    for members in modules.values():
        if len(members) == 2:
            chosen.extend(members)
            if len(chosen) >= needed:
                return chosen[:needed]
    return "AllocatedCardsInsufficientRequest"
