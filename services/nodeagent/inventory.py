"""Which nodes this agent hosts: an inventory file, or one node from discovery outputs.

The inventory format and its card defaults belong to `services.core.simulate.inventory` (the
same file drives `tessera simulate`), so a simulated node here registers exactly the cards a
simulation of it would. Discovery builds one node from recorded `npu-smi info` /
`nvidia-smi -q -x` outputs, which is how a real machine's agent describes itself.
"""

from __future__ import annotations

import platform
from pathlib import Path

import yaml

from contracts.devices import CardSpec
from contracts.events import NodeRegistered
from services.core.devices.catalogue import Catalogue, default_catalogue
from services.core.devices.nodeconfig import NodeDeviceConfig, configured_cards, parse_node_config
from services.core.simulate.inventory import DEFAULT_ARCH, kubelet_labels, load_inventory
from services.nodeagent.discovery import (
    ascend_cards,
    nvidia_cards,
    parse_npu_smi,
    parse_nvidia_smi_xml,
)


def nodes_from_inventory(
    path: Path, catalogue: Catalogue | None = None,
    node_config: dict[str, NodeDeviceConfig] | None = None,
) -> list[NodeRegistered]:  # fmt: skip
    doc = yaml.safe_load(path.read_text())
    return load_inventory(doc, catalogue or default_catalogue(), node_config)


def read_node_config(path: Path | None) -> dict[str, NodeDeviceConfig]:
    """HAMi's `node-config.yaml` (the `hami-device-node-config` ConfigMap's key), or none."""
    return parse_node_config(path.read_text()) if path else {}


#: `platform.machine()` → Go's `GOARCH`, the name a kubelet labels its node with
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def machine_arch() -> str:
    """This machine's `kubernetes.io/arch`, as its kubelet (built for it) would write it."""
    machine = platform.machine().lower()
    return _GOARCH.get(machine, machine or DEFAULT_ARCH)


def discovered_node(
    name: str,
    cpu_milli: int,
    memory_mib: int,
    npu_smi: str = "",
    nvidia_smi_xml: str = "",
    catalogue: Catalogue | None = None,
    hami_vnpu_core: bool | None = None,
    node_config: NodeDeviceConfig | None = None,
    arch: str = DEFAULT_ARCH,
) -> NodeRegistered:
    """One node whose cards come from the tools' outputs (either, both or neither), registered
    as the node config says (its `hami-vnpu-core` wins over the flag; neither given: the device
    config's `vnpus.hamiVnpuCore`, as ascend-device-plugin's `IsHamiVnpuCore`)."""
    cat = catalogue or default_catalogue()
    if node_config is not None and node_config.hami_vnpu_core is not None:
        hami_vnpu_core = node_config.hami_vnpu_core
    elif hami_vnpu_core is None:  # ascend-device-plugin: the node config's, else the global one
        hami_vnpu_core = cat.hami_vnpu_core
    cards: list[CardSpec] = []
    if npu_smi:
        cards += ascend_cards(name, parse_npu_smi(npu_smi), cat, hami_vnpu_core)
    if nvidia_smi_xml:
        cards += nvidia_cards(name, parse_nvidia_smi_xml(nvidia_smi_xml), cat)
    cards = configured_cards(cards, node_config)
    annotations = {"hami-vnpu-core": "true"} if hami_vnpu_core else {}
    return NodeRegistered(
        node=name,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        # the kubelet's labels, as an inventory's nodes carry them (`simulate/inventory.py`):
        # a nodeSelector on the hostname or `kubernetes.io/os` waited forever on a discovered node
        labels=kubelet_labels(name, arch),
        annotations=annotations,
        cards=tuple(cards),
    )
