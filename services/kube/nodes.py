"""A Kubernetes Node → what the log says of it (`NodeRegistered`, or lost), the way HAMi's
scheduler reads nodes (hami.md §3.1). Pure: the node object and the time in, records out.

Cards come from HAMi's register annotations (the device plugins write them); a count the
vendor's own device plugin serves with no registration of its family beside it
(`nvidia.com/gpu: 8`, `huawei.com/Ascend910: 8`) becomes that many whole cards of mode `plugin`
(`registration.plugin_cards`), as Volcano fits such a count against allocatable; another name
of that family (not a count Tessera's requests use) is a problem of the node (`unregistered`).
A vendor whose handshake stays `Requesting_…` for more than 60 s while the node's allocatable
count of that vendor is 0 loses its devices (HAMi `CheckHealth`); an NVIDIA node whose
allocatable `nvidia.com/gpu` is 0 reports none (HAMi ≥ 2.9, no handshake).
A cordoned node carries the taint Kubernetes gives it, so the predicates say "cordoned".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contracts import hami
from contracts.devices import CardSpec
from contracts.events import NodeRegistered
from services.core.devices import registration
from services.core.devices.catalogue import Catalogue
from services.core.devices.mig import MIG_MODE, MIG_WORDS, kept_off
from services.core.scheduling.resources import is_device_resource
from services.core.workload.quantity import (
    QuantityError,
    capacity_units,
    cpu_milli,
    memory_mib_down,
    parse_quantity,
)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable:NoSchedule"
#: the reasons of a `NodeLost` the node agent writes: the Node object is gone, or it is there
#: but not Ready (it still counts among the cluster's nodes, as kube-scheduler counts it)
NODE_DELETED, NODE_NOT_READY = "node deleted", "node is not Ready"
HANDSHAKE_TIMEOUT = 60.0  # seconds a `Requesting_` handshake may stay unanswered (HAMi's code)
#: Node annotations the scheduler reads; the rest (handshakes, locks, register blobs) change
#: every 30 s and would make every node re-register for nothing.
KEPT_ANNOTATIONS = (hami.VNPU_CORE, "hami.io/device-cordon")


@dataclass(frozen=True, slots=True)
class NodeView:
    """What one Node object says: its registration, readiness, and the handshakes to answer."""

    registered: NodeRegistered
    ready: bool
    problems: tuple[str, ...] = ()  # annotations that could not be read (named, not fatal)
    answer_handshakes: tuple[str, ...] = ()  # handshake keys to set to `Requesting_<now>`


def _parse_time(ts: str) -> float | None:
    for fmt in ("%Y.%m.%d %H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(ts, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


def handshake_value(now: float) -> str:
    return "Requesting_" + datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _count(allocatable: Mapping[str, Any], resource: str) -> int | None:
    if resource not in allocatable:
        return None
    try:
        return int(parse_quantity(allocatable[resource]))
    except QuantityError:
        return None


def _devices_lost(handshake: str, allocatable: int | None, now: float) -> bool:
    if not hami.handshake_requested(handshake):
        return False
    since = _parse_time(hami.handshake_time(handshake))
    return since is not None and now - since > HANDSHAKE_TIMEOUT and not allocatable


#: why a card HAMi registers with `health: false` is unhealthy: its annotation says no more
UNHEALTHY_REGISTERED = "its device plugin registers it unhealthy (HAMi's node register annotation)"


def _health_reason(d: hami.RegisteredDevice) -> str:
    return "" if d.health else UNHEALTHY_REGISTERED


def _ascend_cards(node: str, cw: str, devices: list[hami.RegisteredDevice], hami_core: bool,
                  catalogue: Catalogue) -> list[CardSpec]:  # fmt: skip
    chip = catalogue.chip(cw)
    out = []
    for d in devices:
        cores = 100 if hami_core else (d.devcore or (chip.ai_core if chip else 0))
        out.append(CardSpec(
            uuid=d.uuid, node=node, index=d.index, type=d.type or cw, vendor="huawei",
            memory=d.devmem, cores=cores, split_count=max(1, d.count), numa=d.numa,
            network_id=d.network_id, healthy=d.health, health_reason=_health_reason(d),
            mode="hami-core" if hami_core else "template",
        ))  # fmt: skip
    return out


def _nvidia_cards(node: str, devices: list[hami.RegisteredDevice], catalogue: Catalogue) -> list[CardSpec]:
    """HAMi's registered GPUs; one in MIG mode carries its model's ``knownMigGeometries``
    from the device config (``devices/mig.py``: how its instances are carved)."""
    return [CardSpec(
        uuid=d.uuid, node=node, index=d.index, type=d.type, vendor="nvidia", memory=d.devmem,
        cores=d.devcore or 100, split_count=max(1, d.count), numa=d.numa, healthy=d.health,
        health_reason=_health_reason(d), mode=d.mode or "hami-core",
        mig_geometries=catalogue.nvidia.mig_geometries(d.type) if d.mode == MIG_MODE else (),
    ) for d in devices]  # fmt: skip



def taint_text(taint: Mapping[str, Any]) -> str:
    key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
    effect = str(taint.get("effect") or "NoSchedule")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def other_resources(allocatable: Mapping[str, Any]) -> dict[str, int]:
    """`NodeRegistered.resources`: allocatable ephemeral-storage, hugepages and extended
    resources other than the cards' (those are booked on cards), positive ones, in the units a
    pod's request is read in (byte amounts rounded down, as requests are up: `capacity_units`);
    a value that does not parse counts as none."""
    out: dict[str, int] = {}
    for name, value in sorted(allocatable.items()):
        name = str(name)
        if name in ("cpu", "memory", "pods") or is_device_resource(name):
            continue
        try:
            units = capacity_units(name, value)
        except QuantityError:
            continue
        if units > 0:
            out[name] = units
    return out


def served(allocatable: Mapping[str, Any]) -> tuple[str, ...]:
    """The extended resources (domain-qualified names) the kubelet has a positive count of: a
    device plugin serves them. A name with none left (its plugin gone, every device unhealthy)
    makes the kubelet refuse a pod asking it, as one it does not serve makes it drop the ask."""
    out = []
    for name, value in allocatable.items():
        if "/" not in str(name):
            continue
        try:
            if parse_quantity(value) > 0:
                out.append(str(name))
        except QuantityError:
            continue
    return tuple(sorted(out))


def unregistered(allocatable: Mapping[str, Any], annotations: Mapping[str, str],
                 counted: Mapping[str, str] | None = None) -> list[str]:  # fmt: skip
    """A name the kubelet serves for a family whose registration the node lacks (Huawei's or
    NVIDIA's own plugin alone) that is no count Tessera makes whole cards of (`counted`:
    `registration.counted_resources`): the node offers devices no pod of Tessera's can get,
    which an operator must read here rather than only in a waiting pod's words."""
    registered = registration.registered_vendors(annotations)
    out = []
    for name in served(allocatable):
        vendor = registration.vendor_of(name)
        if vendor is None or vendor in registered or name.endswith(("-memory", "-core")) \
                or name in (counted or {}):
            continue
        out.append(f"status.allocatable.{name}: {allocatable[name]} served by a device plugin "
                   f"without HAMi's registration (no {registration.register_annotation(vendor)} "
                   f"annotation): {registration.BOOKED_FROM}, so no pod gets these; "
                   f"{registration.install(vendor)}")  # fmt: skip
    return out


def node_view(obj: Mapping[str, Any], catalogue: Catalogue, now: float) -> NodeView:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    annotations: dict[str, str] = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    allocatable = status.get("allocatable") or {}
    problems: list[str] = []
    answer: list[str] = []
    cards: list[CardSpec] = []
    hami_core = annotations.get(hami.VNPU_CORE, "").lower() == "true"
    for key in sorted(annotations):
        value = annotations[key]
        try:
            if key == hami.NVIDIA_REGISTER:
                if _count(allocatable, catalogue.nvidia.resource_count_name) == 0:
                    continue
                nvidia = _nvidia_cards(name, hami.decode_register(key, value), catalogue)
                problems.extend(f"{key}: card {c.uuid} is in {MIG_WORDS} (no knownMigGeometries for "
                                f"{c.type} in the device config); no pod is placed on it"
                                for c in nvidia if kept_off(c))  # fmt: skip
                cards.extend(nvidia)
            elif key.startswith(hami.ASCEND_REGISTER_PREFIX):
                cw = key[len(hami.ASCEND_REGISTER_PREFIX):]
                chip = catalogue.chip(cw)
                if chip is None:
                    problems.append(f"{key}: {cw} is not in the device catalogue (vnpus)")
                    continue
                shake_key = hami.ascend_handshake_key(cw)
                shake = annotations.get(shake_key, "")
                if _devices_lost(shake, _count(allocatable, chip.resource_name), now):
                    continue
                if shake.startswith("Reported_"):
                    answer.append(shake_key)  # ask again: an agent that stops answering is seen
                cards.extend(_ascend_cards(name, cw, hami.decode_register(key, value), hami_core,
                                           catalogue))  # fmt: skip
        except hami.CodecError as exc:
            problems.append(str(exc))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    names = served(allocatable)
    counts = {n: c for n in names if (c := _count(allocatable, n))}
    cards.extend(registration.plugin_cards(name, counts, labels, registration.registered_vendors(annotations),
                                           catalogue))  # fmt: skip
    problems.extend(unregistered(allocatable, annotations, registration.counted_resources(catalogue)))
    taints = [taint_text(t) for t in spec.get("taints") or []]
    if spec.get("unschedulable") and UNSCHEDULABLE_TAINT not in taints:
        taints.append(UNSCHEDULABLE_TAINT)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])  # fmt: skip
    try:
        cpu = cpu_milli(allocatable.get("cpu", 0))
        mem = memory_mib_down(allocatable.get("memory", 0))  # bytes that hold asks: rounded down
        pods = int(parse_quantity(allocatable.get("pods", 110)))
    except QuantityError as exc:
        problems.append(f"status.allocatable: {exc}")
        cpu, mem, pods = 0, 0, 0
    registered = NodeRegistered(
        node=name, cpu_milli=cpu, memory_mib=mem, pods=pods,
        labels=labels,
        annotations={k: annotations[k] for k in KEPT_ANNOTATIONS if k in annotations},
        taints=tuple(taints), cards=tuple(sorted(cards, key=lambda c: (c.vendor, c.index, c.uuid))),
        extended=names, resources=other_resources(allocatable), uid=str(meta.get("uid") or ""),
    )  # fmt: skip
    return NodeView(registered, ready, tuple(problems), tuple(answer))
