"""`deviceshare` (Volcano `plugins/deviceshare`, volcano.md §3): accelerator sharing through the
device layer (`services.core.devices`: HAMi per-card fit, reasons, card policies, node score).

Predicate: the task's device requests must fit the node's cards (HAMi reasons aggregated per
node, e.g. `"2/2 CardInsufficientMemory"`). NodeOrder: only when `deviceshare.ScheduleWeight`
> 0 (Volcano), the device layer's node score under the node policy × weight. The card choice
made by the predicate is what the session books (Volcano books it in the predicates plugin's
allocate handler). Arguments: `deviceshare.SchedulePolicy` (card policy: binpack | spread |
HAMi chains; or a placement policy `fgd` | `fgd-exact` | `tessera`, see below),
`deviceshare.ScheduleWeight`,
`deviceshare.NodeSchedulePolicy` (Tessera: HAMi's node policy, default binpack),
`deviceshare.VGPUEnable` / `deviceshare.AscendHAMiVNPUEnable` (vendor switches),
`deviceshare.HamiVnpuCore`. Per-pod `hami.io/gpu-scheduler-policy` and
`hami.io/node-scheduler-policy` override them for that pod; a value HAMi would not read
(`binpak`) is ignored for the configured policy, as HAMi ignores it (admission warns, the
cards' explanation says so).

Placement policies (`deviceshare.SchedulePolicy: tessera | fgd | fgd-exact`): node *and* card
choice come from `services.core.placement`, the same `Policy.evaluate` the openb replay drives
(`benchmarks/openb.py`). NodeOrder then scores every task, CPU-only ones included (where they go
decides how much card capacity CPU strands), as ScheduleWeight (1 if unset) × the policy's
score, with ties going to the earlier node in inventory order (the replay's first-in-order
rule); the card(s) the policy picked on the chosen node are tried first at bind time, still
under HAMi's checks. The predicate stays HAMi's fit. The target workload is derived from the
session's tasks (`placementrank.session_workload`). For the policy to decide alone, it must be
the only node-order plugin of the configuration (or outweigh the others); tasks the placement
model cannot express (several device requests, template slices) keep HAMi's order. One
difference from the replay remains on purpose: on clusters of 100+ nodes the session scores only
Volcano's sample of feasible nodes (`actions/nodes.num_to_find`), the replay scores them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache

from contracts.devices import CardSpec, CardUsage
from contracts.events import SliceAssignment
from contracts.workloads import DeviceRequest
from services.core.devices import (
    DeviceConfig,
    NodeFit,
    PolicyError,
    TaskDevices,
    VendorRegistry,
    ascend,
    build_vendors,
    fit_node,
    mig,
    nvidia,
    prepare_task,
    registration,
)
from services.core.devices.ascend import (
    RING_BOUND,
    RING_COUNTS,
    RING_COUNTS_WORDS,
    RING_NOT_FIT,
    RING_SIZE,
    ring_count_why,
    ring_groups,
)
from services.core.devices.fit import card_mismatch, pod_share_words
from services.core.devices.mig import (
    CARD_IN_MIG_MODE,
    MIG_INFEASIBLE,
    MIG_MODE,
    MIG_WORDS,
    mig_words,
)
from services.core.devices.nvidia import VENDOR as NVIDIA
from services.core.devices.policies import (
    CARD_POLICY_ANNOTATION,
    PLACEMENT_POLICIES,
    node_preference,
)
from services.core.devices.score import device_score, request_memory_on
from services.core.devices.vendor import DeviceVendor
from services.core.placement import POLICIES, Policy, Request, fits
from services.core.scheduling.config import (
    DEVICE_SWITCHES,
    MIG_KEPT_OFF,
    RING_COUNT_FIT,
    RING_FIT,
    RING_RANK,
    RULES,
    PluginConf,
    deviceshare_vendors,
    flag,
)
from services.core.scheduling.model import CardInfo, NodeInfo, TaskInfo
from services.core.scheduling.plugins.placementrank import (
    ClusterCards,
    node_view,
    placement_ranker,
    preferring,
    session_workload,
)
from services.core.scheduling.session import Session
from services.core.scheduling.status import Code, Status, unresolvable, unschedulable

INF = float("inf")
#: the size of "another node, or fewer cards": any fix that frees cards on a node wins over it
NO_ROOM = 1e9


@cache
def default_vendors() -> VendorRegistry:
    return build_vendors()


#: every device family deviceshare can book
_FAMILIES = frozenset(DEVICE_SWITCHES)


def vendor_off(vendor: str) -> str:
    """A request of a family the configuration leaves off, in words that name the switch: the
    rules before generation 1 refused it (from then on its count is fitted whole by count)."""
    switch, family = DEVICE_SWITCHES.get(vendor, (f"the {vendor} switch", vendor))
    return f"{family} devices are off: set {switch}: true [device vendor {vendor} is not enabled]"


#: the pod annotation that asks a card mode, per vendor (HAMi's names)
MODE_ANNOTATIONS = {nvidia.VENDOR: nvidia.VGPU_MODE, ascend.VENDOR: ascend.VNPU_MODE}


def runtime_class_missing(task: TaskInfo, vendors: VendorRegistry) -> str | None:
    """A pod asking HAMi's NVIDIA names with no `spec.runtimeClassName` while the device config
    names one: HAMi's webhook sets it there (`MutateAdmission`; a pod's own runtime class, any,
    is kept), so such a pod runs under the node's default runtime, runc, without its GPUs. Tessera
    has no webhook and a created pod's spec cannot change: the pod waits, saying what to set."""
    if task.spec.runtime_class:
        return None
    try:
        config = vendors.vendor(NVIDIA).config  # type: ignore[attr-defined]
    except (KeyError, AttributeError):
        return None
    wanted = config.runtime_class_name
    if not wanted or not any(r.vendor == NVIDIA and r.resource == config.resource_count_name
                             for r in task.spec.devices):  # fmt: skip
        return None
    return (f"set spec.runtimeClassName: {wanted}: HAMi's webhook would have set it (device-config "
            "runtimeClassName); Tessera has no webhook and a created pod's spec cannot change")


def counted_names(resource: str, served: Iterable[str]) -> list[str]:
    """The names among `served` a pod of `resource`'s vendor could ask instead: its domain's
    count resources (a `-memory`/`-core` name is no device plugin's), sorted."""
    domain = resource.split("/", 1)[0] + "/"
    return sorted({n for n in served if n.startswith(domain) and not n.endswith(("-memory", "-core"))})


def not_served(resource: str, extended: Sequence[str]) -> str:
    """A node whose kubelet does not serve the resource a pod asks: bound there, the pod would
    be admitted with that ask dropped and start without the card (no device plugin is called
    for a name none registered). What the node's plugins do serve in that domain is the fix."""
    same = counted_names(resource, extended)
    domain = resource.split("/", 1)[0] + "/"
    serves = f"their device plugins serve {', '.join(same)}" if same else f"no device plugin of {domain} runs there"
    return f"node(s) don't serve {resource}: {serves}"


#: NodeOrder: what one step of `NodeFit.topology` (a better HCCS ring fit) adds to a node,
#: before ScheduleWeight: more than HAMi's node score spans (0-30, + 10 per request's ring bonus),
#: so the ring fit decides between nodes and the node policy only among equal fits, as a ring
#: broken for a 1-card pod delays a 4-card one however full the nodes are (rules generation 3)
RING_STEP = 100.0

#: NodeOrder score of a node HAMi admits but the placement model does not (rounding at the edge):
#: below any policy score, so it is only chosen when nothing else fits.
UNFIT_SCORE = -1.0e9


class DeviceSharePlugin:
    name = "deviceshare"

    def __init__(self, conf: PluginConf, vendors: VendorRegistry | None = None) -> None:
        args = conf.arguments
        self.vendors = vendors or default_vendors()
        self.weight = float(args.get("deviceshare.ScheduleWeight", 0) or 0)
        policy = str(args.get("deviceshare.SchedulePolicy") or "spread")
        #: the families it books on cards; the others' counts are the session's node scalars,
        #: whole cards (`config.counted_vendors`), as Volcano fits what deviceshare leaves
        self.enabled_vendors = deviceshare_vendors(args)
        #: it books every family (the common case: each task's devices are all booked, no
        #: subset to build on the predicate / node_order / bind hot path, issue 29)
        self._books_all = self.enabled_vendors >= _FAMILIES
        #: families refused outright, as the rules before generation 1 refused a family whose
        #: switch is off (`on_session_open`); empty from generation 1 on, where they are counted
        self.off_vendors: frozenset[str] = frozenset()
        self._args = args
        ranker = None
        #: the placement policy's name when SchedulePolicy is one; built per session
        self.placement = policy if policy in PLACEMENT_POLICIES else ""
        if self.placement:
            ranker = placement_ranker(policy)
            policy = "spread"
        self.config = DeviceConfig(
            card_policy=policy,
            node_policy=str(args.get("deviceshare.NodeSchedulePolicy") or "binpack"),
            hami_vnpu_core=flag(args.get("deviceshare.HamiVnpuCore")),
            card_ranker=ranker,
        )
        self._prepared: dict[str, TaskDevices | str] = {}
        self._booked_by: dict[str, tuple[DeviceRequest, ...]] = {}  # `_booked`'s, by task uid
        self._fits: dict[tuple[str, str], NodeFit] = {}
        self.policy: Policy | None = None
        self._cluster: ClusterCards | None = None
        self._requests: dict[str, Request | None] = {}
        self._order_scale = 1.0
        self.policy_text = policy if not self.placement else self.placement
        self.ssn: Session | None = None
        #: nodes are ranked by the HCCS ring fit (`RING_STEP`; rules generation 3)
        self.ring_rank = True

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        if ssn.conf.rules < 1:  # a log recorded before rules generation 1 re-runs as it ran
            on = frozenset(v for v, (key, _) in DEVICE_SWITCHES.items() if flag(self._args.get(key)))
            self.off_vendors = _FAMILIES - on if on else frozenset()
            self.enabled_vendors, self._books_all = _FAMILIES, True
            self.config = replace(self.config, catalogue_vnpu_core=False, templates_share=False)
        if ssn.conf.rules < MIG_KEPT_OFF:  # a MIG card was a soft card then (logs of older rules)
            self.config = replace(self.config, mig_kept_off=False)
        if ssn.conf.rules < RING_FIT:  # HAMi's largest-ring-first fill (logs of older rules)
            self.config = replace(self.config, ring_fit=False)
        if ssn.conf.rules < RING_COUNT_FIT:  # a 910A pod of 3, 5-7 cards was placed then
            self.config = replace(self.config, ring_counts=False)
        self.ring_rank = ssn.conf.rules >= RING_RANK
        if ssn.conf.vendors is not None:  # a device-config.yaml given to the scheduler
            self.vendors = ssn.conf.vendors
        ssn.device_binder = self.bind
        if self.placement:
            self._cluster = ClusterCards(ssn.node_list)
            tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
            workload = session_workload(tasks, self._cluster)
            if workload is not None:
                self.policy = POLICIES[self.placement](workload, self._cluster.cards)
            self._order_scale = 1.0 / (len(ssn.snapshot.nodes) + 1)

    def _request(self, task: TaskInfo) -> Request | None:
        if task.uid not in self._requests:
            assert self._cluster is not None
            self._requests[task.uid] = self._cluster.request(task)
        return self._requests[task.uid]

    def placement_score(self, task: TaskInfo, node: NodeInfo) -> float | None:
        """The placement policy's score for ``node`` (higher is better), ties broken towards the
        earlier node; None when the policy does not apply to this task."""
        if self.policy is None:
            return None
        request = self._request(task)
        if request is None:
            return None
        view = node_view(node)
        if not fits(view, request):
            return UNFIT_SCORE  # HAMi's fit let it through; the placement model did not
        score = self.policy.evaluate(view, request).score
        if not isinstance(score, (int, float)):
            raise TypeError(f"{self.placement}: node order needs a scalar score, got {score!r}")
        step = self.policy.score_step
        return float(score) - (step * node.order * self._order_scale if step else 0.0)

    def placement_cards(self, task: TaskInfo, node: NodeInfo) -> tuple[str, ...]:
        """Uuids of the cards the placement policy takes on ``node`` (empty: no opinion)."""
        request = self._request(task) if self.policy is not None else None
        if request is None or not request.num_cards:
            return ()
        view = node_view(node)
        if not fits(view, request):
            return ()
        assert self.policy is not None
        cards = self.policy.evaluate(view, request).cards
        return tuple(node.cards[i].spec.uuid for i in cards)

    def _booked(self, task: TaskInfo) -> tuple[DeviceRequest, ...]:
        """The task's device requests of the families this plugin books (the others' counts
        are fitted as node scalars by the session)."""
        devices = task.spec.devices
        if not devices or self._books_all:
            return devices
        got = self._booked_by.get(task.uid)
        if got is None:
            got = self._booked_by[task.uid] = tuple(d for d in devices if d.vendor in self.enabled_vendors)
        return got

    def _task(self, task: TaskInfo) -> TaskDevices | str:
        got = self._prepared.get(task.uid)
        if got is None:
            # (the pod's own, alike on every node: judged once per task, not per node)
            got = runtime_class_missing(task, self.vendors)
            if got is None:
                try:
                    got = prepare_task(
                        self._booked(task), task.spec.annotations, self.config, self.vendors
                    )
                except (PolicyError, KeyError) as exc:
                    got = str(exc)
            self._prepared[task.uid] = got
        return got

    def _cards(
        self, node: NodeInfo, future: bool = False, without: Sequence[TaskInfo] = ()
    ) -> list[tuple[CardSpec, CardUsage]]:
        if self.ssn is None:
            return [(c.spec, c.usage) for c in node.cards]
        return self.ssn.card_view(node, future, without)

    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        return self._fit(task, node, self._cards(node), keep=True)

    def predicate_future(
        self, task: TaskInfo, node: NodeInfo, without: Sequence[TaskInfo] = ()
    ) -> Status | None:
        """The fit on the node's future cards (`Session.card_view`): what preempt and reclaim
        need to know before and after evicting, where the cards of Releasing tasks are free."""
        return self._fit(task, node, self._cards(node, True, without), keep=False)

    def _fit(
        self, task: TaskInfo, node: NodeInfo, cards: list[tuple[CardSpec, CardUsage]], keep: bool
    ) -> Status | None:
        if not task.spec.devices:
            return None
        booked = task.spec.devices if self._books_all else self._booked(task)
        if not booked:
            return None
        for req in booked:
            if self.off_vendors and req.vendor in self.off_vendors:
                return unresolvable(self.name, vendor_off(req.vendor))
            if node.extended is not None and req.resource and req.resource not in node.extended \
                    and any(c.spec.vendor == req.vendor for c in node.cards):  # (else: no such cards)
                return unresolvable(self.name, not_served(req.resource, node.extended))
            if not registration.whole_card(req) and any(
                    c.spec.mode == registration.PLUGIN and c.spec.resource == req.resource for c in node.cards):
                return unresolvable(self.name, registration.slices_need_registration(node.name, req))
        prepared = self._task(task)
        if isinstance(prepared, str):
            return unresolvable(self.name, prepared)
        result = fit_node(prepared, cards, node.annotations)
        if not isinstance(result, NodeFit):
            need = max((r.memory for r in task.spec.devices), default=0)
            return unschedulable(self.name, *result.explained(cards, need))
        if keep:  # node_order scores the fit of the cards as they are now
            self._fits[(task.uid, node.name)] = result
        return None

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        if self.placement:
            score = self.placement_score(task, node)
            if score is not None:
                return score * (self.weight if self.weight > 0 else 1.0)
        if self.weight <= 0 or not task.spec.devices or not (self._books_all or self._booked(task)):
            return 0.0
        fit = self._fits.get((task.uid, node.name))
        prepared = self._task(task)
        if fit is None or isinstance(prepared, str):
            return 0.0
        score = node_preference(prepared.node_policy, fit.score)
        if fit.topology and self.ring_rank:
            score += RING_STEP * fit.topology
        return score * self.weight

    def bind(
        self, task: TaskInfo, node: NodeInfo, future: bool = False
    ) -> tuple[SliceAssignment, ...]:
        """The task's cards on the node; `future`: chosen among the future view's cards (a task
        pipelined behind evictions), so they never overlap a slice a remaining task holds."""
        if not task.spec.devices or not (self._books_all or self._booked(task)):
            return ()
        prepared = self._task(task)
        if isinstance(prepared, str):
            return ()
        chosen = self.placement_cards(task, node) if self.placement else ()
        if chosen and prepared.ranker is not None:
            prepared = replace(prepared, ranker=preferring(chosen, prepared.ranker))
        result = fit_node(prepared, self._cards(node, future), node.annotations)
        self._fits.clear()
        if not isinstance(result, NodeFit):
            return ()
        seqs = {c.spec.uuid: c.seq for c in node.cards}
        if self.ssn is not None:
            self.ssn.cards_why[task.uid] = self._cards_why(task, prepared, node, result, chosen)
        return tuple(
            SliceAssignment(card=a.card, node=node.name, slice=a.slice, expected_seq=seqs[a.card])
            for a in result.assignments
        )

    # --- explanations (words for people; the decisions never read them) ---------------------

    def _cards_why(
        self, task: TaskInfo, prepared: TaskDevices, node: NodeInfo, result: NodeFit,
        placed: tuple[str, ...],
    ) -> str:  # fmt: skip
        """The card policy that ordered the cards, where it was set, and each chosen card's
        HAMi score before the booking (higher = fuller; binpack tries the fullest first)."""
        own = task.spec.annotations.get(CARD_POLICY_ANNOTATION)
        set_aside = [n for n in prepared.ignored if CARD_POLICY_ANNOTATION in n]
        where = (f"pod annotation {CARD_POLICY_ANNOTATION}" if own and not set_aside
                 else "deviceshare.SchedulePolicy")  # fmt: skip
        keys = prepared.card_policy.keys
        order = ("fullest fitting card first" if keys[:1] == ("binpack",)
                 else "emptiest card first" if keys[:1] == ("spread",) else "cards in policy order")  # fmt: skip
        if placed:
            order = f"the {self.placement} placement policy's cards first"
        by_uuid = {c.spec.uuid: c for c in node.cards}
        cards = []
        for a in result.assignments:
            c = by_uuid[a.card]
            req = prepared.requests[a.request]
            u = c.usage
            score = device_score(c.spec, u.slices_used, u.cores_used, u.memory_used, (req,),
                                 prepared.weights)  # fmt: skip
            cards.append(f"{a.card} (index {c.spec.index}, score {score:.1f}, "
                         f"{c.spec.memory - u.memory_used} MB free)")  # fmt: skip
        policy = prepared.card_policy.text if not placed else self.placement
        notes = "".join(f"; {n}" for n in prepared.ignored)
        return f"card policy {policy} ({where}): {order}; took " + ", ".join(cards) + notes

    def explain_node(self, task: TaskInfo, node: NodeInfo) -> tuple[str, str, float] | None:
        """Why the task's cards do not fit this node, in words (asked, free, of how many),
        HAMi's codes in brackets, with the smallest change that would make them fit there and
        its size; None when they fit."""
        status = self.predicate(task, node)
        if status is None or status.ok:
            return None
        prepared = self._task(task)
        if isinstance(prepared, str) or status.code != Code.UNSCHEDULABLE:
            return status.message(), "", INF
        codes = status.message()
        rules = self.ssn.conf.rules if self.ssn is not None else RULES
        for ri, req in enumerate(prepared.requests):
            vendor = prepared.vendors[ri]
            fits = (None,) if prepared.switches.mig_kept_off else (None, CARD_IN_MIG_MODE)
            mine = [c for c in node.cards
                    if c.spec.vendor == req.vendor and card_mismatch(vendor, c.spec, req) in fits]  # fmt: skip
            kind = req.type or req.vendor
            if not mine:
                if CARD_IN_MIG_MODE in codes:
                    return mig_words(kind, [c.spec for c in node.cards if c.spec.vendor == req.vendor], codes)
                modes = sorted({c.spec.mode or "(none)" for c in node.cards if c.spec.vendor == req.vendor})
                if req.mode and modes and req.mode not in modes:  # the cards are there, in another mode
                    if req.mode == MIG_MODE:  # no node serves it: asking for one would not help
                        return (f"{kind}: the pod asks cards in mig mode, the node's run {', '.join(modes)} "
                                f"[{codes}]", f"drop the pod's {MODE_ANNOTATIONS.get(req.vendor, 'mode annotation')}: "
                                f"mig ({MIG_WORDS}, on any node)", INF)  # fmt: skip
                    return (f"{kind}: the pod asks cards in {req.mode} mode, the node's run {', '.join(modes)} "
                            f"[{codes}]", f"drop the pod's {MODE_ANNOTATIONS.get(req.vendor, 'mode annotation')}: "
                            f"{req.mode}, or add a node whose cards run {req.mode}", INF)  # fmt: skip
                have = ", ".join(sorted({c.spec.type for c in node.cards})) or "no cards"
                return f"has no {kind} card (it has {have}) [{codes}]", "", INF
            if rules >= RING_COUNT_FIT and req.count not in RING_COUNTS and \
                    all(c.spec.type in RING_BOUND for c in mine):  # (no freeing helps)
                return _ring_count_words(kind, req, mine[0].spec.type, codes)
            healthy = [c for c in mine if c.spec.healthy and c.usage.healthy and not c.usage.retired]
            plural = "s" if req.count > 1 else ""
            carved = [c for c in healthy if mig.carved(c.spec)]
            if carved and MIG_INFEASIBLE in codes:
                ok = sum(1 for c in carved if mig.pick(c.spec, mig.usage_instances(c.usage),
                                                         request_memory_on(c.spec.memory, req)) is not None)  # fmt: skip
                if ok < req.count:
                    amount = f"{req.memory} MB" if req.memory else f"{req.memory_pct}% of its memory"
                    held = "; ".join(f"{c.spec.uuid} holds {mig.card_note(c.spec, c.usage).removeprefix('MIG: ')}"
                                     for c in carved)  # fmt: skip
                    return (f"{kind}: asked {req.count} MIG instance{plural} of {amount}, no allowed "
                            f"profile holding it has a free placement on {len(carved) - ok} of "
                            f"{len(carved)} MIG cards ({held}) [{codes}]",
                            f"wait for a MIG instance on {node.name} to be released (the card's "
                            "knownMigGeometries decide which profiles fit beside the others)",
                            float(req.count - ok))  # fmt: skip
            if req.count > len(mine):  # no freeing helps here: the advice is another node or fewer
                return (f"{kind}: asked {req.count} card{plural}, more than the node has ({len(mine)}) "
                        f"[{codes}]", f"ask for at most {len(mine)} {kind} cards per pod, or add a node "
                        f"with {req.count}", NO_ROOM)  # fmt: skip
            if req.exclusive:
                free = sum(1 for c in healthy if c.usage.slices_used == 0)
                if free >= req.count:
                    if RING_NOT_FIT in codes:
                        return _ring_words(kind, req, healthy, node.name, codes)
                    continue
                short = req.count - free
                return (f"{kind}: asked {req.count} whole card{plural}, {free} of {len(mine)} free "
                        f"[{codes}]", f"free {short} {kind} card{'s' if short > 1 else ''} on "
                        f"{node.name}", float(short))  # fmt: skip
            room = [(c.spec.memory - c.usage.memory_used, request_memory_on(c.spec.memory, req))
                    for c in healthy
                    if c.usage.slices_used < c.spec.split_count and not c.usage.exclusive]  # fmt: skip
            ok = sum(1 for free_mb, need in room if free_mb >= need)
            amount = f"{req.memory} MB" if req.memory else f"{req.memory_pct}% of its memory"
            cores = f" and {req.cores}% cores" if req.cores else ""
            if rules >= 2:
                short = _cores_short(vendor, req, healthy, node, prepared,
                                     f"{kind}: asked {req.count} card{plural} with {amount}{cores}", codes)  # fmt: skip
                if short is not None:
                    return short
            if ok >= req.count:
                continue
            most = max((free_mb for free_mb, _ in room), default=0)
            need_mb = max((need for _, need in room), default=req.memory)
            largest = max(c.spec.memory for c in mine)
            if request_memory_on(largest, req) > largest:  # no freeing makes room on these cards
                return (f"{kind}: asked {req.count} card{plural} with {amount}{cores}, more than "
                        f"any card here holds ({largest} MB) [{codes}]", "", INF)  # fmt: skip
            fix = (f"free {need_mb - most} MB on one more {kind} card of {node.name}" if room
                   else f"free a slice of a {kind} card on {node.name}")  # fmt: skip
            return (f"{kind}: asked {req.count} card{plural} with {amount}{cores}, {ok} of "
                    f"{len(mine)} have that free (most free: {most} MB) [{codes}]", fix,
                    float(req.count - ok))  # fmt: skip
        shared = (pod_share_words(prepared, codes, [c.spec for c in node.cards])
                  if prepared.switches.templates_share else None)  # (words of rules generation 1)
        return (*shared, NO_ROOM) if shared else (codes, "", INF)


def _ring_count_words(kind: str, req: DeviceRequest, chip: str, codes: str) -> tuple[str, str, float]:
    """A pod whose count a ring-bound chip's rings cannot serve (rules generation 3): admission
    refuses it when the resource names the chip; a family name's pod learns the model here."""
    other = (f"; or run it where other {kind} models are (their pods may take {req.count})"
             if req.allowed_types and set(req.allowed_types) - RING_BOUND else "")  # fmt: skip
    return (f"{kind}: asked {req.count} cards, and the node's are {chip}, where a pod asks "
            f"{RING_COUNTS_WORDS} ({ring_count_why(chip)}) [{codes}]",
            f"ask {RING_COUNTS_WORDS} cards per pod{other}", NO_ROOM)  # fmt: skip


def _ring_words(kind: str, req: DeviceRequest, healthy: Sequence[CardInfo], node: str,
                codes: str) -> tuple[str, str, float]:  # fmt: skip
    """A 910A pod of <= 4 whole cards whose free cards are there but in both HCCS rings
    (`ascend.RING_NOT_FIT`): each ring's free cards, and the fewest to free in one ring."""
    rings = ring_groups([c.spec for c in healthy])
    free = {r: sum(1 for c in healthy if c.spec.network_id == r and c.usage.slices_used == 0)
            for r in rings}  # fmt: skip
    each = "; ".join(f"ring {r}, cards {min(c.index for c in g)}-{max(c.index for c in g)}: "
                     f"{free[r]} free" for r, g in sorted(rings.items()))  # fmt: skip
    room = [(req.count - free[r], r) for r, g in sorted(rings.items()) if len(g) >= req.count]
    short, ring = min(room) if room else (req.count, 0)
    return (f"{kind}: asked {req.count} whole cards in one HCCS ring, {sum(free.values())} free "
            f"but no ring has {req.count} ({each}); chips of different rings cannot talk, so a pod "
            f"of up to {RING_SIZE} sits in one ring, as ascend-for-volcano places it [{codes}]",
            f"free {short} {kind} card{'s' if short > 1 else ''} of ring {ring} on {node}",
            float(short))  # fmt: skip


def _cores_short(vendor: DeviceVendor, req: DeviceRequest, healthy: Sequence[CardInfo], node: NodeInfo,
                 prepared: TaskDevices, asked: str, codes: str) -> tuple[str, str, float] | None:  # fmt: skip
    """The words for cards whose memory has room but whose cores do not (rules generation 2):
    held alone by a pod asking all their cores (`gpucores: 100`), or with fewer cores left than
    asked — HAMi's CardInsufficientCore, or CardComputeUnitsExhausted for a pod asking no cores
    on a card whose cores are all used. The memory words said "0 of 1 have that free (most
    free: 0 MB)" of a card with 14 GB free. None when cores are not what is short."""
    gate = vendor.node_gate(req, node.annotations, prepared.switches)
    if isinstance(gate, str):
        return None
    open_cards = [c for c in healthy if c.usage.slices_used < c.spec.split_count]
    memory_fits = [c for c in open_cards
                   if c.spec.memory - c.usage.memory_used >= request_memory_on(c.spec.memory, req)]  # fmt: skip

    def left(c: CardInfo) -> tuple[int, int]:
        cap = vendor.core_capacity(c.spec, gate)
        return cap - c.usage.cores_used, cap

    def cores_fit(c: CardInfo) -> bool:
        free, _ = left(c)
        need = vendor.core_request(c.spec, req, gate)
        return not c.usage.exclusive and need <= free and not (need == 0 and free <= 0)

    fitting = sum(1 for c in memory_fits if cores_fit(c))
    if fitting >= req.count or len(memory_fits) < req.count:
        return None  # memory (or something else) is what is short
    blocked = [c for c in memory_fits if not cores_fit(c)]
    free, cap = max(left(c) for c in blocked)
    held = sum(1 for c in blocked if c.usage.exclusive)
    notes = f"; {held} held alone by a pod asking all its cores" if held else ""
    if not req.cores:
        notes += "; a pod asking no cores does not share a card whose cores are all used"
    words = (f"{asked}, {fitting} of {len(blocked) + fitting} with that memory free have the cores "
             f"(most free: {free} of {cap} cores{notes}) [{codes}]")
    kind = req.type or req.vendor
    fix = (f"let a pod holding a {kind} card of {node.name} alone finish" if held
           else f"free the cores of one more {kind} card on {node.name}")
    return words, fix, float(req.count - fitting)
