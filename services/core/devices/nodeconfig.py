"""HAMi's per-node device config (ascend-device-plugin, hami.md §2.6): the ConfigMap
`hami-device-node-config`, key `node-config.yaml`, as operators write it:

    nodes:
    - name: node-a
      hami-vnpu-core: true      # soft slicing on this node (overrides the global hamiVnpuCore)
      vDeviceCount: 8           # slices per card (default memoryAllocatable / smallest template)
      filterDevices: {index: [7], uuid: []}   # cards the plugin does not register

Why it matters: with the default split count a hami-core 910B3 takes 4 slices, so the article's
"one 64 GB 910B serves 8 × 8 GB tasks" needs `vDeviceCount: 8` (issue 13). Unknown fields are
errors (a typo in an operator's file must not be silently ignored). Pure: text in, records out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml

from contracts.devices import CardSpec

NODE_FIELDS = frozenset({"name", "hami-vnpu-core", "vDeviceCount", "filterDevices"})
FILTER_FIELDS = frozenset({"index", "uuid"})


class NodeConfigError(ValueError):
    """The node config is not usable (names the field path)."""


@dataclass(frozen=True, slots=True)
class NodeDeviceConfig:
    """One node's entry; None = not set (the defaults apply)."""

    name: str
    hami_vnpu_core: bool | None = None
    vdevice_count: int | None = None
    filter_index: frozenset[int] = frozenset()
    filter_uuid: frozenset[str] = frozenset()

    def registers(self, index: int, uuid: str) -> bool:
        """False for a card `filterDevices` names: the device plugin leaves it out."""
        return index not in self.filter_index and uuid not in self.filter_uuid


def parse_node_config(text: str) -> dict[str, NodeDeviceConfig]:
    """`node-config.yaml` text → node name → its entry."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NodeConfigError(f"not YAML: {exc}") from None
    return node_config_from(doc)


def node_config_from(doc: object) -> dict[str, NodeDeviceConfig]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or set(doc) - {"nodes"}:
        raise NodeConfigError("the file holds one key, `nodes`: a list of node entries")
    raw_nodes = doc.get("nodes") or []
    if not isinstance(raw_nodes, list):
        raise NodeConfigError("nodes: must be a list")
    out: dict[str, NodeDeviceConfig] = {}
    for i, raw in enumerate(raw_nodes):
        entry = _entry(raw, f"nodes[{i}]")
        if entry.name in out:
            raise NodeConfigError(f"nodes[{i}].name: duplicate node {entry.name}")
        out[entry.name] = entry
    return out


def _entry(raw: object, path: str) -> NodeDeviceConfig:
    if not isinstance(raw, Mapping):
        raise NodeConfigError(f"{path}: must be a mapping")
    for key in raw:
        if key not in NODE_FIELDS:
            raise NodeConfigError(f"{path}.{key}: unknown field ({', '.join(sorted(NODE_FIELDS))})")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise NodeConfigError(f"{path}.name: required")
    core = raw.get("hami-vnpu-core")
    if core is not None and not isinstance(core, bool):
        raise NodeConfigError(f"{path}.hami-vnpu-core: must be true or false")
    count = raw.get("vDeviceCount")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise NodeConfigError(f"{path}.vDeviceCount: must be an integer >= 1")
    index, uuid = _filters(raw.get("filterDevices"), f"{path}.filterDevices")
    return NodeDeviceConfig(name, core, count, index, uuid)


def _filters(raw: Any, path: str) -> tuple[frozenset[int], frozenset[str]]:
    if raw is None:
        return frozenset(), frozenset()
    if not isinstance(raw, Mapping):
        raise NodeConfigError(f"{path}: must be a mapping with index and/or uuid lists")
    for key in raw:
        if key not in FILTER_FIELDS:
            raise NodeConfigError(f"{path}.{key}: unknown field (index, uuid)")
    index = raw.get("index") or []
    uuid = raw.get("uuid") or []
    if not isinstance(index, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in index
    ):
        raise NodeConfigError(f"{path}.index: must be a list of card indices")
    if not isinstance(uuid, list) or not all(isinstance(u, str) for u in uuid):
        raise NodeConfigError(f"{path}.uuid: must be a list of card uuids")
    return frozenset(index), frozenset(uuid)


def configured_cards(cards: Sequence[CardSpec], entry: NodeDeviceConfig | None) -> list[CardSpec]:
    """Discovered Ascend cards as the device plugin registers them under `entry`: the filtered
    ones left out, the rest split `vDeviceCount` ways (NVIDIA cards are not its business)."""
    if entry is None:
        return list(cards)
    out = []
    for c in cards:
        if c.vendor != "huawei":
            out.append(c)
        elif entry.registers(c.index, c.uuid):
            out.append(msgspec.structs.replace(c, split_count=entry.vdevice_count or c.split_count))
    return out
