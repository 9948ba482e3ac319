"""Which nodes this agent hosts: an inventory file, or one node from discovery outputs.

The inventory format and its card defaults belong to `services.core.simulate.inventory` (the
same file drives `tessera simulate`), so a simulated node here registers exactly the cards a
simulation of it would. Discovery builds one node from recorded `npu-smi info` /
`nvidia-smi -q -x` outputs, which is how a real machine's agent describes itself.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from contracts.devices import CardSpec
from contracts.events import NodeRegistered
from services.core.devices.catalogue import Catalogue, default_catalogue
from services.core.simulate.inventory import load_inventory
from services.nodeagent.discovery import (
    ascend_cards,
    nvidia_cards,
    parse_npu_smi,
    parse_nvidia_smi_xml,
)


def nodes_from_inventory(path: Path, catalogue: Catalogue | None = None) -> list[NodeRegistered]:
    doc = yaml.safe_load(path.read_text())
    return load_inventory(doc, catalogue or default_catalogue())


def discovered_node(
    name: str,
    cpu_milli: int,
    memory_mib: int,
    npu_smi: str = "",
    nvidia_smi_xml: str = "",
    catalogue: Catalogue | None = None,
    hami_vnpu_core: bool = False,
) -> NodeRegistered:
    """One node whose cards come from the tools' outputs (either, both or neither)."""
    cat = catalogue or default_catalogue()
    cards: list[CardSpec] = []
    if npu_smi:
        cards += ascend_cards(name, parse_npu_smi(npu_smi), cat, hami_vnpu_core)
    if nvidia_smi_xml:
        cards += nvidia_cards(name, parse_nvidia_smi_xml(nvidia_smi_xml), cat)
    annotations = {"hami-vnpu-core": "true"} if hami_vnpu_core else {}
    return NodeRegistered(
        node=name,
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        annotations=annotations,
        cards=tuple(cards),
    )
