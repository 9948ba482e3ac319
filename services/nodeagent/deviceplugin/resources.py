"""What a node advertises: its cards as the kubelet's extended resources and as HAMi's node
annotations. Pure: the discovered cards and the time in, records out.

The kubelet counts devices, not memory, so each card is advertised as `split count` devices
named `<uuid>-<i>` (HAMi's plugins do the same: `nvidia.com/gpu` of a node with 2 A100s split
10 ways is 20). Those IDs only make the kubelet's arithmetic right: which card a container gets
is what Tessera committed, read from the pod's annotations in Allocate, never the IDs the
kubelet picked (HAMi #1741). The node annotations are HAMi's register/handshake protocol
(hami.md §3.1), so HAMi's scheduler, HAMi-WebUI and Tessera's own cluster-side node agent read
this node as they read a node running HAMi's plugins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contracts import hami
from contracts.devices import CardSpec
from services.core.devices.catalogue import Catalogue

HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"  # the kubelet's device health words


@dataclass(frozen=True, slots=True)
class PluginDevice:
    """One device the kubelet counts: a share of a card."""

    id: str
    card: str
    healthy: bool
    numa: int | None = None  # NVIDIA: the card's NUMA node (the kubelet's topology hint)

    @property
    def health(self) -> str:
        return HEALTHY if self.healthy else UNHEALTHY


@dataclass(frozen=True, slots=True)
class Resource:
    """One extended resource this node serves, with its plugin's socket and devices."""

    name: str  # e.g. "huawei.com/Ascend910B3", "nvidia.com/gpu"
    vendor: str  # "huawei" | "nvidia"
    to_allocate: str  # the pod annotation Allocate pops devices from
    devices: tuple[PluginDevice, ...]

    @property
    def socket(self) -> str:
        """The plugin's socket file in the device-plugins directory (one per resource)."""
        return "tessera-" + self.name.replace("/", "_") + ".sock"


def device_id(card: str, share: int) -> str:
    return f"{card}-{share}"


def card_of(device: str, cards: Iterable[str]) -> str | None:
    """The card a device ID is a share of (uuids may contain `-`: the longest prefix wins)."""
    best = None
    for uuid in cards:
        if device.startswith(uuid + "-") and device[len(uuid) + 1:].isdigit() \
                and (best is None or len(uuid) > len(best)):  # fmt: skip
            best = uuid
    return best


def resources(cards: Sequence[CardSpec], catalogue: Catalogue) -> list[Resource]:
    """The node's resources in a fixed order; a vendor or chip without cards advertises none."""
    grouped: dict[str, tuple[str, str, list[PluginDevice]]] = {}
    for c in sorted(cards, key=lambda c: (c.vendor, c.type, c.index)):
        if c.vendor == "nvidia":
            name, key = catalogue.nvidia.resource_count_name, hami.NVIDIA_TO_ALLOCATE
        else:
            chip = catalogue.chip(c.type)
            name = chip.resource_name if chip else f"huawei.com/{c.type}"
            key = hami.ascend_to_allocate_key(c.type)
        numa = c.numa if c.vendor == "nvidia" else None
        shares = [PluginDevice(device_id(c.uuid, i), c.uuid, c.healthy, numa) for i in range(max(1, c.split_count))]
        grouped.setdefault(name, (c.vendor, key, []))[2].extend(shares)
    ascend = {c.type for c in cards if c.vendor != "nvidia"}
    for alias, types in sorted(catalogue.aliases.items()):
        present = sorted(ascend & set(types))
        chip = catalogue.chip(present[0]) if len(present) == 1 else None
        if chip is not None and alias not in grouped and chip.resource_name in grouped:
            # the family (`huawei.com/Ascend910`) and pre-v2.7 (`…/Ascend910B`) names the
            # article's YAML asks: served with the same cards, or the kubelet would admit such a
            # pod with its ask dropped and no card. One card model per node only: Allocate reads
            # the model's annotation.
            vendor, key, devs = grouped[chip.resource_name]
            grouped[alias] = (vendor, key, list(devs))
    return [Resource(name, vendor, key, tuple(devs)) for name, (vendor, key, devs) in sorted(grouped.items())]


def _registered(c: CardSpec) -> hami.RegisteredDevice:
    return hami.RegisteredDevice(
        uuid=c.uuid, index=c.index, count=c.split_count, devmem=c.memory, devcore=c.cores,
        type=c.type, numa=c.numa, health=c.healthy, mode=c.mode if c.vendor == "nvidia" else "",
        network_id=c.network_id,
    )  # fmt: skip


def node_annotations(cards: Sequence[CardSpec], catalogue: Catalogue, now: float,
                     hami_vnpu_core: bool) -> dict[str, str]:  # fmt: skip
    """HAMi's node annotations for these cards: per Ascend chip `hami.io/node-register-<cw>` and
    its `Reported_` handshake, `hami-vnpu-core`; NVIDIA's `hami.io/node-nvidia-register` (its
    handshake too, which HAMi < 2.9 still waits for). The handshake carries `now`, so an agent
    that stops reporting is seen by whoever reads the node."""
    out: dict[str, str] = {}
    ascend: dict[str, list[CardSpec]] = {}
    nvidia: list[CardSpec] = []
    for c in sorted(cards, key=lambda c: c.index):
        if c.vendor == "nvidia":
            nvidia.append(c)
        else:
            ascend.setdefault(c.type, []).append(c)
    shake = hami.reported_value(now)
    for word, mine in sorted(ascend.items()):
        chip = catalogue.chip(word)
        grouped = chip is not None and chip.network_grouped  # 910C's NetworkID is always 0
        out[hami.ascend_register_key(word)] = hami.encode_register([_registered(c) for c in mine], grouped)
        out[hami.ascend_handshake_key(word)] = shake
    if ascend:
        out[hami.VNPU_CORE] = "true" if hami_vnpu_core else "false"
    if nvidia:
        out[hami.NVIDIA_REGISTER] = hami.encode_register([_registered(c) for c in nvidia])
        out[hami.NVIDIA_HANDSHAKE] = shake
    return out


def preferred(available: Sequence[str], must_include: Sequence[str], size: int,
              wanted_cards: Sequence[str]) -> list[str]:  # fmt: skip
    """The device IDs to suggest to the kubelet: the ones it must take, then a share of each card
    the pod was committed to (so the kubelet's own bookkeeping, and DCGM's, name the right
    cards), then any. Never more than `size`, never one that is not available."""
    chosen = list(dict.fromkeys(must_include))[:size]
    free = [d for d in available if d not in chosen]
    cards_free = list(dict.fromkeys(c for c in (card_of(d, wanted_cards) for d in free) if c))
    for card in wanted_cards:
        if len(chosen) >= size:
            break
        if card not in cards_free or any(card_of(d, [card]) for d in chosen):
            continue
        pick = next(d for d in free if card_of(d, [card]))
        chosen.append(pick)
        free.remove(pick)
    chosen.extend(free[: max(0, size - len(chosen))])
    return chosen
