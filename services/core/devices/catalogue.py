"""The device catalogue: HAMi's ``device-config.yaml`` (``nvidia:`` and ``vnpus:``) as typed data.

Built-in defaults equal HAMi's chart values (``charts/hami/templates/scheduler/device-configmap
.yaml``, hami.md §2.2) so a cluster without a ConfigMap behaves like a stock HAMi install. The
loader is strict (STYLE §8: human-written config gets ``forbid_unknown_fields`` semantics): an
unknown key or a bad value is a :class:`CatalogueError` naming its path, e.g.
``vnpus.configs[2].templates[0].memroy: unknown key``.

Aliases are data here too: resource names that HAMi users still write (``huawei.com/Ascend910B``
from before v2.7) or that name a family (``huawei.com/Ascend910``) map to card types.

Keys that HAMi's or Volcano's own ConfigMaps carry but that act on the node rather than on
placement (``NVIDIA_NOT_ACTED_ON``) load, so a pasted ``hami-scheduler-device`` or
``volcano-vgpu-device-config`` starts the service; each one present is listed in
:attr:`Catalogue.not_acted_on` for the services to warn about, never dropped without a word.
So are the keys HAMi's admission webhook acts on (``runtimeClassName`` aside: a GPU pod
without it waits, ``deviceshare.runtime_class_missing``) where Tessera, with no webhook, acts only through its own device plugin or not at all
(``_webhook_notes``: ``resourcePriorityName``, a non-default ``gpuCorePolicy``, ``overwriteEnv:
true``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from contracts.devices import MigGeometry, MigProfile
from services.core.configtext import DEVICE_KEYS, PasteError, unwrap
from services.core.devices.violations import CatalogueError

#: Top-level sections of HAMi's device-config.yaml for vendors Tessera does not model yet; they
#: are accepted (a stock HAMi ConfigMap loads) and ignored.
OTHER_VENDOR_SECTIONS = frozenset(
    {
        "cambricon",
        "hygon",
        "metax",
        "mthreads",
        "iluvatar",
        "iluvatars",
        "enflame",
        "kunlun",
        "awsneuron",
        "amd",
        "vastai",
        "biren",
    }
)


@dataclass(frozen=True, slots=True)
class VnpuTemplate:
    """One Ascend vNPU template (``ASCEND_VNPU_SPECS``): memory MB and AI cores it carves."""

    name: str
    memory: int
    ai_core: int
    ai_cpu: int = 0


@dataclass(frozen=True, slots=True)
class AscendChip:
    """One ``vnpus`` entry: a chip model, its resource names and templates (sorted by memory).

    HAMi sorts templates by memory ascending at init (``InitDevices``); ``trimMemory`` relies on
    that order, so the constructor of the catalogue does the same.
    """

    chip_name: str
    common_word: str
    resource_name: str
    resource_memory_name: str
    resource_core_name: str
    memory_allocatable: int
    memory_capacity: int
    ai_core: int
    ai_cpu: int = 0
    memory_factor: int = 1
    templates: tuple[VnpuTemplate, ...] = ()
    super_pod: bool = False
    runtime_class_name: str = ""
    overwrite_env: bool = False

    @property
    def slots_per_card(self) -> int:
        """HAMi ``VDeviceCount``: memoryAllocatable // smallest template memory, 1 without templates."""
        if not self.templates:
            return 1
        return max(1, self.memory_allocatable // self.templates[0].memory)

    @property
    def network_grouped(self) -> bool:
        """HAMi sets ``CustomInfo.NetworkID`` for chips whose commonWord starts with Ascend910."""
        return self.common_word.startswith("Ascend910")

    def template(self, name: str) -> VnpuTemplate | None:
        for t in self.templates:
            if t.name == name:
                return t
        return None


@dataclass(frozen=True, slots=True)
class MigModels:
    """One ``knownMigGeometries`` entry: the card models it is for (a card whose type contains
    one, case-insensitive) and the geometries allowed on them, in the file's order."""

    models: tuple[str, ...]
    geometries: tuple[MigGeometry, ...]


@dataclass(frozen=True, slots=True)
class NvidiaConfig:
    """The ``nvidia:`` section (HAMi ``NvidiaConfig`` with chart defaults).

    ``memory_factor`` is the MB in one unit of a memory request: HAMi's ``memoryFactor``, or
    Volcano's ``gpuMemoryFactor`` (volcano-vgpu-device-plugin registers ``volcano.sh/vgpu-memory``
    in units of that many MB and gives a container ``units × factor`` MB). Tessera books cards
    in MB, so both mean the same multiplication of the request.
    """

    resource_count_name: str = "nvidia.com/gpu"
    resource_memory_name: str = "nvidia.com/gpumem"
    resource_memory_percentage_name: str = "nvidia.com/gpumem-percentage"
    resource_core_name: str = "nvidia.com/gpucores"
    resource_priority_name: str = "nvidia.com/priority"
    overwrite_env: bool = False
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    device_split_count: int = 10
    device_memory_scaling: float = 1.0
    device_core_scaling: float = 1.0
    pre_configured_device_memory: int = 0
    gpu_core_policy: str = "default"
    lib_cuda_log_level: int = 1
    runtime_class_name: str = ""
    #: ``knownMigGeometries``: how a card in MIG mode may be carved, per model
    known_mig_geometries: tuple[MigModels, ...] = ()

    def mig_geometries(self, card_type: str) -> tuple[MigGeometry, ...]:
        """The geometries for a card of ``card_type``: the first entry naming a model the type
        contains (HAMi registers ``NVIDIA-A100-SXM4-80GB`` for model ``A100-SXM4-80GB``)."""
        low = card_type.lower()
        for entry in self.known_mig_geometries:
            if any(m.lower() in low for m in entry.models if m):
                return entry.geometries
        return ()


#: Keys of HAMi's ``NvidiaConfig`` (with its inlined ``NodeDefaultConfig``) and of Volcano's that
#: Tessera takes without acting on them, and why none changes which card a pod is booked on.
_MIG = ("Tessera chooses MIG profiles from knownMigGeometries (devices/mig.py); an allowlist "
        "of profiles is not applied on top of them")  # fmt: skip
NVIDIA_NOT_ACTED_ON: Mapping[str, str] = {
    "enableNumaTopology": "HAMi's device plugin tells the kubelet's Topology Manager each card's "
                          "NUMA node; that is node-side admission, not placement",
    "reportNodeCapacity": "HAMi's device plugin writes its vGPU totals into the node's capacity; "
                          "Tessera reads cards from the registration",
    "disableCoreLimit": "HAMi-core's in-container core limit; the cores a pod asks are still booked",
    "migProfileAllowlist": _MIG,
}  # fmt: skip


def _t(name: str, memory: int, ai_core: int, ai_cpu: int = 0) -> VnpuTemplate:
    return VnpuTemplate(name, memory, ai_core, ai_cpu)


def _chip(
    chip: str,
    cw: str,
    alloc: int,
    cap: int,
    ai_core: int,
    ai_cpu: int,
    templates: tuple[VnpuTemplate, ...],
    super_pod: bool = False,
) -> AscendChip:
    return AscendChip(
        chip_name=chip,
        common_word=cw,
        resource_name=f"huawei.com/{cw}",
        resource_memory_name=f"huawei.com/{cw}-memory",
        resource_core_name=f"huawei.com/{cw}-core",
        memory_allocatable=alloc,
        memory_capacity=cap,
        ai_core=ai_core,
        ai_cpu=ai_cpu,
        templates=tuple(sorted(templates, key=lambda t: (t.memory, t.name))),
        super_pod=super_pod,
    )


def default_ascend_chips() -> tuple[AscendChip, ...]:
    """HAMi chart values (hami.md §2.2), including the fixed 910B4-1 templates (#1497, #2288)."""
    b3 = (_t("vir05_1c_16g", 16384, 5, 1), _t("vir10_3c_32g", 32768, 10, 3))
    b4 = (_t("vir05_1c_8g", 8192, 5, 1), _t("vir10_3c_16g", 16384, 10, 3))
    return (
        _chip(
            "910A",
            "Ascend910A",
            32768,
            32768,
            30,
            0,
            (
                _t("vir02", 2184, 2),
                _t("vir04", 4369, 4),
                _t("vir08", 8738, 8),
                _t("vir16", 17476, 16),
            ),
        ),
        _chip(
            "910B2",
            "Ascend910B2",
            65536,
            65536,
            24,
            6,
            (
                _t("vir03_1c_8g", 8192, 3, 1),
                _t("vir06_1c_16g", 16384, 6, 1),
                _t("vir12_3c_32g", 32768, 12, 3),
            ),
        ),
        _chip("910B3", "Ascend910B3", 65536, 65536, 20, 7, b3),
        _chip("910B4-1", "Ascend910B4-1", 65536, 65536, 20, 7, b3),
        _chip("910B4", "Ascend910B4", 32768, 32768, 20, 7, b4),
        _chip(
            "310P3",
            "Ascend310P",
            21527,
            24576,
            8,
            7,
            (_t("vir01", 3072, 1, 1), _t("vir02", 6144, 2, 2), _t("vir04", 12288, 4, 4)),
        ),
        _chip("Ascend910", "Ascend910C", 65536, 65536, 20, 7, b3, super_pod=True),
    )


#: The 910 family (for the ``huawei.com/Ascend910`` alias): every 910-class commonWord.
_910_FAMILY = (
    "Ascend910A",
    "Ascend910B2",
    "Ascend910B3",
    "Ascend910B4",
    "Ascend910B4-1",
    "Ascend910C",
)


def default_aliases() -> dict[str, tuple[str, ...]]:
    """Alias count-resource name → card types (commonWords) it may land on.

    ``huawei.com/Ascend910B`` was 910B3's commonWord before HAMi v2.7 (PR #1315); the website
    examples still use it. ``huawei.com/Ascend910`` means "any 910-class card".
    """
    return {
        "huawei.com/Ascend910B": ("Ascend910B3",),
        "huawei.com/Ascend910": _910_FAMILY,
    }


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Everything the request parser and fit need to know about device models."""

    nvidia: NvidiaConfig = field(default_factory=NvidiaConfig)
    ascend: tuple[AscendChip, ...] = field(default_factory=default_ascend_chips)
    hami_vnpu_core: bool = False
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=default_aliases)
    #: One line per key the file set that Tessera takes and does not act on (path: why), for
    #: each service to warn about at start, as `scheduling.config.not_run` does for its conf.
    not_acted_on: tuple[str, ...] = field(default=(), compare=False)

    def chip(self, common_word: str) -> AscendChip | None:
        for c in self.ascend:
            if c.common_word == common_word:
                return c
        return None


def default_catalogue() -> Catalogue:
    """HAMi's chart defaults: NVIDIA plus the seven Ascend chips, hamiVnpuCore off."""
    return Catalogue()


# --- strict loader ---------------------------------------------------------------------------


def _int(path: str, v: object, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CatalogueError(path, f"expected an integer, got {v!r}")
    if v < minimum:
        raise CatalogueError(path, f"must be >= {minimum}, got {v}")
    return v


def _num(path: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise CatalogueError(path, f"expected a number, got {v!r}")
    if v <= 0:
        raise CatalogueError(path, f"must be > 0, got {v}")
    return float(v)


def _str(path: str, v: object) -> str:
    if not isinstance(v, str):
        raise CatalogueError(path, f"expected a string, got {v!r}")
    return v


def _bool(path: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise CatalogueError(path, f"expected true or false, got {v!r}")
    return v


def _list(path: str, v: object) -> list[Any]:
    if not isinstance(v, list):
        raise CatalogueError(path, f"expected a list, got {type(v).__name__}")
    return v


def _map(path: str, v: object) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise CatalogueError(path, f"expected a mapping, got {type(v).__name__}")
    for k in v:
        if not isinstance(k, str):
            raise CatalogueError(path, f"key {k!r} is not a string")
    return v


Field = tuple[str, Callable[[str, object], object]]


def _fields(
    path: str, raw: dict[str, Any], spec: Mapping[str, Field], required: set[str]
) -> dict[str, object]:
    """Convert ``raw`` by ``spec`` (yaml key → (attribute, converter)); unknown keys are errors."""
    out: dict[str, object] = {}
    for key, value in raw.items():
        if key not in spec:
            raise CatalogueError(f"{path}.{key}", "unknown key")
        attr, conv = spec[key]
        out[attr] = conv(f"{path}.{key}", value)
    for key in sorted(required):
        if key not in raw:
            raise CatalogueError(f"{path}.{key}", "required key missing")
    return out


def _pos(path: str, v: object) -> int:
    return _int(path, v, 1)


_NVIDIA_FIELDS: dict[str, Field] = {
    "resourceCountName": ("resource_count_name", _str),
    "resourceMemoryName": ("resource_memory_name", _str),
    "resourceMemoryPercentageName": ("resource_memory_percentage_name", _str),
    "resourceCoreName": ("resource_core_name", _str),
    "resourcePriorityName": ("resource_priority_name", _str),
    "overwriteEnv": ("overwrite_env", _bool),
    "defaultMemory": ("default_memory", _int),
    "defaultCores": ("default_cores", _int),
    "defaultGPUNum": ("default_gpu_num", _int),
    "memoryFactor": ("memory_factor", _pos),
    "deviceSplitCount": ("device_split_count", _pos),
    "deviceMemoryScaling": ("device_memory_scaling", _num),
    "deviceCoreScaling": ("device_core_scaling", _num),
    "preConfiguredDeviceMemory": ("pre_configured_device_memory", _int),
    "gpuCorePolicy": ("gpu_core_policy", _str),
    "libCudaLogLevel": ("lib_cuda_log_level", _int),
    "runtimeClassName": ("runtime_class_name", _str),
}

_TEMPLATE_FIELDS: dict[str, Field] = {
    "name": ("name", _str),
    "memory": ("memory", _pos),
    "aiCore": ("ai_core", _int),
    "aiCPU": ("ai_cpu", _int),
}

_CHIP_FIELDS: dict[str, Field] = {
    "chipName": ("chip_name", _str),
    "commonWord": ("common_word", _str),
    "resourceName": ("resource_name", _str),
    "resourceMemoryName": ("resource_memory_name", _str),
    "resourceCoreName": ("resource_core_name", _str),
    "memoryAllocatable": ("memory_allocatable", _pos),
    "memoryCapacity": ("memory_capacity", _pos),
    "memoryFactor": ("memory_factor", _pos),
    "aiCore": ("ai_core", _pos),
    "aiCPU": ("ai_cpu", _int),
    "runtimeClassName": ("runtime_class_name", _str),
    "overwriteEnv": ("overwrite_env", _bool),
    "superPod": ("super_pod", _bool),
}
_CHIP_REQUIRED = {
    "chipName",
    "commonWord",
    "resourceName",
    "resourceMemoryName",
    "memoryAllocatable",
    "memoryCapacity",
    "aiCore",
}


def _template(path: str, raw: object) -> VnpuTemplate:
    values = _fields(path, _map(path, raw), _TEMPLATE_FIELDS, {"name", "memory", "aiCore"})
    return VnpuTemplate(**values)  # type: ignore[arg-type]


def _ascend_chip(path: str, raw: object) -> AscendChip:
    m = _map(path, raw)
    templates_raw = m.get("templates", [])
    values = _fields(
        path, {k: v for k, v in m.items() if k != "templates"}, _CHIP_FIELDS, _CHIP_REQUIRED
    )
    templates = tuple(
        _template(f"{path}.templates[{i}]", t)
        for i, t in enumerate(_list(f"{path}.templates", templates_raw))
    )
    names = [t.name for t in templates]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise CatalogueError(f"{path}.templates[{i}].name", f"duplicate template {name!r}")
    capacity = values["memory_capacity"]
    allocatable = values["memory_allocatable"]
    assert isinstance(capacity, int) and isinstance(allocatable, int)
    if allocatable > capacity:
        raise CatalogueError(
            f"{path}.memoryAllocatable", f"{allocatable} exceeds memoryCapacity {capacity}"
        )
    for i, t in enumerate(templates):
        if t.memory > capacity:
            raise CatalogueError(
                f"{path}.templates[{i}].memory", f"{t.memory} exceeds memoryCapacity {capacity}"
            )
    values.setdefault("resource_core_name", f"{values['resource_name']}-core")
    values["templates"] = tuple(sorted(templates, key=lambda t: (t.memory, t.name)))
    return AscendChip(**values)  # type: ignore[arg-type]


def _vnpus(raw: object) -> tuple[tuple[AscendChip, ...], bool]:
    """Both forms: ``{hamiVnpuCore, configs: [...]}`` (v2.9+) and the older flat list (v2.8)."""
    if isinstance(raw, list):
        path, configs, core = "vnpus", raw, False
    else:
        m = _map("vnpus", raw)
        for key in m:
            if key not in ("hamiVnpuCore", "configs"):
                raise CatalogueError(f"vnpus.{key}", "unknown key")
        core = _bool("vnpus.hamiVnpuCore", m.get("hamiVnpuCore", False))
        path, configs = "vnpus.configs", _list("vnpus.configs", m.get("configs", []))
    chips = tuple(_ascend_chip(f"{path}[{i}]", c) for i, c in enumerate(configs))
    seen: dict[str, int] = {}
    for i, c in enumerate(chips):
        if c.common_word in seen:
            raise CatalogueError(
                f"{path}[{i}].commonWord", f"duplicate commonWord {c.common_word!r}"
            )
        seen[c.common_word] = i
    return chips, core


_MIG_PROFILE_FIELDS: dict[str, Field] = {
    "name": ("name", _str),
    "memory": ("memory", _pos),
    "count": ("count", _pos),
    "core": ("cores", _pos),
}


def _mig_profile(path: str, raw: object) -> MigProfile:
    values = _fields(path, _map(path, raw), _MIG_PROFILE_FIELDS, {"name", "memory", "count"})
    name = str(values["name"])
    head, dot, _ = name.partition(".")
    if not dot or len(head) < 2 or not head.endswith("g") or not head[:-1].isdigit():
        raise CatalogueError(f"{path}.name", f"{name!r} is not a MIG profile name "
                             "(<compute slices>g.<memory>, e.g. 2g.20gb)")  # fmt: skip
    return MigProfile(**values)  # type: ignore[arg-type]


def _mig_geometry(path: str, raw: object) -> MigGeometry:
    """A geometry: HAMi's list of profiles, or Volcano's ``{group, geometries: [...]}``."""
    if isinstance(raw, dict):
        m = _map(path, raw)
        for key in m:
            if key not in ("group", "geometries"):
                raise CatalogueError(f"{path}.{key}", "unknown key (a geometry is a list of "
                                     "profiles, or {group, geometries: [profiles]})")  # fmt: skip
        group = _str(f"{path}.group", m.get("group", ""))
        path, items = f"{path}.geometries", _list(f"{path}.geometries", m.get("geometries"))
    else:
        group, items = "", _list(path, raw)
    if not items:
        raise CatalogueError(path, "a geometry needs at least one profile")
    return MigGeometry(group=group, profiles=tuple(
        _mig_profile(f"{path}[{i}]", p) for i, p in enumerate(items)))  # fmt: skip


def _known_mig_geometries(raw: object) -> tuple[MigModels, ...]:
    out = []
    path = "nvidia.knownMigGeometries"
    for i, entry in enumerate(_list(path, raw)):
        here = f"{path}[{i}]"
        m = _map(here, entry)
        for key in m:
            if key not in ("models", "allowedGeometries"):
                raise CatalogueError(f"{here}.{key}", "unknown key")
        for key in ("models", "allowedGeometries"):
            if key not in m:
                raise CatalogueError(f"{here}.{key}", "required key missing")
        models = tuple(_str(f"{here}.models[{j}]", v)
                       for j, v in enumerate(_list(f"{here}.models", m["models"])))  # fmt: skip
        geometries = tuple(_mig_geometry(f"{here}.allowedGeometries[{j}]", g)
                           for j, g in enumerate(_list(f"{here}.allowedGeometries", m["allowedGeometries"])))  # fmt: skip
        out.append(MigModels(models, geometries))
    return tuple(out)


def _nvidia(raw: object) -> tuple[NvidiaConfig, tuple[str, ...]]:
    """The ``nvidia:`` section and its lines for :attr:`Catalogue.not_acted_on`."""
    m = dict(_map("nvidia", raw))
    noted = tuple(f"nvidia.{key}: not acted on by Tessera ({NVIDIA_NOT_ACTED_ON[key]})"
                  for key in m if key in NVIDIA_NOT_ACTED_ON)  # fmt: skip
    for key in NVIDIA_NOT_ACTED_ON:
        m.pop(key, None)
    mig = _known_mig_geometries(m.pop("knownMigGeometries", None) or [])
    if "gpuMemoryFactor" in m:  # Volcano's name for memoryFactor (see NvidiaConfig)
        factor = _pos("nvidia.gpuMemoryFactor", m.pop("gpuMemoryFactor"))
        hami = _pos("nvidia.memoryFactor", m.setdefault("memoryFactor", factor))
        if hami != factor:
            raise CatalogueError("nvidia.gpuMemoryFactor", f"{factor} differs from memoryFactor "
                                 f"{hami}: both are the MB in one unit of a memory request (Volcano's "
                                 "name and HAMi's) and Tessera has one unit; keep one of them")  # fmt: skip
    values = _fields("nvidia", m, _NVIDIA_FIELDS, set())
    config = NvidiaConfig(**values, known_mig_geometries=mig)  # type: ignore[arg-type]
    return config, noted + _webhook_notes(config, m)


#: what HAMi's webhook (``MutateAdmission``) does with these keys and Tessera, which has no
#: webhook (a created pod's spec cannot change), does instead or cannot do
def _webhook_notes(c: NvidiaConfig, given: Mapping[str, object]) -> tuple[str, ...]:
    plugin_only = ("acted on only on nodes running Tessera's device plugin, whose Allocate gives "
                   "a GPU container {env}; on a node running HAMi's device plugin HAMi's webhook "
                   "set it, and Tessera has no webhook: set {env} in those containers' env there")  # fmt: skip
    out = []
    if "resourcePriorityName" in given:
        env = f"CUDA_TASK_PRIORITY (= its {c.resource_priority_name} limit)"
        out.append(f"nvidia.resourcePriorityName: {plugin_only.format(env=env)}")
    if c.gpu_core_policy not in ("", "default"):
        env = f"GPU_CORE_UTILIZATION_POLICY={c.gpu_core_policy}"
        out.append(f"nvidia.gpuCorePolicy: {plugin_only.format(env=env)}")
    if c.overwrite_env:
        out.append("nvidia.overwriteEnv: not acted on by Tessera (HAMi's webhook sets "
                   "NVIDIA_VISIBLE_DEVICES=none in each container that asks no GPU, so the NVIDIA "
                   "runtime, the node's default, gives it none; Tessera has no webhook and cannot "
                   "change a created pod: set NVIDIA_VISIBLE_DEVICES=none in such containers' env)")  # fmt: skip
    return tuple(out)


def catalogue_from_mapping(doc: Mapping[str, Any]) -> Catalogue:
    """A catalogue from a parsed ``device-config.yaml``; missing sections keep the defaults."""
    root = _map("", dict(doc))
    for key in root:
        if key not in ("nvidia", "vnpus") and key not in OTHER_VENDOR_SECTIONS:
            raise CatalogueError(key, "unknown key")
    nvidia, noted = NvidiaConfig(), ()
    if root.get("nvidia") is not None:
        nvidia, noted = _nvidia(root["nvidia"])
    chips, core = default_ascend_chips(), False
    if root.get("vnpus") is not None:
        chips, core = _vnpus(root["vnpus"])
    known = {c.common_word for c in chips}
    aliases = {
        name: tuple(t for t in types if t in known)
        for name, types in default_aliases().items()
        if name.removeprefix("huawei.com/") not in known
    }
    return Catalogue(
        nvidia=nvidia,
        ascend=chips,
        hami_vnpu_core=core,
        aliases={k: v for k, v in aliases.items() if v},
        not_acted_on=noted,
    )


def load_catalogue(text: str) -> Catalogue:
    """Parse HAMi's ``device-config.yaml`` text (an empty document gives the defaults), its
    ``device-config.yaml: |`` block or the whole ConfigMap (``configtext``); an error's path
    starts where the configuration sits in what was pasted."""
    try:
        inner, where = unwrap(text, DEVICE_KEYS)
    except PasteError as exc:
        raise CatalogueError("", str(exc)) from None
    try:
        catalogue = _load_catalogue(inner)
    except CatalogueError as exc:
        if not where:
            raise
        raise CatalogueError(f"{where}: {exc.path}" if exc.path else where, exc.problem) from None
    if where and catalogue.not_acted_on:
        notes = tuple(f"{where}: {line}" for line in catalogue.not_acted_on)
        catalogue = replace(catalogue, not_acted_on=notes)
    return catalogue


def _load_catalogue(text: str) -> Catalogue:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogueError("", f"not valid YAML: {exc}") from exc
    if doc is None:
        return default_catalogue()
    if not isinstance(doc, dict):
        raise CatalogueError("", f"expected a mapping at the top level, got {type(doc).__name__}")
    return catalogue_from_mapping(doc)
