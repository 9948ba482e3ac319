"""Where Tessera's cards come from, and the words for what a card without HAMi's registration
cannot do.

Sliceable cards come from HAMi's register annotations (written by HAMi's device plugins, or by
Tessera's own node side with `nodeAgent.devicePlugin: tessera`): uuid, memory and split count
to book slices on. A node running only the vendor's plugin (Huawei's ascend-device-plugin:
`huawei.com/Ascend910: 8`; NVIDIA's: `nvidia.com/gpu: 8`) has no registration, only the
kubelet's count. Volcano runs whole-card pods there all the same (deviceshare finds no device of
the type, and the count is an ordinary scalar fitted against allocatable, volcano.md §3.1), so
Tessera makes `plugin_cards` of the count: one whole card per unit, `mode: plugin`, a uuid of
its own (the kubelet and the vendor's plugin choose the physical device), fitting only a
whole-card request of the served name. A slice needs the registration: the fit, the node's
explanation and a waiting pod's words say so with `slices_need_registration`.
"""

from __future__ import annotations

from collections.abc import Mapping

from contracts import hami
from contracts.devices import CardSpec, CardUsage
from contracts.workloads import DeviceRequest
from services.core.devices.catalogue import Catalogue
from services.core.scheduling.resources import is_plain_extended

#: Per vendor: the annotation HAMi's device plugin registers the node's cards in, and that plugin.
_HAMI = {
    "huawei": (hami.ascend_register_key("<CommonWord>"), "HAMi's ascend-device-plugin"),
    "nvidia": (hami.NVIDIA_REGISTER, "HAMi's device plugin (hami-device-plugin)"),
}

BOOKED_FROM = ("Tessera books slices only from HAMi's registration, which HAMi's device plugins "
               "and Tessera's own node side write, and whole cards also from a vendor plugin's "
               "count of a name pods ask (nvidia.com/gpu, huawei.com/<model or family>)")  # fmt: skip


def vendor_of(resource: str) -> str | None:
    """The family whose registration a served name needs (None: one Tessera does not book)."""
    if resource.startswith("huawei.com/Ascend"):
        return "huawei"
    if resource.startswith("nvidia.com/") and not is_plain_extended(resource):
        return "nvidia"  # (not NVIDIA's MIG / `.shared` names: extended resources by count)
    return None


def register_annotation(vendor: str) -> str:
    return _HAMI[vendor][0] if vendor in _HAMI else "HAMi's register annotation"


def install(vendor: str) -> str:
    """What to run on such a node: HAMi's plugin or Tessera's node side, in the vendor's place
    (two plugins registering one name with the kubelet cannot both serve it)."""
    plugin = _HAMI[vendor][1] if vendor in _HAMI else "HAMi's device plugin"
    return (f"install {plugin} in place of the vendor's, or Tessera's node side (chart value "
            "nodeAgent.devicePlugin: tessera)")  # fmt: skip


#: the name NVIDIA's k8s-device-plugin serves its GPUs under, one per GPU
NVIDIA_PLUGIN_COUNT = "nvidia.com/gpu"
#: `CardSpec.mode` of a card made from a vendor plugin's count (no HAMi registration)
PLUGIN = "plugin"
#: NVIDIA's GPU feature discovery labels (beside NVIDIA's device plugin): model and MiB per card
GFD_PRODUCT, GFD_MEMORY = "nvidia.com/gpu.product", "nvidia.com/gpu.memory"
#: GFD's label of the plugin's time-slicing (or MPS) replicas per GPU: `nvidia.com/gpu` counts
#: `gpu.count` × replicas, each a share of one GPU
GFD_REPLICAS = "nvidia.com/gpu.replicas"


def time_slice_replicas(labels: Mapping[str, str]) -> int:
    """How many of the served `nvidia.com/gpu` units share one physical GPU (1 without
    time-slicing). Each unit is a card here, placed by count as kube-scheduler places it; its
    memory is its share of the GPU's (`gpu.memory` / replicas), so that a time-sliced node's
    cards sum to its GPUs' memory once: 8 replicas of 2 T4s showed 8 × 15360 MB, and
    `get cards`, the card memory figures and the hami_gpu_memory_* gauges were 4× the
    hardware."""
    raw = labels.get(GFD_REPLICAS, "")
    return int(raw) if raw.isdigit() and int(raw) > 1 else 1


def is_plugin(card: CardSpec) -> bool:
    return card.mode == PLUGIN


def plugin_uuid(node: str, resource: str, index: int) -> str:
    """Deterministic per (node, resource, index): a re-registration keeps its bookings, and a
    replay makes the same card (subject tokens escape the `/` and `.`)."""
    return f"{node}/{resource}/{index}"


def plugin_resource(node: str, uuid: str) -> str:
    """The resource a plugin card's uuid (`plugin_uuid`) was served under, "" for another uuid."""
    head, _, index = uuid.rpartition("/")
    if not index.isdigit() or not head.startswith(f"{node}/"):
        return ""
    resource = head[len(node) + 1:]
    return resource if "/" in resource else ""


def counted_resources(catalogue: Catalogue) -> dict[str, str]:
    """The count names a pod asks whole cards by, per vendor: every Ascend chip's and alias's
    count resource, and `nvidia.com/gpu` while it is NVIDIA's count name (a device config naming
    another, `volcano.sh/vgpu-number`, counts shares of a card, not cards). A vendor plugin's
    other names (Huawei's `huawei.com/Ascend910-2c` vNPUs, `-memory`) are no count Tessera's
    requests use."""
    out = {c.resource_name: "huawei" for c in catalogue.ascend}
    out.update((alias, "huawei") for alias in catalogue.aliases)
    if catalogue.nvidia.resource_count_name == NVIDIA_PLUGIN_COUNT:
        out[NVIDIA_PLUGIN_COUNT] = "nvidia"
    return out


def registered_vendors(annotations: Mapping[str, str]) -> set[str]:
    """The families HAMi's registration describes on a node (its cards are booked from it)."""
    out = set()
    if any(k.startswith(hami.ASCEND_REGISTER_PREFIX) for k in annotations):
        out.add("huawei")
    if hami.NVIDIA_REGISTER in annotations:
        out.add("nvidia")
    return out


def plugin_cards(node: str, counts: Mapping[str, int], labels: Mapping[str, str],
                 registered: set[str], catalogue: Catalogue) -> list[CardSpec]:  # fmt: skip
    """One whole card per unit of each served count (`counts`: name → allocatable) whose family
    has no registration on the node (`registered`): a node with HAMi's registration books from
    it alone, never from the count as well. Type and memory from the catalogue where the name
    names one chip model (`huawei.com/Ascend910B3`), from NVIDIA's feature-discovery labels
    where present, else the name's own word and 0 MB (unknown: a whole card needs no size)."""
    names = counted_resources(catalogue)
    out: list[CardSpec] = []
    for resource in sorted(counts):
        vendor = names.get(resource)
        if vendor is None or vendor in registered or counts[resource] <= 0:
            continue
        if vendor == "huawei":
            types = ((c.common_word,) for c in catalogue.ascend if c.resource_name == resource)
            chips = next(types, None) or catalogue.aliases.get(resource, ())
            chip = catalogue.chip(chips[0]) if len(chips) == 1 else None
            ctype = chip.common_word if chip else resource.split("/", 1)[1]
            memory, cores = (chip.memory_allocatable, chip.ai_core) if chip else (0, 100)
        else:
            ctype = labels.get(GFD_PRODUCT) or "NVIDIA"
            if not ctype.upper().startswith("NVIDIA"):
                ctype = f"NVIDIA-{ctype}"
            raw = labels.get(GFD_MEMORY, "")
            memory, cores = (int(raw) if raw.isdigit() else 0), 100
            if resource == NVIDIA_PLUGIN_COUNT:
                memory //= time_slice_replicas(labels)
        out.extend(CardSpec(uuid=plugin_uuid(node, resource, i), node=node, index=i, type=ctype,
                            vendor=vendor, memory=memory, cores=cores, mode=PLUGIN,
                            resource=resource) for i in range(counts[resource]))  # fmt: skip
    return out


def whole_card(request: DeviceRequest) -> bool:
    """The request asks whole cards by count alone: no memory, cores, percentage, template or
    slicing mode (a bare `nvidia.com/gpu: 1` is exclusive with 100 % of memory and cores; an
    Ascend count without `-memory` a whole card)."""
    return (request.exclusive and request.template is None and not request.mode
            and request.memory == 0 and request.memory_pct in (100, 101))  # fmt: skip


def plugin_card_reason(card: CardSpec, request: DeviceRequest) -> str | None:
    """A plugin card fits a whole-card request of the very name it is served under (the kubelet
    gives a pod only what it asks by a name the node serves), else HAMi-style codes."""
    if request.resource != card.resource:
        return "CardTypeMismatch"
    if not whole_card(request):
        return SLICE_NEEDS_REGISTRATION
    return None


#: the fit's code for a slice asked of a card without HAMi's registration
SLICE_NEEDS_REGISTRATION = "SliceNeedsRegistration"


def slice_asked(request: DeviceRequest) -> str:
    """What makes a request a slice, in its own terms."""
    if request.template:
        return f"template {request.template}"
    if request.mode:
        return f"mode {request.mode}"
    if request.memory:
        return f"{request.memory} MB of memory"
    if 0 < request.memory_pct < 100:
        return f"{request.memory_pct}% of memory"
    if request.cores and request.cores < 100:
        return f"{request.cores}% of cores"
    return "part of a card"


def slices_need_registration(node: str, request: DeviceRequest) -> str:
    """A slice request on a node serving its name only from the vendor's plugin: what it asks,
    why it cannot have it there, and what to install for it (whole cards need nothing)."""
    vendor = request.vendor
    return (f"node {node} serves {request.resource} from a device plugin without HAMi's registration "
            f"(no {register_annotation(vendor)} annotation): whole cards only; the pod asks a slice "
            f"({slice_asked(request)}), which needs HAMi's registration: {install(vendor)}")  # fmt: skip


#: what a fit's note says of a vendor plugin's whole cards all held (the kube edge's words key on it)
IN_USE = "the node's device plugin serves is in use"

#: the owner a session shows on a plugin card other schedulers' pods hold (no ledger has them)
OTHERS = "<other schedulers' pods>"


def held_usage(card: CardSpec, usage: CardUsage) -> CardUsage:
    """A free plugin card as held, whole, by another scheduler's pod (`Session`'s view only)."""
    return CardUsage(memory_used=card.memory, cores_used=card.cores, slices_used=1, exclusive=True,
                     owners=(OTHERS,), healthy=usage.healthy, retired=usage.retired)  # fmt: skip
