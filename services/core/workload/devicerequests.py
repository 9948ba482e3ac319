"""Adapter from container resources + pod annotations to `DeviceRequest`s.

The HAMi request rules (resource names, defaults, template rounding, "count > 1 cannot be
split") belong to the device layer (`services.core.devices.check_container`); admission calls
it through `DeviceRequestParser` so the workload model does not depend on its internals, and
turns each `Violation` into a rejection at the container's field path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from contracts.workloads import DeviceRequest
from services.core.devices import VendorRegistry, check_container


@dataclass(frozen=True, slots=True)
class DeviceRequestError:
    path: str
    value: str
    rule: str
    warning: bool = False  # accepted with a changed value (a HAMi clamp): tell, do not refuse


class DeviceRequestParser(Protocol):
    def __call__(
        self, containers: Sequence[Mapping[str, Any]], annotations: Mapping[str, str], path: str,
        field: str = "containers",
    ) -> tuple[tuple[DeviceRequest, ...], tuple[DeviceRequestError, ...]]: ...


def hami_parser(registry: VendorRegistry) -> DeviceRequestParser:
    def parse(
        containers: Sequence[Mapping[str, Any]], annotations: Mapping[str, str], path: str,
        field: str = "containers",
    ) -> tuple[tuple[DeviceRequest, ...], tuple[DeviceRequestError, ...]]:
        """`field`: containers or initContainers (the paths errors name)."""
        out: list[DeviceRequest] = []
        errors: list[DeviceRequestError] = []
        for i, c in enumerate(containers):
            res = c.get("resources") or {}
            limits = {str(k): v for k, v in (res.get("limits") or {}).items()}
            requests = {str(k): v for k, v in (res.get("requests") or {}).items()}
            got, violations = check_container(limits, requests, annotations, registry=registry)
            out.extend(msgspec.structs.replace(d, container=i) for d in got)
            for v in violations:
                where = "limits" if v.resource in limits else "requests"
                errors.append(DeviceRequestError(
                    f"{path}.{field}[{i}].resources.{where}.{v.resource}", v.value, v.rule,
                    v.warning))  # fmt: skip
        return tuple(out), tuple(errors)

    return parse


def asked_count(container: Mapping[str, Any], resource: str) -> str | None:
    """The count of `resource` the container asks (its limits', else its requests'), as
    written; None when it asks none."""
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        if resource in (res.get(part) or {}):
            return str(res[part][resource])
    return None


#: what HAMi's webhook does with such a container, by vendor: NVIDIA's `MutateAdmission` adds
#: `nvidia.com/gpu` (defaultGPUNum) beside gpumem/gpucores; Ascend's returns untouched a container
#: without the count name (HAMi then books nothing for it, and Volcano's deviceshare books a card
#: the pod never gets)
_WEBHOOK_ADDS = {"nvidia": "HAMi's webhook would add it; Tessera has none"}
_NO_WEBHOOK_ADDS = ("HAMi's webhook does not add it either: on HAMi or Volcano the pod would start "
                    "with no card")  # fmt: skip


def uncounted(
    containers: Sequence[Mapping[str, Any]], devices: Sequence[DeviceRequest], path: str,
    field: str = "containers",
) -> tuple[DeviceRequestError, ...]:
    """Device asks of a pod nobody will add the count resource to, made without it.

    The kubelet calls a device plugin's Allocate only for the resources a container asks, so a
    container asking `huawei.com/Ascend910B3-memory` (or `nvidia.com/gpumem`) without the count
    resource starts with no card while its slice is booked. HAMi's webhook adds the count to the
    pod; Tessera has no webhook, and a pod's resources cannot be changed once it exists — so the
    pod is refused, saying what to add. Pods Tessera's job controller makes get the count written
    in (`services.kube.volcano.pod_for`), so a Job template's app containers are not checked."""
    out: list[DeviceRequestError] = []
    for d in devices:
        if not d.resource or not 0 <= d.container < len(containers):
            continue
        res = containers[d.container].get("resources") or {}
        asked = {str(k) for part in ("limits", "requests") for k in (res.get(part) or {})}
        if d.resource in asked:
            count = asked_count(containers[d.container], d.resource) or ""
            if count.isdigit() and int(count) != d.count:  # 910C: 1 asked, a module of 2 booked
                # a vNPU: asked as 2 it is refused ("npu > 1 cannot be split"), so "ask 2" is no way
                fix = (f"run it as a Volcano Job (its pods are made asking {d.count}), or ask whole "
                       f"modules ({d.resource}: {d.count} without -memory)" if not d.exclusive
                       else f"ask {d.resource}: {d.count}")  # fmt: skip
                out.append(DeviceRequestError(
                    f"{path}.{field}[{d.container}].resources.limits.{d.resource}", count,
                    f"books {d.count} (a module of {d.count} NPUs), but the kubelet would ask the device "
                    f"plugin for {count} and its Allocate would fail (HAMi's webhook rewrites it; "
                    f"Tessera has none): {fix}"))  # fmt: skip
            continue
        domain = d.resource.split("/", 1)[0] + "/"
        companions = sorted(k for k in asked if k.startswith(domain))
        out.append(DeviceRequestError(
            f"{path}.{field}[{d.container}].resources.limits.{d.resource}", "",
            f"{', '.join(companions)} asks a card of {d.resource}, which the container "
            f"does not ask; the kubelet gives a container a device only for the device plugin's "
            f"resource it asks ({_WEBHOOK_ADDS.get(d.vendor, _NO_WEBHOOK_ADDS)}): add "
            f"{d.resource}: {d.count} to its limits"))  # fmt: skip
    return tuple(out)
