"""Container resources + pod annotations → ``DeviceRequest``s, every vendor at once.

This is the admission half of HAMi (``MutateAdmission`` + ``GenerateResourceRequests``) as a
pure function. All violations of a container are collected (each vendor reports its own, and
unknown names in a device domain get a "did you mean" hint from :mod:`difflib`), then raised
together as one :class:`RequestRejected`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from contracts.workloads import DeviceRequest
from services.core.devices.registry import VendorRegistry
from services.core.devices.vendor import ResourceList
from services.core.devices.violations import RequestRejected, Violation

_EMPTY: Mapping[str, str] = {}


def _domains(names: frozenset[str]) -> frozenset[str]:
    return frozenset(n.split("/", 1)[0] for n in names if "/" in n)


def unknown_resource_violations(names: set[str], registry: VendorRegistry) -> list[Violation]:
    """Names in a device vendor's domain (``nvidia.com/``, ``huawei.com/``, ``volcano.sh/``) that
    no vendor reads: probably a typo, so they are rejected with the closest known name."""
    known = registry.resource_names()
    domains = _domains(known)
    out: list[Violation] = []
    for name in sorted(names):
        if name in known or "/" not in name or name.split("/", 1)[0] not in domains:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        out.append(Violation(name, "", f"unknown device resource{hint}"))
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
    reqs = requests or {}
    annos = annotations or _EMPTY
    out: list[DeviceRequest] = []
    violations = unknown_resource_violations(set(limits) | set(reqs), registry)
    for vendor in registry:
        parsed, broken = vendor.parse(limits, reqs, annos)
        out.extend(parsed)
        violations.extend(broken)
    if violations:
        raise RequestRejected(tuple(violations))
    return tuple(out)


def check_container(
    limits: ResourceList,
    requests: ResourceList | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    registry: VendorRegistry,
) -> tuple[tuple[DeviceRequest, ...], tuple[Violation, ...]]:
    """Like :func:`parse_container` but returns ``(requests, violations)`` instead of raising."""
    try:
        return parse_container(limits, requests, annotations, registry=registry), ()
    except RequestRejected as exc:
        return (), exc.violations
