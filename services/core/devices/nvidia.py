"""NVIDIA vGPU (HAMi ``nvidia.com/*`` and Volcano ``volcano.sh/vgpu-*`` names).

Request rules (hami.md §1.2, ``GenerateResourceRequests`` + ``MutateAdmission``):

* values come from limits first, then requests; ``gpumem`` is multiplied by ``memoryFactor``
  (Volcano's ``gpuMemoryFactor``, see ``NvidiaConfig``);
* ``gpumem``/``gpucores``/``gpumem-percentage`` without a count get ``defaultGPUNum`` cards;
* percentage: 101 is HAMi's "unset" sentinel; 0 means unset; HAMi's name
  (``resourceMemoryPercentageName``) outside 0..100 is refused, as HAMi's webhook denies the pod
  (``validateMemoryPercentage``); Volcano's ``volcano.sh/vgpu-memory-percentage`` is clamped
  (> 100 to 100, with a warning; < 0 unset), which no webhook checks;
* no memory form at all: ``defaultMemory`` MB when non-zero, else 100 % of the card;
* exclusive default (PR #1354, ``defaultExclusiveCoreIfNeeded``): a count with no ``gpucores``
  gets ``gpucores=100`` when ``gpumem-percentage`` is given and is exactly 100 (even beside a
  ``gpumem``), or when neither a percentage nor a ``gpumem`` key is given; a bare
  ``nvidia.com/gpu: 1`` is an exclusive card, ``gpumem: 0`` or ``gpumem-percentage: 0`` is 100 %
  of the memory with ``defaultCores`` (0), shareable;
* ``gpucores`` > 100 is clamped to 100 (``Fit``);
* the card mode comes from ``nvidia.com/vgpu-mode`` (HAMi) or ``volcano.sh/vgpu-mode`` (Volcano)
  for either family of names; the two set differently are refused at admission.

The soft-slice card rules here (type contains, memory from percentage, cores in %) are also the
defaults a new soft-sharing vendor (Hygon DCU, Cambricon MLU) can reuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from contracts.devices import CardSpec, SliceSpec
from contracts.workloads import DeviceRequest
from services.core.devices.catalogue import NvidiaConfig
from services.core.devices.mig import mig_reason
from services.core.devices.resource_values import INT32_MAX, comma_list, read_int
from services.core.devices.vendor import NodeGate, ResourceList, SchedulingSwitches
from services.core.devices.violations import Violation

VENDOR = "nvidia"
REQUEST_TYPE = "NVIDIA"

USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
USE_UUID = "nvidia.com/use-gpuuuid"
NOUSE_UUID = "nvidia.com/nouse-gpuuuid"
VGPU_MODE = "nvidia.com/vgpu-mode"
NUMA_BIND = "nvidia.com/numa-bind"
VOLCANO_MODE = "volcano.sh/vgpu-mode"
VOLCANO_USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
VOLCANO_NOUSE_UUID = "volcano.sh/vgpu-nouse-gpuuuid"

PCT_UNSET = 101
_GATE = NodeGate(hami_core=False)


@dataclass(frozen=True, slots=True)
class _Names:
    count: str
    memory: str
    percentage: str
    cores: str
    use_uuid: str
    nouse_uuid: str


def _mode(annotations: Mapping[str, str], violations: list[Violation]) -> str | None:
    """The card mode a pod asks, from either system's annotation, whichever resource names it
    uses: the article's Volcano pod asks ``nvidia.com/gpu`` with ``volcano.sh/vgpu-mode``, and
    Volcano holds it to that mode (volcano.md §3.4). Both set and different: no card has two
    modes, so the pod is refused here rather than left pending on ``CardTypeMismatch``
    everywhere."""
    hami, volcano = (annotations.get(k, "").strip() for k in (VGPU_MODE, VOLCANO_MODE))
    if hami and volcano and hami != volcano:
        violations.append(Violation(VOLCANO_MODE, volcano, f"differs from {VGPU_MODE}={hami}: a "
                                    "card has one mode; keep one of the two annotations"))  # fmt: skip
        return None
    return hami or volcano


def _resources_of(names: _Names) -> frozenset[str]:
    return frozenset({names.count, names.memory, names.percentage, names.cores})


def soft_memory_request(card: CardSpec, request: DeviceRequest) -> int:
    """HAMi Fit: explicit MB, else ``Totalmem * pct / 100`` when a percentage is set."""
    if request.memory == 0 and 0 < request.memory_pct < PCT_UNSET:
        return card.memory * request.memory_pct // 100
    return request.memory


def first_candidates(
    candidates: Sequence[CardSpec], needed: int, request: DeviceRequest
) -> Sequence[CardSpec] | str:
    """Default selection: the first ``needed`` fitting cards in try order."""
    return candidates[:needed]


class NvidiaVendor:
    """HAMi/Volcano NVIDIA vGPU: soft slices of MB memory and % cores."""

    def __init__(self, config: NvidiaConfig | None = None) -> None:
        self.config = config or NvidiaConfig()
        c = self.config
        configured = _Names(
            c.resource_count_name,
            c.resource_memory_name,
            c.resource_memory_percentage_name,
            c.resource_core_name,
            USE_UUID,
            NOUSE_UUID,
        )
        volcano = _Names(
            "volcano.sh/vgpu-number",
            "volcano.sh/vgpu-memory",
            "volcano.sh/vgpu-memory-percentage",
            "volcano.sh/vgpu-cores",
            VOLCANO_USE_UUID,
            VOLCANO_NOUSE_UUID,
        )
        if _resources_of(configured) & _resources_of(volcano):
            # a volcano-vgpu-device-config names Volcano's resources: read as two sets, every
            # container would ask twice; one set, the configured names with Volcano's annotations
            self._name_sets: tuple[_Names, ...] = (replace(
                volcano, count=configured.count, memory=configured.memory,
                percentage=configured.percentage, cores=configured.cores),)  # fmt: skip
        else:
            self._name_sets = (configured, volcano)
        self._resources = frozenset(
            n for s in self._name_sets for n in (s.count, s.memory, s.percentage, s.cores)
        ) | {c.resource_priority_name}

    @property
    def name(self) -> str:
        return VENDOR

    def resource_names(self) -> frozenset[str]:
        return self._resources

    def resource_groups(self) -> tuple[frozenset[str], ...]:
        priority = self.config.resource_priority_name  # a modifier of the HAMi names
        return tuple(
            frozenset({s.count, s.memory, s.percentage, s.cores}
                      | ({priority} if s.count == self.config.resource_count_name else set()))
            for s in self._name_sets
        )  # fmt: skip

    def parse(
        self, limits: ResourceList, requests: ResourceList, annotations: Mapping[str, str]
    ) -> tuple[tuple[DeviceRequest, ...], tuple[Violation, ...]]:
        out: list[DeviceRequest] = []
        violations: list[Violation] = []
        for names in self._name_sets:
            req = self._parse_one(names, limits, requests, annotations, violations)
            if req is not None:
                out.append(req)
        return tuple(out), tuple(violations)

    def _parse_one(
        self,
        names: _Names,
        limits: ResourceList,
        requests: ResourceList,
        annotations: Mapping[str, str],
        violations: list[Violation],
    ) -> DeviceRequest | None:
        c = self.config
        before = len(violations)
        count = read_int(limits, requests, names.count, violations)
        factor = c.memory_factor
        memory = read_int(limits, requests, names.memory, violations, maximum=INT32_MAX // factor)
        pct = read_int(
            limits, requests, names.percentage, violations, minimum=-INT32_MAX, maximum=None
        )
        cores = read_int(limits, requests, names.cores, violations)
        if pct is not None and names.percentage == c.resource_memory_percentage_name \
                and not 0 <= pct <= 100:  # HAMi's webhook (validateMemoryPercentage) denies the pod
            violations.append(Violation(names.percentage, str(pct), "must be an integer between "
                                        "0 and 100 (a percentage of one card's memory)"))  # fmt: skip
        if len(violations) > before:
            return None
        if count is None and memory is None and pct is None and cores is None:
            return None
        if count is None:
            count = c.default_gpu_num  # webhook: mem/cores without a count
        if count == 0:
            if memory is None and pct is None and cores is None:
                return None
            violations.append(
                Violation(names.count, "0", "must be >= 1 when memory or cores are requested")
            )
            return None
        # Percentage: sentinel 101 = unset; > 100 clamped (only Volcano's name gets here with
        # one: HAMi's is refused above); <= 0 unset (hami.md §6 G).
        mem_pct = PCT_UNSET
        if pct is not None and pct > 0:
            mem_pct = min(pct, 100)
        mem_mb = 0
        if memory is not None and memory > 0:
            mem_mb = memory * factor
            mem_pct = PCT_UNSET  # explicit memory wins over a percentage
        if mem_mb == 0 and mem_pct == PCT_UNSET:
            if c.default_memory:
                mem_mb = c.default_memory
            else:
                mem_pct = 100
        # Exclusive default (webhook ``defaultExclusiveCoreIfNeeded``), read from the keys the
        # container names, not from the memory they resolve to: with no gpucores, a percentage
        # key decides alone (exactly 100: exclusive, whatever gpumem says), and without one the
        # card is exclusive only when no gpumem key is there at all; ``gpumem: 0`` and
        # ``gpumem-percentage: 0`` resolve to 100 % memory above but stay shareable.
        if cores is None:
            exclusive_default = pct == 100 if pct is not None else memory is None
            core_req = 100 if exclusive_default else c.default_cores
        else:
            core_req = cores
        if core_req > 100:  # Fit clamps gpucores > 100; say so
            violations.append(Violation(names.cores, str(core_req), "is more than a card's 100 % "
                                        "of cores: clamped to 100", warning=True))  # fmt: skip
        if pct is not None and pct > 100:  # Volcano's name: no webhook refuses it
            violations.append(Violation(names.percentage, str(pct), "is more than 100 % of a "
                                        "card's memory: clamped to 100", warning=True))  # fmt: skip
        core_req = min(core_req, 100)
        mode = _mode(annotations, violations)
        if mode is None:
            return None
        return DeviceRequest(
            vendor=VENDOR,
            type=REQUEST_TYPE,
            count=count,
            memory=mem_mb,
            memory_pct=mem_pct,
            cores=core_req,
            exclusive=core_req == 100,
            mode=mode,
            use_uuids=comma_list(annotations.get(names.use_uuid)),
            nouse_uuids=comma_list(annotations.get(names.nouse_uuid)),
            use_types=comma_list(annotations.get(USE_TYPE)),
            nouse_types=comma_list(annotations.get(NOUSE_TYPE)),
            numa_bind=annotations.get(NUMA_BIND, "").lower() == "true",
            resource=names.count,
        )

    # --- fit hooks ------------------------------------------------------------------------

    def node_gate(
        self,
        request: DeviceRequest,
        node_annotations: Mapping[str, str],
        switches: SchedulingSwitches,
    ) -> NodeGate | str:
        return _GATE

    def card_reason(self, card: CardSpec, request: DeviceRequest) -> str | None:
        """Type: the card type *contains* the request type, case-insensitive (getNodeResources);
        mode: the asked mode (``_mode``) must contain the card's (hami-core / mig / mps): HAMi's
        test; Volcano's is equality, the same answer for the one mode its annotation names; a
        card in MIG mode fits nothing (``mig.py``)."""
        if request.allowed_types:
            if card.type not in request.allowed_types:
                return "CardTypeMismatch"
        elif request.type.lower() not in card.type.lower():
            return "CardTypeMismatch"
        if request.mode and card.mode and card.mode not in request.mode:
            return "CardTypeMismatch"  # HAMi's checkType: a mode not asked fails the type check
        return mig_reason(card)  # a MIG card is kept off: Tessera does not carve instances yet

    def core_capacity(self, card: CardSpec, gate: NodeGate) -> int:
        return card.cores

    def core_request(self, card: CardSpec, request: DeviceRequest, gate: NodeGate) -> int:
        return min(request.cores, 100)  # HAMi Fit clamps gpucores > 100

    def memory_request(self, card: CardSpec, request: DeviceRequest) -> int:
        return soft_memory_request(card, request)

    def make_slice(
        self, card: CardSpec, request: DeviceRequest, gate: NodeGate, memory: int, cores: int
    ) -> SliceSpec:
        exclusive = cores >= card.cores > 0
        kind = "whole" if exclusive and memory >= card.memory else "soft"
        return SliceSpec(kind=kind, memory=memory, cores=cores, exclusive=exclusive)

    def cards_needed(
        self, card: CardSpec, request: DeviceRequest, switches: SchedulingSwitches
    ) -> int | str:
        return request.count

    def select(
        self,
        candidates: Sequence[CardSpec],
        needed: int,
        request: DeviceRequest,
        switches: SchedulingSwitches,
    ) -> Sequence[CardSpec] | str:
        return first_candidates(candidates, needed, request)

    def node_bonus(self, chosen: Sequence[CardSpec], request: DeviceRequest) -> float:
        return 0.0

    def topology_score(
        self, candidates: Sequence[CardSpec], chosen: Sequence[CardSpec], request: DeviceRequest
    ) -> int:
        return 0  # (NVLink is not modelled: no opinion)
