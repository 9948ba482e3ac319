"""Inventory YAML → `NodeRegistered` events (nodes with their cards).

`nodes: [{name, count?, cpu, memory, pods?, labels?, annotations?, taints?, serves?, devices: [{type,
count, memory?, cores?, splitCount?, numa?, networkId?}]}]`. Every node carries the kubelet's
labels `kubernetes.io/hostname` (its name), `kubernetes.io/os: linux` and `kubernetes.io/arch:
amd64`; its `labels` add to them and win (`kubernetes.io/arch: arm64` for an Ascend server). `serves` lists the extended
resources the node's kubelet serves; as a map of name → count (`{nvidia.com/gpu: 8}`) it is
a node of the vendor's own device plugin: each count of a family none of `devices` registers
is that many whole cards of mode `plugin` (`registration.plugin_cards`), as on a cluster; a count of
an ordinary extended resource (`nvidia.com/mig-1g.10gb`, `nvidia.com/gpu.shared`) is allocatable
fitted by count, as `resources`. `count > 1` expands to
`<name>-0 … <name>-<count-1>`; card uuids are `<node>-<type>-<index>`, indices consecutive per
type in the order written; memory/cores/split count default from the device catalogue (Ascend:
memoryAllocatable, aiCore — or 100 on a `hami-vnpu-core: "true"` node — and HAMi's
VDeviceCount; NVIDIA: 100 cores × scaling and deviceSplitCount; memory must be given).

`hypernodes: [...]` holds Volcano HyperNodes as Volcano writes them (`topology.volcano.sh/v1alpha1`;
apiVersion and kind may be left out), checked by admission's rules (`load_hypernodes`).

A HAMi node config (`nodeconfig.py`: `hami-device-node-config` / `node-config.yaml`) applies
per node name as the ascend-device-plugin applies it: `vDeviceCount` is the Ascend cards'
default split count, `hami-vnpu-core` sets the node's annotation (and so its cards' mode), and
`filterDevices` cards are not registered. A device's own `splitCount` still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.devices import CardSpec
from contracts.events import HyperNodeChanged, NodeRegistered
from services.core.devices import Catalogue, registration
from services.core.devices.nodeconfig import NodeDeviceConfig
from services.core.scheduling.resources import is_device_resource
from services.core.workload.quantity import (
    QuantityError,
    capacity_units,
    cpu_milli,
    memory_mib_down,
)

NODE_FIELDS = {
    "name",
    "count",
    "cpu",
    "memory",
    "pods",
    "labels",
    "annotations",
    "taints",
    "devices",
    "serves",
    "resources",
}
DEVICE_FIELDS = {"type", "count", "memory", "cores", "splitCount", "numa", "networkId", "mode"}


class InventoryError(ValueError):
    """The inventory is not usable (names the field path)."""


def _taint(raw: object, path: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping):
        key, value, effect = (
            raw.get("key", ""),
            raw.get("value", ""),
            raw.get("effect", "NoSchedule"),
        )
        return f"{key}={value}:{effect}" if value else f"{key}:{effect}"
    raise InventoryError(f"{path}: a taint is `key=value:Effect` or {{key, value, effect}}")


def load_hypernodes(doc: Mapping[str, Any]) -> list[HyperNodeChanged]:
    """The inventory's `hypernodes`, each as admission reads a HyperNode (its rules, its words)."""
    from services.core.workload.hypernodes import API_VERSION, hypernode_event

    raw = doc.get("hypernodes") if isinstance(doc, Mapping) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InventoryError("hypernodes: must be a list of HyperNodes")
    out: list[HyperNodeChanged] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        path = f"hypernodes[{i}]"
        if not isinstance(item, Mapping) or not (item.get("metadata") or {}).get("name"):
            raise InventoryError(f"{path}.metadata.name: required")
        if item.get("kind", "HyperNode") != "HyperNode" or item.get("apiVersion", API_VERSION) != API_VERSION:
            raise InventoryError(f"{path}: a HyperNode is {API_VERSION} kind HyperNode")
        event, problems = hypernode_event(item)
        if problems:
            where, rule = problems[0]
            raise InventoryError(f"{path}.{where}: {rule}")
        assert event is not None
        if event.name in seen:
            raise InventoryError(f"{path}.metadata.name: duplicate HyperNode {event.name}")
        seen.add(event.name)
        out.append(event)
    return out


def load_inventory(
    doc: Mapping[str, Any], catalogue: Catalogue,
    node_config: Mapping[str, NodeDeviceConfig] | None = None,
) -> list[NodeRegistered]:  # fmt: skip
    if not isinstance(doc, Mapping) or not isinstance(doc.get("nodes"), list):
        raise InventoryError("nodes: required list")
    out: list[NodeRegistered] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["nodes"]):
        path = f"nodes[{i}]"
        if not isinstance(raw, Mapping):
            raise InventoryError(f"{path}: must be a mapping")
        for key in raw:
            if key not in NODE_FIELDS:
                raise InventoryError(f"{path}.{key}: unknown field")
        name = str(raw.get("name") or "")
        if not name:
            raise InventoryError(f"{path}.name: required")
        try:
            cpu = cpu_milli(raw.get("cpu", 0))
            mem = memory_mib_down(raw.get("memory", 0))  # what holds asks: rounded down
        except QuantityError as exc:
            raise InventoryError(f"{path}: {exc}") from None
        serves = raw.get("serves")
        counts: dict[str, int] = {}
        if isinstance(serves, Mapping):  # with counts: the vendor's own plugin, see `_cards`
            try:
                counts = {str(k): int(v) for k, v in serves.items()}
            except (TypeError, ValueError):
                counts = {"": -1}
            if any("/" not in k or v < 0 for k, v in counts.items()):
                raise InventoryError(f"{path}.serves: extended resource name (domain/name) → how many "
                                     "its kubelet's device plugin serves (a count >= 0)")  # fmt: skip
            serves = sorted(k for k, v in counts.items() if v > 0)
        if serves is not None and (not isinstance(serves, list) or not all(isinstance(r, str) and "/" in r
                                                                           for r in serves)):  # fmt: skip
            raise InventoryError(f"{path}.serves: a list of extended resource names (domain/name) its "
                                 "kubelet's device plugins serve, or a map of them to their counts")  # fmt: skip
        resources = _resources(raw.get("resources"), f"{path}.resources")
        # a served count of an ordinary extended resource (NVIDIA's MIG `mixed` names, a
        # time-slicing `renameByDefault` `nvidia.com/gpu.shared`): allocatable, fitted by count
        resources = {**{k: capacity_units(k, v) for k, v in counts.items()
                        if v > 0 and not is_device_resource(k)}, **resources}  # fmt: skip
        count = int(raw.get("count", 1))
        names = [name] if count == 1 else [f"{name}-{k}" for k in range(count)]
        base_annotations = {str(k): str(v) for k, v in (raw.get("annotations") or {}).items()}
        taints = tuple(
            _taint(t, f"{path}.taints[{j}]") for j, t in enumerate(raw.get("taints") or [])
        )
        for node in names:
            if node in seen:
                raise InventoryError(f"{path}.name: duplicate node {node}")
            seen.add(node)
            entry = (node_config or {}).get(node)
            annotations = dict(base_annotations)
            if entry is not None and entry.hami_vnpu_core is not None:
                annotations["hami-vnpu-core"] = "true" if entry.hami_vnpu_core else "false"
            elif "hami-vnpu-core" not in annotations and catalogue.hami_vnpu_core:
                # ascend-device-plugin: no node config says, so the device config's
                # vnpus.hamiVnpuCore decides, and the plugin writes it on the node
                annotations["hami-vnpu-core"] = "true"
            hami_core = annotations.get("hami-vnpu-core", "").lower() == "true"
            cards = _cards(node, raw.get("devices") or [], path, catalogue, hami_core, entry)
            node_labels = {**kubelet_labels(node),
                           **{str(k): str(v) for k, v in (raw.get("labels") or {}).items()}}
            # a count no registered card of its family describes: the vendor's own plugin's cards
            cards += registration.plugin_cards(node, counts, node_labels, {c.vendor for c in cards}, catalogue)
            out.append(NodeRegistered(
                node=node, cpu_milli=cpu, memory_mib=mem, pods=int(raw.get("pods", 110)),
                # the kubelet's own labels (`kubelet_labels`), then the inventory's: selectors work
                labels=node_labels,
                annotations=annotations, taints=taints, cards=tuple(cards),
                # what its device plugins register (HAMi's: the model's name); unset: every name
                extended=tuple(sorted(set(serves))) if serves is not None else None,
                resources=resources,
            ))  # fmt: skip
    return out


#: `kubernetes.io/arch` of a node whose inventory entry does not say (`labels:` may)
DEFAULT_ARCH = "amd64"


def kubelet_labels(node: str, arch: str = DEFAULT_ARCH) -> dict[str, str]:
    """The labels every kubelet puts on its Node (`kubernetes.io/hostname`, `kubernetes.io/os`,
    `kubernetes.io/arch`: its own `runtime.GOOS` / `GOARCH`): manifests and Helm charts select
    `kubernetes.io/os: linux` (Volcano's task-start-dependency example does), and a simulated
    node without it kept them Pending for good, where any cluster runs them."""
    return {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch}


def _resources(raw: object, path: str) -> dict[str, int]:
    """A node's allocatable beyond cpu, memory, pods and its cards (`ephemeral-storage: 100Gi`,
    `hugepages-2Mi: 1Gi`, `rdma/hca: 8`): without it a pod asking one fits no simulated node,
    as on a cluster whose nodes lack it."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InventoryError(f"{path}: a map of resource name to quantity")
    out: dict[str, int] = {}
    for name, value in sorted(raw.items()):
        name = str(name)
        if name in ("cpu", "memory", "pods"):
            raise InventoryError(f"{path}.{name}: given by the node's own `{name}` field")
        if is_device_resource(name):
            raise InventoryError(f"{path}.{name}: a device resource: list the cards under `devices`")
        try:
            out[name] = capacity_units(name, value)
        except QuantityError as exc:
            raise InventoryError(f"{path}.{name}: {exc}") from None
    return out


def _cards(
    node: str, devices: list[Any], path: str, cat: Catalogue, hami_core: bool,
    entry: NodeDeviceConfig | None = None,
) -> list[CardSpec]:  # fmt: skip
    cards: list[CardSpec] = []
    next_index: dict[str, int] = {}
    for j, d in enumerate(devices):
        dpath = f"{path}.devices[{j}]"
        if not isinstance(d, Mapping):
            raise InventoryError(f"{dpath}: must be a mapping")
        for key in d:
            if key not in DEVICE_FIELDS:
                raise InventoryError(f"{dpath}.{key}: unknown field")
        ctype = str(d.get("type") or "")
        chip = cat.chip(ctype)
        if chip is not None:
            vendor = "huawei"
            memory = int(d.get("memory", chip.memory_allocatable))
            cores = int(d.get("cores", 100 if hami_core else chip.ai_core))
            default_split = entry.vdevice_count if entry and entry.vdevice_count else chip.slots_per_card
            split = int(d.get("splitCount", default_split))
            mode = "hami-core" if hami_core else "template"
        elif ctype.startswith("NVIDIA"):
            vendor = "nvidia"
            if "memory" not in d:
                raise InventoryError(f"{dpath}.memory: required for {ctype} (MB per card)")
            memory = int(int(d["memory"]) * cat.nvidia.device_memory_scaling)
            cores = int(d.get("cores", int(100 * cat.nvidia.device_core_scaling)))
            split = int(d.get("splitCount", cat.nvidia.device_split_count))
            mode = str(d.get("mode", "hami-core"))
        else:
            raise InventoryError(
                f"{dpath}.type: unknown card type {ctype!r} (HAMi commonWord or NVIDIA-<model>)"
            )
        for _ in range(int(d.get("count", 1))):
            idx = next_index.get(ctype, 0)
            next_index[ctype] = idx + 1
            network = d.get("networkId")
            if network is None:
                network = (
                    (0 if idx <= 3 else 1)
                    if chip is not None and chip.network_grouped and not chip.super_pod
                    else 0
                )
            uuid = f"{node}-{ctype}-{idx}"
            if chip is not None and entry is not None and not entry.registers(idx, uuid):
                continue
            cards.append(CardSpec(
                uuid=uuid, node=node, index=idx, type=ctype, vendor=vendor,
                memory=memory, cores=cores, split_count=split, numa=int(d.get("numa", 0)),
                network_id=int(network), mode=str(d.get("mode", mode)),
                mig_geometries=(cat.nvidia.mig_geometries(ctype)
                                if vendor == "nvidia" and str(d.get("mode", mode)) == "mig" else ()),
            ))  # fmt: skip
    return cards
