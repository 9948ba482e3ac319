"""Device records shared by the ledger, the scheduler and the node-agent.

Units follow HAMi: memory in MB (MiB) as the device plugins register it, cores either in % of
the card (soft mode, total 100) or in AI cores (Ascend template mode, total = aiCore).
"""

from __future__ import annotations

from typing import Literal

from contracts.base import Record

SliceKind = Literal["whole", "template", "soft"]


class MigProfile(Record, frozen=True):
    """One profile of a MIG geometry (HAMi's ``knownMigGeometries``): its name (``2g.20gb``),
    memory MB, how many instances the geometry carves, and the cores (% of the card) an
    instance books; 0 means derived from the name's compute slices (``devices/mig.py``)."""

    name: str
    memory: int
    count: int = 1
    cores: int = 0


class MigGeometry(Record, frozen=True):
    """One allowed way to carve a card: its profiles in order (their placements follow from it)."""

    group: str = ""
    profiles: tuple[MigProfile, ...] = ()


class MigInstance(Record, frozen=True):
    """One MIG instance a slice holds: the profile and its hardware placement (memory slices
    ``start``..``start+size``), as HAMi's ``hami.io/vgpu-mig-allocations`` carries it."""

    profile: str
    start: int
    size: int


class CardSpec(Record, frozen=True):
    """One physical card as its node reports it."""

    uuid: str
    node: str
    index: int
    type: str  # HAMi commonWord, e.g. "Ascend910B3" or "NVIDIA-A100"
    vendor: str  # "huawei" | "nvidia" | ...
    memory: int  # allocatable MB
    cores: int  # total cores: 100 (soft / NVIDIA) or aiCore (Ascend template mode)
    split_count: int = 1
    numa: int = 0
    network_id: int = 0
    healthy: bool = True
    #: why the node reports it unhealthy, in its tool's words (`npu-smi Health: Critical`):
    #: what `describe card` tells an operator; "" when healthy or not known
    health_reason: str = ""
    mode: str = ""  # "", "hami-core", "template": the slicing mode the node agent enables;
    # "plugin": a whole card the vendor's own device plugin serves with no HAMi registration
    # (see `resource`): the kubelet and that plugin choose the physical device, so only a
    # whole-card request of `resource` fits it
    #: the extended resource the kubelet serves a "plugin" card under (`nvidia.com/gpu`,
    #: `huawei.com/Ascend910`); "" for registered cards
    resource: str = ""
    #: a card in MIG mode: the geometries the device config allows for its model
    #: (``knownMigGeometries``); none keeps the card off (``devices/mig.py``)
    mig_geometries: tuple[MigGeometry, ...] = ()


class SliceSpec(Record, frozen=True):
    """One booking on one card."""

    kind: SliceKind
    memory: int
    cores: int = 0
    template: str | None = None
    exclusive: bool = False
    #: containers the slice serves (two of a pod may share a card, booked as one slice of their
    #: sum): what it takes of the card's split count, as HAMi counts a device per container and
    #: the kubelet sees split-count devices per card
    slots: int = 1
    #: on a card in MIG mode, the instance(s) the slice holds (one per container served)
    mig: tuple[MigInstance, ...] = ()


class OwnedSlice(Record, frozen=True):
    """One slice together with the task that holds it (`"<namespace>/<job>/<task>"`)."""

    owner: str
    slice: SliceSpec


class CardUsage(Record, frozen=True):
    """A card's usage after an event, carried on every ledger event for O(cards) recovery.

    `slices` (sorted by owner) lets a reader rebuild the full ledger state, per-owner amounts
    included, from the last event alone; `healthy`/`retired` carry the card's admission state
    so that recovery does not need the health history either.
    """

    memory_used: int = 0
    cores_used: int = 0
    slices_used: int = 0
    exclusive: bool = False
    owners: tuple[str, ...] = ()
    slices: tuple[OwnedSlice, ...] = ()
    healthy: bool = True
    retired: bool = False
