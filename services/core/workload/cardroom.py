"""The largest card of each vendor a cluster has: what no request for one card may exceed.

Ascend requests are checked against the chip catalogue (a 910B3 holds 65536 MB whatever the
cluster), but NVIDIA memory (`nvidia.com/gpumem`) is only bounded by the cards that exist:
HAMi's webhook accepts 90000 MB on a cluster of A100-40G and H100-80G and the pod waits for
ever, while the advice was to "free 52040 MB" on a card that holds 40960 (issue 26 item 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contracts.devices import CardSpec
from contracts.workloads import DeviceRequest
from services.core.devices.violations import Violation

#: vendor → (memory MB, card type) of its largest card
Largest = Mapping[str, tuple[int, str]]


def largest_cards(cards: Iterable[CardSpec]) -> dict[str, tuple[int, str]]:
    """Per vendor, of the cards a slice may go to: a vendor plugin's whole cards (`mode:
    plugin`, memory from a label or unknown) take none, so they bound no request's memory."""
    out: dict[str, tuple[int, str]] = {}
    for c in cards:
        if c.mode == "plugin":
            continue
        if c.vendor not in out or (c.memory, c.type) > out[c.vendor]:
            out[c.vendor] = (c.memory, c.type)
    return out


def largest_of(per_node: Iterable[Largest]) -> dict[str, tuple[int, str]]:
    """The cluster's largest card per vendor from each node's (`largest_cards` of its cards):
    what admission keeps per node, so a judgement walks nodes, not every card."""
    out: dict[str, tuple[int, str]] = {}
    for largest in per_node:
        for vendor, top in largest.items():
            if vendor not in out or top > out[vendor]:
                out[vendor] = top
    return out


def beyond_every_card(devices: Iterable[DeviceRequest], largest: Largest, where: str) -> list[Violation]:
    """A refusal for each request whose per-card memory no card of its vendor holds; nothing
    while the cluster has no card of that vendor yet (its nodes may still be registering)."""
    out = []
    for d in devices:
        top = largest.get(d.vendor)
        if top is None or d.memory <= top[0]:
            continue
        slot = "initContainers" if d.container < 0 else f"containers[{d.container}]"
        out.append(Violation(f"{where}.{slot}.resources.limits.{memory_name(d)}", str(d.memory),
                             f"exceeds every {d.vendor} card of the cluster: the largest "
                             f"({top[1]}) holds {top[0]} MB"))  # fmt: skip
    return out


def memory_name(d: DeviceRequest) -> str:
    """The per-card memory resource HAMi names beside the count (`nvidia.com/gpumem`,
    `huawei.com/Ascend910B3-memory`)."""
    if d.resource.endswith("/gpu"):
        return f"{d.resource}mem"
    return f"{d.resource}-memory" if d.resource else f"{d.vendor} memory"
