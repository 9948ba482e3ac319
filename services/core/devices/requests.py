"""Container resources + pod annotations → ``DeviceRequest``s, every vendor at once.

This is the admission half of HAMi (``MutateAdmission`` + ``GenerateResourceRequests``) as a
pure function. All violations of a container are collected (each vendor reports its own, and
unknown names in a device domain get a "did you mean" hint from :mod:`difflib`), then raised
together as one :class:`RequestRejected`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

from contracts.workloads import DeviceRequest
from services.core.devices.catalogue import AscendChip, default_ascend_chips
from services.core.devices.registry import VendorRegistry
from services.core.devices.vendor import ResourceList
from services.core.devices.violations import RequestRejected, Violation
from services.core.scheduling.resources import is_plain_extended

_EMPTY: Mapping[str, str] = {}


def _domains(names: frozenset[str]) -> frozenset[str]:
    return frozenset(n.split("/", 1)[0] for n in names if "/" in n)


#: MindCluster's 310P vNPU resource, which Volcano's deviceshare books under
#: `deviceshare.AscendMindClusterVNPUEnable` (its second vNPU mode, docs/user-guide/how_to_use_vnpu.md)
MINDCLUSTER_VNPU = "huawei.com/npu-core"
#: the chip MindCluster's vNPU mode serves (`ring-controller.atlas: ascend-310P`)
_MINDCLUSTER_CHIP = "Ascend310P"


def _mindcluster_vnpu_rule(chips: Sequence[AscendChip]) -> str:
    """Why `huawei.com/npu-core` is refused and what to write instead: not a typo but a Volcano
    mode Tessera does not run (a bare "unknown device resource" sent a MindCluster user looking
    for one), with the HAMi 310P names and the configured templates' AI cores beside their sizes."""
    chip = next((c for c in chips if c.common_word == _MINDCLUSTER_CHIP), None)
    if chip is None:
        return ("is Volcano's MindCluster vNPU mode (deviceshare.AscendMindClusterVNPUEnable, with "
                "the ring-controller.atlas and vnpu-level labels), which Tessera does not run: it "
                "does HAMi's vNPU, huawei.com/<model> with huawei.com/<model>-memory")  # fmt: skip
    sizes = ", ".join(f"{t.name} {t.memory} MB = {_cores(t.ai_core)}" for t in chip.templates)
    return (f"is Volcano's MindCluster vNPU mode (deviceshare.AscendMindClusterVNPUEnable, with the "
            "ring-controller.atlas and vnpu-level labels), which Tessera does not run: it does HAMi's "
            f"vNPU instead: ask {chip.resource_name}: 1 with {chip.resource_memory_name}: <MB>, "
            f"rounded up to a vNPU template ({sizes}), or {chip.resource_name}: 1 alone for a whole "
            f"chip ({_cores(chip.ai_core)})")  # fmt: skip


def _cores(n: int) -> str:
    return f"{n} AI core" if n == 1 else f"{n} AI cores"


def unknown_device_names(
    names: Iterable[str], known: frozenset[str], chips: Sequence[AscendChip] | None = None
) -> list[tuple[str, str]]:
    """(name, rule) for each name in a device vendor's domain (``nvidia.com/``, ``huawei.com/``,
    ``volcano.sh/``) that no vendor reads: probably a typo, so the rule names the closest known
    name. Shared by container resources and Queue capability/deserved/guarantee (issue 13), so
    both say the same thing about the same typo. MindCluster's `huawei.com/npu-core` is no
    typo: its rule names the mode and what to write (``chips``: the catalogue's Ascend chips,
    HAMi's defaults when None)."""
    domains = _domains(known)
    out: list[tuple[str, str]] = []
    for name in sorted(names):
        if name in known or "/" not in name or name.split("/", 1)[0] not in domains:
            continue
        if is_plain_extended(name):
            continue  # NVIDIA's plugin's MIG / `.shared` names: extended resources, no typo
        if name == MINDCLUSTER_VNPU:
            known_chips = default_ascend_chips() if chips is None else chips
            out.append((name, _mindcluster_vnpu_rule(known_chips)))
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        out.append((name, f"unknown device resource{hint}"))
    return out


def unknown_resource_violations(names: set[str], registry: VendorRegistry) -> list[Violation]:
    """A container's unknown device-domain names, rejected with the closest known name."""
    found = unknown_device_names(names, registry.resource_names(), registry.catalogue.ascend)
    return [Violation(n, "", rule) for n, rule in found]


def one_request_violations(names: set[str], registry: VendorRegistry) -> list[Violation]:
    """One container's count, memory and core names of one vendor must resolve to one request
    on one card model. `huawei.com/Ascend910B: 1` (the pre-v2.7 name of 910B3) with
    `huawei.com/Ascend910B3-memory: 4096` would otherwise be read as two requests, a whole card
    and a slice of another (issue 13); the same for `nvidia.com/gpu` with `volcano.sh/vgpu-memory`
    and for any pair of family and model names. (Two vendors in one container stay two
    requests: an NVIDIA and an Ascend card cannot be mistaken for one another.)"""
    out: list[Violation] = []
    for vendor in registry:
        touched: list[tuple[str, frozenset[str]]] = []  # (first name seen, its group)
        for name in sorted(names):
            group = next((g for g in vendor.resource_groups() if name in g), None)
            if group is not None and all(group != g for _, g in touched):
                touched.append((name, group))
        if len(touched) < 2:
            continue
        first, group = touched[0]
        together = ", ".join(sorted(group))
        rule = ("are two device requests (two cards): one container's count, memory and core "
                "resources must resolve to one request on one card model; use the names of one "
                f"model ({together})")  # fmt: skip
        out.extend(Violation(other, "", f"{first} and {other} {rule}") for other, _ in touched[1:])
    return out


def parse_container(
    limits: ResourceList,
    requests: ResourceList | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    registry: VendorRegistry,
) -> tuple[DeviceRequest, ...]:
    """All device requests of one container, or :class:`RequestRejected` listing every violation.

    ``limits``/``requests`` are the container's resource maps (values may be Kubernetes quantity
    strings for plain integers); ``annotations`` are the *pod's* annotations.
    """
    got, violations = check_container(limits, requests, annotations, registry=registry)
    errors = tuple(v for v in violations if not v.warning)
    if errors:
        raise RequestRejected(errors)
    return got


def check_container(
    limits: ResourceList,
    requests: ResourceList | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    registry: VendorRegistry,
) -> tuple[tuple[DeviceRequest, ...], tuple[Violation, ...]]:
    """Like :func:`parse_container` but returns ``(requests, violations)`` instead of raising;
    the violations include warnings (``Violation.warning``: accepted, value changed), and the
    requests are empty when any violation is an error."""
    reqs = requests or {}
    annos = annotations or _EMPTY
    out: list[DeviceRequest] = []
    violations = unknown_resource_violations(set(limits) | set(reqs), registry)
    violations.extend(one_request_violations(set(limits) | set(reqs), registry))
    for vendor in registry:
        parsed, broken = vendor.parse(limits, reqs, annos)
        out.extend(parsed)
        violations.extend(broken)
    if any(not v.warning for v in violations):
        return (), tuple(violations)
    return tuple(out), tuple(violations)
