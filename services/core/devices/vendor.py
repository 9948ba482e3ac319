"""The one interface every accelerator family implements (STYLE §6).

The generic fit loop (``fit.py``) runs HAMi's check order and reason names for every vendor;
a vendor only answers the questions that really differ between families: which resource names
it owns and how a container's resources become :class:`DeviceRequest`s, whether a node can
serve a request at all (Ascend's hami-core gate), which cards match by type/mode, the core
capacity and memory ask on one card, the slice to book, and topology-aware card selection.

Adding Hygon DCU or Cambricon MLU = one module implementing :class:`DeviceVendor` (most methods
can delegate to the soft-slice defaults of ``nvidia.py``) + one line in ``registry.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from contracts.devices import CardSpec, SliceSpec
from contracts.workloads import DeviceRequest
from services.core.devices.violations import Violation

#: A container's ``resources.limits`` or ``resources.requests``.
ResourceList = Mapping[str, str | int]


@dataclass(frozen=True, slots=True)
class NodeGate:
    """How one node serves one request: cores as % of the card (hami-core) or native units."""

    hami_core: bool = False


@dataclass(frozen=True, slots=True)
class SchedulingSwitches:
    """Global switches a vendor's node gate needs (from the catalogue / scheduler config)."""

    hami_vnpu_core: bool = False
    #: HAMi v2.10 (PR #2035): an Ascend pod without ``huawei.com/vnpu-mode`` may land on a
    #: hami-core node. False reproduces v2.9, where such a pod asking less than a whole card got
    #: ``ModeNotFit`` there (issue #1941).
    mode_agnostic: bool = True
    #: two containers of a pod asking vNPUs of one template share a card (as HAMi places
    #: them); False: a card an earlier container took a template vNPU on is its own, as the
    #: scheduler decided before rules generation 1 (`DeviceConfig.templates_share`)
    templates_share: bool = True
    #: a MIG card whose model has no geometry fits nothing (`mig.mig_reason`); False: booked as
    #: a soft card, as the scheduler decided before rules generation 2 (`DeviceConfig.mig_kept_off`)
    mig_kept_off: bool = True
    #: multi-card (and whole-card) asks take the best-fitting NetworkID group (HCCS ring) and a
    #: ring-bound chip's pod of <= 4 cards stays in one ring (`ascend.AscendVendor.select`);
    #: False: HAMi's largest-group-first fill, as the scheduler decided before rules generation
    #: 2 (`DeviceConfig.ring_fit`)
    ring_fit: bool = True
    #: a ring-bound chip's pod of a count its rings cannot serve (910A: 3, 5, 6, 7) does not fit
    #: its cards (`ascend.AscendVendor.cards_needed`); False: placed, as the scheduler decided
    #: before rules generation 3 (`DeviceConfig.ring_counts`)
    ring_counts: bool = True


class DeviceVendor(Protocol):
    """An accelerator family: request parsing, per-card rules and topology for the fit loop."""

    @property
    def name(self) -> str:
        """The vendor key carried in ``CardSpec.vendor`` and ``DeviceRequest.vendor``."""
        ...

    def resource_names(self) -> frozenset[str]:
        """Every resource name this vendor reads (count, memory, cores, aliases)."""
        ...

    def resource_groups(self) -> tuple[frozenset[str], ...]:
        """The names that together make one request (a model's count, memory and cores):
        names from two groups in one container would be two requests, i.e. two cards."""
        ...

    def parse(
        self, limits: ResourceList, requests: ResourceList, annotations: Mapping[str, str]
    ) -> tuple[tuple[DeviceRequest, ...], tuple[Violation, ...]]:
        """A container's requests for this vendor plus every rule it breaks (all of them)."""
        ...

    def node_gate(
        self,
        request: DeviceRequest,
        node_annotations: Mapping[str, str],
        switches: SchedulingSwitches,
    ) -> NodeGate | str:
        """Whether the node can serve the request at all; a string is the node-wide reason."""
        ...

    def card_reason(self, card: CardSpec, request: DeviceRequest) -> str | None:
        """Vendor-specific card mismatch (type, mode), checked before capacity."""
        ...

    def core_capacity(self, card: CardSpec, gate: NodeGate) -> int:
        """The card's total cores in the unit the request is counted in."""
        ...

    def core_request(self, card: CardSpec, request: DeviceRequest, gate: NodeGate) -> int:
        """Cores the request books on this card, in the unit of :meth:`core_capacity`."""
        ...

    def memory_request(self, card: CardSpec, request: DeviceRequest) -> int:
        """MB the request books on this card (percentages resolved against the card)."""
        ...

    def make_slice(
        self, card: CardSpec, request: DeviceRequest, gate: NodeGate, memory: int, cores: int
    ) -> SliceSpec:
        """The ledger slice for a fitted request on this card."""
        ...

    def cards_needed(
        self, card: CardSpec, request: DeviceRequest, switches: SchedulingSwitches
    ) -> int | str:
        """Cards the request takes when it lands on cards like ``card`` (910C pairs), or a reason
        (a count such cards cannot serve)."""
        ...

    def select(
        self,
        candidates: Sequence[CardSpec],
        needed: int,
        request: DeviceRequest,
        switches: SchedulingSwitches,
    ) -> Sequence[CardSpec] | str:
        """Pick ``needed`` of the fitting candidates (in try order), or a reason string."""
        ...

    def node_bonus(self, chosen: Sequence[CardSpec], request: DeviceRequest) -> float:
        """Vendor ``ScoreNode`` term added to the node score for this request's cards."""
        ...

    def topology_score(
        self, candidates: Sequence[CardSpec], chosen: Sequence[CardSpec], request: DeviceRequest
    ) -> int:
        """How well taking ``chosen`` out of the fitting ``candidates`` (same card type) leaves
        the node's cards for later pods: higher is better, 0 is no opinion (or the worst); nodes
        are ranked by it (rules generation 3, Ascend's HCCS rings)."""
        ...
