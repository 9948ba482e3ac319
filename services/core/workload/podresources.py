"""A pod's own `spec.resources` (PodLevelResources: beta and on by default since Kubernetes
1.34): requests and limits of cpu, memory and hugepages for the pod as a whole.

kube-scheduler and the kubelet count a pod-level request in place of its containers' sum, so a
pod asking `spec.resources.requests.cpu: 16` with small container requests holds 16 cpus of its
node; read without it, Tessera would place more on the node than the kubelet admits
(`OutOfcpu`). The API server's rules are checked here, in its words, for manifests that never
met one (`tessera apply`); a pod read from a cluster passed them already:

* only cpu, memory and hugepages-<size> may be named;
* a request is at most its limit;
* a request is at least the containers' aggregate request (sidecars and init containers
  counted as the kubelet counts them, `resources.aggregate`);
* no app container's limit is above the pod's limit of that resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.core.scheduling.resources import aggregate, pod_level_resource
from services.core.workload.quantity import QuantityError, to_units
from services.core.workload.rejection import invalid

#: (field path, the rule in the API server's words)
Problem = tuple[str, str]


def shown(name: str, units: int) -> str:
    """A quantity as a person writes it (`1500m`, `4`, `6Gi`, `576Mi`)."""
    if name == "cpu":
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if name == "memory" or name.startswith("hugepages-"):
        return f"{units // 1024}Gi" if units and units % 1024 == 0 else f"{units}Mi"
    return str(units)


def _read(raw: object, path: str, problems: list[Problem]) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append((path, invalid(raw, "must be a map of resource name to quantity")))
        return {}
    out: dict[str, int] = {}
    for name, value in raw.items():
        name = str(name)
        where = f"{path}[{name}]"
        if not pod_level_resource(name):
            problems.append((where, f'Unsupported value: "{name}": supported values: "cpu", '
                             '"hugepages-<size>", "memory"'))  # fmt: skip
            continue
        try:
            out[name] = to_units(name, value)
        except QuantityError as exc:
            problems.append((where, invalid(str(value), str(exc))))
            continue
        if out[name] < 0:
            problems.append((where, invalid(str(value), "must be greater than or equal to 0")))
    return out


def pod_level(
    raw: object, path: str, app: Sequence[Mapping[str, int]], init: Sequence[Mapping[str, int]],
    sidecars: Sequence[bool], limits: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[dict[str, int], dict[str, int], list[Problem]]:  # fmt: skip
    """`raw`: the pod's `spec.resources`; `app`/`init`: each container's requests (a missing
    one defaulted to its limit); `limits`: each app container's path and raw `resources.limits`.
    → (requests, limits, problems)."""
    problems: list[Problem] = []
    if raw is None:
        return {}, {}, problems
    if not isinstance(raw, Mapping):
        return {}, {}, [(path, invalid(raw, "must be an object with requests and limits"))]
    requests = _read(raw.get("requests"), f"{path}.requests", problems)
    caps = _read(raw.get("limits"), f"{path}.limits", problems)
    for name, value in requests.items():
        if name in caps and value > caps[name]:
            problems.append((f"{path}.requests[{name}]", invalid(
                shown(name, value), f"must be less than or equal to {name} limit of {shown(name, caps[name])}")))
    summed = aggregate(app, init, sidecars)
    for name, value in requests.items():
        if value < summed.get(name, 0):
            problems.append((f"{path}.requests[{name}]", invalid(shown(name, value), "must be greater than or "
                             f"equal to aggregate container requests of {shown(name, summed[name])}")))  # fmt: skip
    for where, raw_limits in limits:
        for name, cap in caps.items():
            value = (raw_limits or {}).get(name) if isinstance(raw_limits, Mapping) else None
            if value is None:
                continue
            try:
                units = to_units(name, value)
            except QuantityError:
                continue  # the container's own check names it
            if units > cap:
                problems.append((f"{where}.resources.limits[{name}]", invalid(
                    str(value), f"must be less than or equal to pod limits of {shown(name, cap)}")))
    return requests, caps, problems
