"""Fit one task's device requests onto one node's cards (HAMi ``fitInDevices`` + vendor ``Fit``).

The scheduler calls :func:`prepare_task` once per pod (policies, weights, vendors resolved) and
then :func:`fit_node` for every candidate node; :func:`fit_task` does both for one node.

Per-card checks run in HAMi's order with HAMi's reason names (hami.md §2.4, §4.2):
health (``CardNotHealth``) → cordon (``CardCordoned``) → type/mode (``CardTypeMismatch``;
Ascend's node mode gate ``ModeNotFit``; a card of the vendor's own plugin, ``mode: plugin``: the name it is served
under, and ``SliceNeedsRegistration`` for anything but a whole card, `registration.py`) → uuid
(``CardUuidMismatch``) → slots (``CardTimeSlicingExhausted``) → mutex
(``ExclusiveDeviceAllocateConflict``) → core clamp → memory (``CardInsufficientMemory``) → cores
(``CardInsufficientCore``) → exclusive ask (``ExclusiveDeviceAllocateConflict``) → full-core rule
(``CardComputeUnitsExhausted``: a ``gpucores: 0`` ask on a card an exclusive pod holds gets this,
as in HAMi) → a card held exclusively (``ExclusiveDeviceAllocateConflict``); then topology selection (``NumaNotFit``,
``AllocatedCardsInsufficientRequest``). Failures aggregate per node as ``"2/2
CardInsufficientMemory"``, sorted and comma-joined (``pkg/device/common/common.go``).

Requests are fitted in order; later ones see the earlier ones' usage (HAMi's ``fitInDevices``
→ ``AddResourceUsage``), so two containers of a pod may take slices of one card, booked as one
slice of their sum (``ledger.per_card``) — but not a card an earlier container holds whole
(``CardUsedByAnotherContainerOfThePod``), nor a card where it took another vNPU template
(``CardHoldsAnotherTemplateOfThePod``: the device plugin tells one template per card).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from contracts.devices import CardSpec, CardUsage, MigInstance, SliceSpec
from contracts.workloads import DeviceRequest
from services.core.devices import mig
from services.core.devices.policies import (
    CARD_POLICY_ANNOTATION,
    NODE_POLICY_ANNOTATION,
    CardPolicy,
    CardRanker,
    ScoredCard,
    card_policy_problem,
    card_sort_key,
    node_policy_problem,
    parse_card_policy,
    parse_node_policy,
)
from services.core.devices.registration import IN_USE, OTHERS, PLUGIN, plugin_card_reason
from services.core.devices.registry import VendorRegistry
from services.core.devices.score import (
    DEFAULT_WEIGHTS,
    WEIGHTS_ANNOTATION,
    PolicyError,
    ScoreWeights,
    device_score,
    node_score,
    parse_weights,
)
from services.core.devices.vendor import DeviceVendor, NodeGate, SchedulingSwitches

CORDON_ANNOTATION = "hami.io/device-cordon"

_EMPTY: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """Scheduler-level device settings (Volcano ``deviceshare.*`` / HAMi scheduler flags)."""

    card_policy: str = "spread"  # HAMi --gpu-scheduler-policy default
    node_policy: str = "binpack"  # HAMi --node-scheduler-policy default
    hami_vnpu_core: bool = False  # deviceshare.HamiVnpuCore; or the device config's (node annotation wins)
    mode_agnostic: bool = True  # HAMi v2.10 (#2035); False reproduces v2.9 (#1941)
    #: the scheduling rules' generation (`scheduling.config.RULES`) from which the rules below
    #: hold; False re-runs a log recorded before them as it ran. The device config's
    #: `vnpus.hamiVnpuCore` is the global hami-core switch too:
    catalogue_vnpu_core: bool = True
    #: two containers' vNPUs of one template share a card (`SchedulingSwitches.templates_share`)
    templates_share: bool = True
    #: a MIG card without geometries is kept off (`SchedulingSwitches.mig_kept_off`)
    mig_kept_off: bool = True
    #: Ascend 910 cards from one best-fitting HCCS ring (`SchedulingSwitches.ring_fit`)
    ring_fit: bool = True
    #: a 910A pod of 3 or 5-7 cards does not fit 910A cards (`SchedulingSwitches.ring_counts`)
    ring_counts: bool = True
    card_ranker: CardRanker | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CardAssignment:
    """One slice of the task on one card; ``request`` indexes the task's requests."""

    card: str
    slice: SliceSpec
    request: int


@dataclass(frozen=True, slots=True)
class NodeFit:
    """The task fits: its slices, and the node score (higher is better under the node policy)."""

    assignments: tuple[CardAssignment, ...]
    score: float
    ok: bool = True
    #: how well the chosen cards leave the node's topology for later pods (higher is better, 0:
    #: no opinion; `DeviceVendor.topology_score`, summed over the requests): apart from `score`,
    #: which the node policy turns around under spread, since a worse ring is worse either way
    topology: int = 0


@dataclass(frozen=True, slots=True)
class NodeMisfit:
    """The task does not fit: ``reasons`` like ``("2/2 CardInsufficientMemory",)``."""

    reasons: tuple[str, ...]
    card_reasons: tuple[tuple[str, str], ...] = ()  # (card uuid, reason) for the failing request
    ok: bool = False

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def explained(
        self, cards: Sequence[tuple[CardSpec, CardUsage]], memory_mb: int
    ) -> tuple[str, ...]:
        """The reasons, with HAMi's terse ``CardTimeSlicingExhausted`` spelled out: when a
        card's split count is used up while `memory_mb` would still fit, the *slice count*, not
        memory, is what ran out (issue 13: 4 slices per hami-core 910B3 by default, so a 64 GB
        card never serves 8 × 8 GB tasks unless the node config's ``vDeviceCount`` says 8), and
        the setting that decides it per vendor (NVIDIA: ``deviceSplitCount``)."""
        full = {u for u, r in self.card_reasons if r == "CardTimeSlicingExhausted"}
        if not full:
            return self.reasons
        exhausted = [(c, u) for c, u in cards if c.uuid in full]
        plugin = [(c, u) for c, u in exhausted if c.mode == PLUGIN]
        if plugin:  # no slices there: whole cards of a name, each held by one pod
            res = plugin[0][0].resource
            n = sum(1 for c, _ in cards if c.mode == PLUGIN and c.resource == res)
            theirs = sum(1 for _, u in plugin if OTHERS in u.owners)
            note = (f"every {res} card {IN_USE} ({len(plugin)} of {n}"
                    + (f"; {theirs} by other schedulers' pods" if theirs else "") + ")")  # fmt: skip
            return tuple(f"{r}: {note}" if r.endswith(" CardTimeSlicingExhausted") else r
                         for r in self.reasons)  # fmt: skip
        spare = [c for c, u in exhausted if c.memory - u.memory_used >= max(memory_mb, 1)]
        c0, u0 = exhausted[0]
        what = "the slice count, not memory, is exhausted" if spare else "every slice is taken"
        note = (f"{what} ({u0.slices_used}/{c0.split_count} slices used on {c0.uuid}, "
                f"{c0.memory - u0.memory_used} MB free; {_SPLIT_SETTING.get(c0.vendor, _SPLIT_OTHER)} "
                "sets the split count)")  # fmt: skip
        return tuple(f"{r}: {note}" if r.endswith(" CardTimeSlicingExhausted") else r
                     for r in self.reasons)  # fmt: skip


FitResult = NodeFit | NodeMisfit

#: where each vendor's slices per card are set (HAMi's device config / node config)
_SPLIT_SETTING = {
    "nvidia": "the device config's nvidia deviceSplitCount (per node: nodeconfig devicesplitcount)",
    "huawei": "HAMi's per-node vDeviceCount",
}
_SPLIT_OTHER = "the device config's split count"


@dataclass(frozen=True, slots=True)
class TaskDevices:
    """A task's device requests with everything per-pod resolved once (policies, vendors)."""

    requests: tuple[DeviceRequest, ...]
    vendors: tuple[DeviceVendor, ...]
    card_policy: CardPolicy
    node_policy: str
    weights: ScoreWeights
    switches: SchedulingSwitches
    ranker: CardRanker | None = None
    sort_keys: tuple[object, ...] = ()
    #: the pod's policy annotations set aside as HAMi sets them aside, each with why
    ignored: tuple[str, ...] = ()


def prepare_task(
    requests: Sequence[DeviceRequest],
    pod_annotations: Mapping[str, str] | None,
    config: DeviceConfig,
    registry: VendorRegistry,
) -> TaskDevices:
    """Resolve per-pod policy annotations (``hami.io/gpu-scheduler-policy``,
    ``hami.io/node-scheduler-policy``, ``hami.io/device-scoring-weights``). A policy HAMi would
    not read is ignored for the configured one, as HAMi ignores it, and noted in ``ignored``; a
    bad weights value or a bad configured policy raises :class:`PolicyError`."""
    annos = pod_annotations or _EMPTY
    ignored: list[str] = []

    def chosen(key: str, configured: str, problem: Callable[[str], str | None]) -> str:
        own = annos.get(key)
        if own is None:
            return configured
        why = problem(own)
        if why is None:
            return own
        ignored.append(f"pod annotation {key}={own!r} ignored ({why}): the configured "
                       f"{configured} is used")  # fmt: skip
        return configured

    card_policy = parse_card_policy(
        chosen(CARD_POLICY_ANNOTATION, config.card_policy, card_policy_problem)
    )
    node_policy = parse_node_policy(
        chosen(NODE_POLICY_ANNOTATION, config.node_policy, node_policy_problem)
    )
    weights = (
        parse_weights(annos.get(WEIGHTS_ANNOTATION))
        if annos.get(WEIGHTS_ANNOTATION)
        else DEFAULT_WEIGHTS
    )
    vendors = tuple(registry.vendor(r.vendor) for r in requests)
    return TaskDevices(
        requests=tuple(requests),
        vendors=vendors,
        card_policy=card_policy,
        node_policy=node_policy,
        weights=weights,
        # the global hami-core switch: the scheduler's argument, or the device config's
        # `vnpus.hamiVnpuCore` (HAMi reads it for a node without the hami-vnpu-core annotation)
        switches=SchedulingSwitches(
            hami_vnpu_core=config.hami_vnpu_core
            or (config.catalogue_vnpu_core and registry.catalogue.hami_vnpu_core),
            mode_agnostic=config.mode_agnostic,
            templates_share=config.templates_share,
            mig_kept_off=config.mig_kept_off,
            ring_fit=config.ring_fit,
            ring_counts=config.ring_counts,
        ),
        ranker=config.card_ranker,
        sort_keys=tuple(card_sort_key(card_policy, r.numa_bind) for r in requests),
        ignored=tuple(ignored),
    )


#: a card an earlier container of the same pod holds whole: it is that container's own
CARD_TAKEN_BY_POD = "CardUsedByAnotherContainerOfThePod"
#: a card where an earlier container of the same pod took another vNPU template: the device
#: plugin reads the template by card (ascend-device-plugin's runtime info is keyed by UUID), so
#: both containers would be carved one template, the wrong size for one of them. Slices of one
#: template share a card, as HAMi places them (`fitInDevices` → `AddResourceUsage`).
CARD_OTHER_TEMPLATE = "CardHoldsAnotherTemplateOfThePod"


def _aggregate(counts: dict[str, int], total: int) -> tuple[str, ...]:
    return tuple(sorted(f"{n}/{total} {reason}" for reason, n in counts.items()))


def _type_filters_ok(card_type: str, req: DeviceRequest) -> bool:
    low = card_type.lower()
    if req.use_types and not any(t.lower() in low for t in req.use_types):
        return False
    return not any(t.lower() in low for t in req.nouse_types)


def fit_node(
    task: TaskDevices,
    cards: Sequence[tuple[CardSpec, CardUsage]],
    node_annotations: Mapping[str, str] | None = None,
) -> FitResult:
    """Fit ``task`` on one node's cards (spec + current ledger usage). Pure and deterministic."""
    if not task.requests:
        return NodeFit((), node_score(cards) if cards else 0.0)
    node_annos = node_annotations or _EMPTY
    cordon_raw = node_annos.get(CORDON_ANNOTATION)
    cordoned = frozenset(u.strip() for u in cordon_raw.split(",")) if cordon_raw else frozenset()
    # per-card usage this task adds as it goes: uuid -> (slots, cores, memory)
    added: dict[str, tuple[int, int, int]] = {}
    added_slices: dict[str, SliceSpec] = {}  # card → the slice an earlier ask took there
    added_mig: dict[str, tuple[MigInstance, ...]] = {}  # MIG card → instances this task took
    assignments: list[CardAssignment] = []
    bonus = 0.0
    topology = 0
    weights = task.weights
    share = task.switches.templates_share
    mutex = task.card_policy.mutex
    for ri, req in enumerate(task.requests):
        vendor = task.vendors[ri]
        vcards = [(s, u) for s, u in cards if s.vendor == req.vendor]
        total = len(vcards)
        gate = vendor.node_gate(req, node_annos, task.switches)
        if isinstance(gate, str):
            return NodeMisfit((f"{total}/{total} {gate}",))
        if req.count > total:
            return NodeMisfit((f"{total}/{total} NodeInsufficientDevice",))
        # score each card on its current usage (incl. this task's earlier slices), then sort
        single = (req,)
        scored: list[ScoredCard] = []
        usage_of: dict[str, tuple[int, int, int, bool, bool]] = {}
        mig_held: dict[str, tuple[MigInstance, ...]] = {}  # carved MIG card → its instances
        mig_plan: dict[str, mig.Slot] = {}
        for spec, usage in vcards:
            if mig.carved(spec):
                mig_held[spec.uuid] = mig.usage_instances(usage) + added_mig.get(spec.uuid, ())
            used, cores_used, mem_used = usage.slices_used, usage.cores_used, usage.memory_used
            if added:
                extra = added.get(spec.uuid)
                if extra is not None:
                    used += extra[0]
                    cores_used += extra[1]
                    mem_used += extra[2]
            usage_of[spec.uuid] = (
                used,
                cores_used,
                mem_used,
                usage.exclusive,
                usage.healthy and not usage.retired,
            )
            scored.append(
                (device_score(spec, used, cores_used, mem_used, single, weights), used, spec)
            )
        if task.ranker is not None:
            ordered = task.ranker(scored, req.numa_bind)
        else:
            ordered = sorted(scored, key=task.sort_keys[ri])  # type: ignore[arg-type]
        reasons: dict[str, int] = {}
        card_reasons: list[tuple[str, str]] = []
        fitting: list[CardSpec] = []
        plan: dict[str, tuple[int, int]] = {}
        use_uuids, nouse_uuids = req.use_uuids, req.nouse_uuids
        for i in range(len(ordered) - 1, -1, -1):  # HAMi walks the sorted list backwards
            spec = ordered[i][2]
            uuid = spec.uuid
            prior = added_slices.get(uuid) if added_slices else None
            if prior is not None and (prior.kind == "whole" if share else prior.kind != "soft"):
                # an earlier container's whole card is its own (and, by the rules before
                # generation 1, its template vNPU too)
                reasons[CARD_TAKEN_BY_POD] = reasons.get(CARD_TAKEN_BY_POD, 0) + 1
                card_reasons.append((uuid, CARD_TAKEN_BY_POD))
                continue
            used, cores_used, mem_used, exclusive, healthy = usage_of[uuid]
            reason = _card_reason(
                spec, req, vendor, gate, used, cores_used, mem_used, exclusive, healthy,
                uuid in cordoned, use_uuids, nouse_uuids, mutex, plan,
                mig_held.get(uuid), mig_plan, task.switches.mig_kept_off,
            )  # fmt: skip
            if reason is None and prior is not None and prior.kind == "template":
                mem, cores = plan[uuid]
                if vendor.make_slice(spec, req, gate, mem, cores).template != prior.template:
                    reason = CARD_OTHER_TEMPLATE
            if reason is None:
                fitting.append(spec)
            else:
                reasons[reason] = reasons.get(reason, 0) + 1
                card_reasons.append((uuid, reason))
        chosen = _select(vendor, req, fitting, reasons, task.switches)
        if isinstance(chosen, str):
            if chosen:
                reasons[chosen] = reasons.get(chosen, 0) + len(fitting)
            return NodeMisfit(_aggregate(reasons, total), tuple(card_reasons))
        for spec in chosen:
            mem, cores = plan[spec.uuid]
            s = vendor.make_slice(spec, req, gate, mem, cores)
            slot = mig_plan.get(spec.uuid)
            if slot is not None:  # the MIG instance the slice is carved as (HAMi AddResourceUsage)
                s = SliceSpec(kind="soft", memory=slot.memory, cores=slot.cores,
                              exclusive=s.exclusive, mig=(slot.instance,))  # fmt: skip
                added_mig[spec.uuid] = (*added_mig.get(spec.uuid, ()), slot.instance)
            assignments.append(CardAssignment(spec.uuid, s, ri))
            # another container's ask may take the same card (HAMi fits each container on its
            # own, its usage added first: `fitInDevices` → `AddResourceUsage`); the ledger books
            # the two as one slice of their sum (`ledger.per_card`)
            had = added.get(spec.uuid, (0, 0, 0))
            added[spec.uuid] = (had[0] + 1, had[1] + s.cores, had[2] + s.memory)
            added_slices[spec.uuid] = s
        bonus += vendor.node_bonus(chosen, req)
        kind = chosen[0].type if chosen else ""
        topology += vendor.topology_score([c for c in fitting if c.type == kind], chosen, req)
    return NodeFit(tuple(assignments), node_score(cards) + bonus, topology=topology)


def pod_share_words(task: TaskDevices, codes: str, cards: Sequence[CardSpec]) -> tuple[str, str] | None:
    """Why the pod's containers cannot share this node's cards, in words, and what would let
    them (None when that is not the reason): vNPUs of different templates
    (`CARD_OTHER_TEMPLATE`), or a card held whole by one container (`CARD_TAKEN_BY_POD`)."""
    templates = CARD_OTHER_TEMPLATE in codes
    if not templates and CARD_TAKEN_BY_POD not in codes:
        return None
    groups: dict[str, list[DeviceRequest]] = {}
    for r in task.requests:
        groups.setdefault(r.type or r.vendor, []).append(r)
    for kind, mine in groups.items():
        if len(mine) < 2:
            continue
        types = mine[0].allowed_types or (mine[0].type,)
        n = sum(1 for c in cards if c.vendor == mine[0].vendor and c.type in types)
        slices = [r for r in mine if not r.exclusive]
        sizes = sorted({r.template or f"{r.memory} MB" for r in slices})
        if templates and len(sizes) > 1:
            largest = max(r.memory for r in slices)
            return (f"{kind}: the pod's containers ask different vNPU templates ({', '.join(sizes)}), and "
                    "one card carves one template for a pod (the device plugin reads the template by "
                    f"card), so each template needs a card of its own: {len(sizes)} {kind} cards, the "
                    f"node has {n} [{codes}]",
                    f"ask one template size in every container ({largest} MB each: slices of one "
                    f"template share a card), or run the pod on a node with {len(sizes)} free {kind} "
                    "cards")  # fmt: skip
        if not templates and len(slices) < len(mine):
            return (f"{kind}: the pod's containers ask {sum(r.count for r in mine)} cards together and "
                    f"a whole card is its container's own, the node has {n} [{codes}]",
                    f"run the pod on a node with more free {kind} cards, or ask vNPU slices "
                    "(a -memory amount) in the containers that can share a card")  # fmt: skip
    return None


def card_mismatch(vendor: DeviceVendor, spec: CardSpec, req: DeviceRequest) -> str | None:
    """The card's type/mode against the request: the vendor's rule, or for a card of the
    vendor's own plugin (`mode: plugin`) the name it is served under and whole cards only."""
    if spec.mode == PLUGIN:
        return plugin_card_reason(spec, req)
    return vendor.card_reason(spec, req)


def _card_reason(
    spec: CardSpec,
    req: DeviceRequest,
    vendor: DeviceVendor,
    gate: NodeGate,
    used: int,
    cores_used: int,
    mem_used: int,
    exclusive: bool,
    healthy: bool,
    cordoned: bool,
    use_uuids: tuple[str, ...],
    nouse_uuids: tuple[str, ...],
    mutex: bool,
    plan: dict[str, tuple[int, int]],
    mig_held: tuple[MigInstance, ...] | None = None,
    mig_plan: dict[str, mig.Slot] | None = None,
    mig_kept_off: bool = True,
) -> str | None:
    """HAMi's per-card checks in order; on success records (memory, cores) in ``plan``. On a
    MIG card with geometries (``mig_held``: the instances on it) HAMi's ``CustomFilterRule``
    comes last: the smallest profile with a free placement (``CardMigTopologyInfeasible``
    without one), whose memory and cores are what is booked (``AddResourceUsage``)."""
    if not (healthy and spec.healthy):
        return "CardNotHealth"
    if cordoned:
        return "CardCordoned"
    mismatch = card_mismatch(vendor, spec, req)
    if mismatch == mig.CARD_IN_MIG_MODE and not mig_kept_off:
        mismatch = None  # (rules before generation 2 booked it as a soft card)
    if mismatch is not None:
        return mismatch
    if (req.use_types or req.nouse_types) and not _type_filters_ok(spec.type, req):
        return "CardTypeMismatch"
    if (use_uuids and spec.uuid not in use_uuids) or (nouse_uuids and spec.uuid in nouse_uuids):
        return "CardUuidMismatch"
    if spec.split_count <= used:
        return "CardTimeSlicingExhausted"
    if mutex and used > 0:
        return "ExclusiveDeviceAllocateConflict"
    cores = vendor.core_request(spec, req, gate)
    memory = vendor.memory_request(spec, req)
    if spec.memory - mem_used < memory:
        return "CardInsufficientMemory"
    capacity = vendor.core_capacity(spec, gate)
    if capacity - cores_used < cores:
        return "CardInsufficientCore"
    if used > 0 and capacity > 0 and cores >= capacity:  # the request wants the card alone
        return "ExclusiveDeviceAllocateConflict"
    if cores == 0 and cores_used >= capacity:  # before the holder's flag, as HAMi has no flag
        return "CardComputeUnitsExhausted"
    if used > 0 and exclusive:  # the card's holder has it alone
        return "ExclusiveDeviceAllocateConflict"
    if mig_held is not None:
        slot = mig.pick(spec, mig_held, memory)
        if slot is None:
            return mig.MIG_INFEASIBLE
        if spec.memory - mem_used < slot.memory:  # the profile books more than was asked
            return "CardInsufficientMemory"
        if capacity - cores_used < slot.cores:
            return "CardInsufficientCore"
        memory, cores = slot.memory, slot.cores
        if mig_plan is not None:
            mig_plan[spec.uuid] = slot
    plan[spec.uuid] = (memory, cores)
    return None


def _select(
    vendor: DeviceVendor,
    req: DeviceRequest,
    fitting: list[CardSpec],
    reasons: dict[str, int],
    switches: SchedulingSwitches,
) -> Sequence[CardSpec] | str:
    """Topology-aware choice among the fitting cards; per card type (alias requests may span
    models), per NUMA node under numa-bind. A string is the failure reason ("" = none extra)."""
    if not fitting:
        return ""
    by_type: dict[str, list[CardSpec]] = {}
    for c in fitting:
        by_type.setdefault(c.type, []).append(c)
    last = ""
    for group in by_type.values():
        needed = vendor.cards_needed(group[0], req, switches)
        if isinstance(needed, str):
            last = needed
            continue
        if len(group) < needed:
            last = last or ("" if reasons else "AllocatedCardsInsufficientRequest")
            continue
        if req.numa_bind:
            by_numa: dict[int, list[CardSpec]] = {}
            for c in group:
                by_numa.setdefault(c.numa, []).append(c)
            for members in by_numa.values():
                if len(members) >= needed:
                    got = vendor.select(members, needed, req, switches)
                    if not isinstance(got, str):
                        return got
                    last = got
            last = last or "NumaNotFit"
            continue
        got = vendor.select(group, needed, req, switches)
        if not isinstance(got, str):
            return got
        last = got
    return last


def fit_task(
    cards: Sequence[tuple[CardSpec, CardUsage]],
    requests: Sequence[DeviceRequest],
    *,
    registry: VendorRegistry,
    config: DeviceConfig | None = None,
    node_annotations: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
) -> FitResult:
    """One-shot convenience: :func:`prepare_task` then :func:`fit_node`."""
    task = prepare_task(requests, pod_annotations, config or DeviceConfig(), registry)
    return fit_node(task, cards, node_annotations)


def choose_node(
    results: Sequence[tuple[str, FitResult]], node_policy: str = "binpack"
) -> str | None:
    """HAMi node order: binpack → the highest score, spread → the lowest; among equal scores the
    last node in input order wins (stable sort, last element taken). None if nothing fits."""
    best: str | None = None
    best_key = 0.0
    for name, r in results:
        if not isinstance(r, NodeFit):
            continue
        key = -r.score if node_policy == "spread" else r.score
        if best is None or key >= best_key:
            best, best_key = name, key
    return best


__all__ = [
    "CardAssignment",
    "DeviceConfig",
    "FitResult",
    "NodeFit",
    "NodeMisfit",
    "PolicyError",
    "TaskDevices",
    "choose_node",
    "fit_node",
    "fit_task",
    "pod_share_words",
    "prepare_task",
]
