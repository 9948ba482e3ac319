"""HAMi's annotation codecs (hami.md §2.5, §3.1–3.2): what its device plugins write on nodes and
read on pods, so that HAMi's plugins serve `Allocate` for pods Tessera binds, unchanged.

Pure text in, records out. Node side: the register annotation (JSON, or the legacy CSV form
`uuid,count,devmem,devcore,type,numa,health[,index,mode]:`), the handshake. Pod side: the
`…-devices-to-allocate` / `…-devices-allocated` encoding (`UUID,Type,memMiB,cores:` per device,
`;` after each container, init containers first) and Ascend's `huawei.com/<commonWord>`
RuntimeInfo JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from contracts.devices import CardSpec, SliceSpec
from contracts.events import SliceAssignment

NVIDIA_REGISTER = "hami.io/node-nvidia-register"
NVIDIA_HANDSHAKE = "hami.io/node-handshake"
ASCEND_REGISTER_PREFIX = "hami.io/node-register-"
ASCEND_HANDSHAKE_PREFIX = "hami.io/node-handshake-"
VNPU_CORE = "hami-vnpu-core"
NODE_LOCK = "hami.io/mutex.lock"

VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
PREDICATE_TIME = "predicate-time"
NVIDIA_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
NVIDIA_ALLOCATED = "hami.io/vgpu-devices-allocated"


class CodecError(ValueError):
    """An annotation is not in the form HAMi writes (names the key and what is wrong)."""


@dataclass(frozen=True, slots=True)
class RegisteredDevice:
    """One device of a node register annotation, as HAMi's `DeviceInfo` carries it."""

    uuid: str
    index: int
    count: int  # split count (slices the card may hold)
    devmem: int  # MB
    devcore: int
    type: str
    numa: int = 0
    health: bool = False  # Go's omitempty drops false: absent means unhealthy
    mode: str = ""
    network_id: int = 0


@dataclass(frozen=True, slots=True)
class PodDevice:
    """One device of a pod annotation: `UUID,Type,memMiB,cores`."""

    uuid: str
    type: str
    memory: int
    cores: int


def ascend_register_key(common_word: str) -> str:
    return f"{ASCEND_REGISTER_PREFIX}{common_word}"


def ascend_handshake_key(common_word: str) -> str:
    return f"{ASCEND_HANDSHAKE_PREFIX}{common_word}"


def ascend_to_allocate_key(common_word: str) -> str:
    return f"hami.io/{common_word}-devices-to-allocate"


def ascend_allocated_key(common_word: str) -> str:
    return f"hami.io/{common_word}-devices-allocated"


def _int(key: str, raw: object, what: str) -> int:
    if isinstance(raw, bool):
        raise CodecError(f"{key}: {what} is {raw!r}, not a number")
    if raw is None:
        return 0
    try:
        return int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise CodecError(f"{key}: {what} is {raw!r}, not a number") from None


def decode_register(key: str, value: str) -> list[RegisteredDevice]:
    """A register annotation, JSON (current) or CSV (legacy `DecodeNodeDevices`)."""
    text = value.strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CodecError(f"{key}: not JSON: {exc}") from None
        if not isinstance(raw, list):
            raise CodecError(f"{key}: expected a JSON list of devices")
        out = []
        for i, d in enumerate(raw):
            if not isinstance(d, dict) or not d.get("id"):
                raise CodecError(f"{key}[{i}]: a device needs an `id`")
            custom = d.get("custominfo") or d.get("customInfo") or {}
            out.append(RegisteredDevice(
                uuid=str(d["id"]), index=_int(key, d.get("index"), "index"),
                count=_int(key, d.get("count"), "count"), devmem=_int(key, d.get("devmem"), "devmem"),
                devcore=_int(key, d.get("devcore"), "devcore"), type=str(d.get("type") or ""),
                numa=_int(key, d.get("numa"), "numa"), health=bool(d.get("health", False)),
                mode=str(d.get("mode") or ""),
                network_id=_int(key, custom.get("NetworkID") if isinstance(custom, dict) else 0, "NetworkID"),
            ))  # fmt: skip
        return out
    out = []
    for i, part in enumerate(p for p in text.split(":") if p.strip()):
        f = [x.strip() for x in part.split(",")]
        if len(f) not in (7, 9):
            raise CodecError(f"{key}: device {i} has {len(f)} fields, expected 7 or 9 "
                             "(uuid,count,devmem,devcore,type,numa,health[,index,mode])")  # fmt: skip
        out.append(RegisteredDevice(
            uuid=f[0], count=_int(key, f[1], "count"), devmem=_int(key, f[2], "devmem"),
            devcore=_int(key, f[3], "devcore"), type=f[4], numa=_int(key, f[5], "numa"),
            health=f[6].lower() == "true", index=_int(key, f[7], "index") if len(f) == 9 else i,
            mode=f[8] if len(f) == 9 else "",
        ))  # fmt: skip
    return out


def encode_register(devices: Sequence[RegisteredDevice], network_ids: bool = False) -> str:
    """The JSON register annotation as HAMi's `MarshalNodeDevices` writes it: Go's `omitempty`
    drops zero values (index 0, numa 0, health false, empty mode), and Ascend910* chips carry
    `custominfo.NetworkID` (`network_ids`), which `decode_register` reads back."""
    out = []
    for d in devices:
        item: dict[str, object] = {"id": d.uuid}
        for key, value in (("index", d.index), ("count", d.count), ("devmem", d.devmem),
                           ("devcore", d.devcore), ("type", d.type), ("numa", d.numa),
                           ("mode", d.mode), ("health", d.health)):  # fmt: skip
            if value:
                item[key] = value
        if network_ids:
            item["custominfo"] = {"NetworkID": d.network_id}
        out.append(item)
    return json.dumps(out, separators=(",", ":"))


def reported_value(now: float) -> str:
    """The handshake an agent writes: `Reported_<YYYY.MM.DD hh:mm:ss>` (UTC)."""
    return "Reported_" + datetime.fromtimestamp(now, UTC).strftime("%Y.%m.%d %H:%M:%S")


def lock_value(now: float, namespace: str, pod: str) -> str:
    """The node lock: `<RFC3339>,<namespace>,<pod>` (HAMi `nodelock`)."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp},{namespace},{pod}"


def lock_holder(value: str) -> tuple[float, str, str] | None:
    """(time, namespace, pod) of a node lock value; None when it names no pod."""
    parts = value.split(",")
    if len(parts) < 3:
        return None
    try:
        at = datetime.fromisoformat(parts[0].replace("Z", "+00:00")).timestamp()
    except ValueError:
        at = 0.0
    return at, parts[1], parts[2]


def encode_pod_devices(containers: Sequence[Sequence[PodDevice]]) -> str:
    """`UUID,Type,mem,cores:` per device, `;` closing every container (empty ones included)."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.memory},{d.cores}:" for d in devs) + ";" for devs in containers
    )


def decode_pod_devices(key: str, value: str) -> list[list[PodDevice]]:
    """Inverse of `encode_pod_devices`; keeps empty container slots (HAMi `DecodePodDevices`)."""
    if not value:
        return []
    slots = value.split(";")
    if slots and slots[-1] == "":
        slots = slots[:-1]
    out: list[list[PodDevice]] = []
    for slot in slots:
        devs = []
        for dev in (d for d in slot.split(":") if d):
            f = dev.split(",")
            if len(f) < 4:
                raise CodecError(f"{key}: device {dev!r} needs UUID,Type,memory,cores")
            devs.append(PodDevice(f[0], f[1], _int(key, f[2], "memory"), _int(key, f[3], "cores")))
        out.append(devs)
    return out


def allocated_devices(annotations: Mapping[str, str]) -> list[PodDevice]:
    """Every device of the pod's `hami.io/*-devices-allocated` annotations (what HAMi's
    scheduler booked for a pod it placed); unreadable values are skipped."""
    out: list[PodDevice] = []
    for key in sorted(annotations):
        if key.startswith("hami.io/") and key.endswith("-devices-allocated"):
            try:
                out.extend(d for slot in decode_pod_devices(key, annotations[key]) for d in slot)
            except CodecError:
                continue
    return out


def annotated_slices(node: str, annotations: Mapping[str, str], init_containers: int = 0,
                     ) -> tuple[SliceAssignment, ...]:  # fmt: skip
    """A running pod's slices as HAMi's annotations give them (memory and cores per card; the
    allocator reads the slice kind off the card it books them on), one per card as its ledger
    books a task: HAMi fits each container on its own, so two may hold one card — the app
    containers' slices add up, and the init containers' (the first `init_containers` slots,
    done before the app starts) count by their peak: max(init peak, app sum), HAMi's booking.
    As separate slices the second was refused, so a card HAMi had filled looked part free."""
    templates = runtime_templates(annotations)
    app: dict[str, list[int]] = {}  # uuid → [memory, cores, devices], in the pod's order
    init: dict[str, list[int]] = {}  # uuid → [peak memory, peak cores]
    order: dict[str, None] = {}
    for key in sorted(annotations):
        if not (key.startswith("hami.io/") and key.endswith("-devices-allocated")):
            continue
        try:
            slots = decode_pod_devices(key, annotations[key])
        except CodecError:
            continue
        for i, slot in enumerate(slots):
            for d in slot:
                order[d.uuid] = None
                if i < init_containers:
                    peak = init.setdefault(d.uuid, [0, 0])
                    peak[0], peak[1] = max(peak[0], d.memory), max(peak[1], d.cores)
                else:
                    got = app.setdefault(d.uuid, [0, 0, 0])
                    got[0] += d.memory
                    got[1] += d.cores
                    got[2] += 1
    out = []
    for uuid in order:
        mem, cores, n = app.get(uuid, [0, 0, 0])
        peak_mem, peak_cores = init.get(uuid, [0, 0])
        out.append(SliceAssignment(card=uuid, node=node, slice=SliceSpec(
            kind="soft", memory=max(mem, peak_mem), cores=max(cores, peak_cores),
            template=templates.get(uuid) if n <= 1 else None, slots=max(n, 1))))  # fmt: skip
    return tuple(out)


def runtime_templates(annotations: Mapping[str, str]) -> dict[str, str]:
    """uuid → vNPU template named by Ascend's RuntimeInfo (`huawei.com/<commonWord>`)."""
    out: dict[str, str] = {}
    for key, value in annotations.items():
        if not key.startswith("huawei.com/") or not value.startswith("["):
            continue
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            continue
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("UUID") and item.get("temp"):
                out[str(item["UUID"])] = str(item["temp"])
    return out


def booked_slice(card: CardSpec, memory: int, cores: int, template: str | None = None,
                 slots: int = 1) -> SliceSpec:  # fmt: skip
    """What an annotation's memory and cores mean on `card`: its whole memory is the whole card
    (exclusive), on an Ascend template node a template slice, else a soft slice; `slots`: the
    containers it serves (`annotated_slices`)."""
    if memory >= card.memory:
        return SliceSpec(kind="whole", memory=card.memory, cores=card.cores, exclusive=True, slots=slots)
    if card.mode == "template" and card.vendor == "huawei":  # unnamed: booked by its size
        return SliceSpec(kind="template", memory=memory, cores=cores, template=template or "allocated", slots=slots)
    return SliceSpec(kind="soft", memory=memory, cores=cores, slots=slots)


def encode_runtime_info(devices: Sequence[PodDevice], templates: Mapping[str, str]) -> str:
    """Ascend `huawei.com/<commonWord>`: `[{"UUID","temp","memory","core"}]`; `temp` only in
    template mode, `core` omitted when 0 (as HAMi's `PatchAnnotations` writes it)."""
    items = []
    for d in devices:
        item: dict[str, object] = {"UUID": d.uuid}
        if templates.get(d.uuid):
            item["temp"] = templates[d.uuid]
        item["memory"] = d.memory
        if d.cores:
            item["core"] = d.cores
        items.append(item)
    return json.dumps(items, separators=(",", ":"))


def handshake_requested(value: str) -> bool:
    return value.startswith("Requesting_")


def handshake_time(value: str) -> str:
    """The timestamp part of `Reported_<ts>` / `Requesting_<ts>` ("" when absent)."""
    _, _, ts = value.partition("_")
    return ts
