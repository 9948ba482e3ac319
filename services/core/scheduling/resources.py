"""Resource vectors in the core's units (cpu milli, memory MiB, pods count, scalars milli).

Volcano's `Resource` (`pkg/scheduler/api/resource_info.go`) compares with an epsilon because
it stores floats; ours are integers, so comparisons are exact. `LessEqual(rr, Zero|Infinity)`
decides how a dimension missing on one side counts: `missing_is_zero` mirrors that switch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from contracts.workloads import TaskSpec

#: Resource names booked on cards by the device layer, never as node scalars.
DEVICE_PREFIXES = ("huawei.com/", "nvidia.com/", "volcano.sh/vgpu", "hygon.com/", "cambricon.com/",
                   "metax-tech.com/", "enflame.com/", "mthreads.com/", "iluvatar.ai/",
                   "kunlunxin.com/", "amd.com/", "vastaitech.com/", "birentech.com/")  # fmt: skip


def is_plain_extended(name: str) -> bool:
    """A name in a device domain that is an ordinary extended resource, fitted by count against
    allocatable as kube-scheduler and Volcano fit it: what NVIDIA's k8s-device-plugin serves
    beside the GPUs HAMi shares — MIG instances under the `mixed` strategy
    (`nvidia.com/mig-1g.10gb`) and time-sliced or MPS replicas with `renameByDefault`
    (`nvidia.com/gpu.shared`). HAMi's webhook and scheduler leave such names alone; claiming
    the whole `nvidia.com/` domain for the device layer refused these pods at admission."""
    if not name.startswith("nvidia.com/"):
        return False
    base = name[len("nvidia.com/"):]
    return base.startswith("mig-") or base.endswith(".shared")


def is_device_resource(name: str) -> bool:
    return name.startswith(DEVICE_PREFIXES) and not is_plain_extended(name)


def sidecar(container: Mapping[str, Any]) -> bool:
    """An init container that keeps running beside the app (SidecarContainers, GA in 1.33)."""
    return container.get("restartPolicy") == "Always"


def pod_level_resource(name: str) -> bool:
    """What `spec.resources` may name (PodLevelResources, beta and on by default since 1.34)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_request(
    app: Iterable[Mapping[str, int]], init: Iterable[Mapping[str, int]] = (),
    overhead: Mapping[str, int] | None = None, *, sidecars: Sequence[bool] = (),
    pod_requests: Mapping[str, int] | None = None, pod_limits: Mapping[str, int] | None = None,
) -> dict[str, int]:  # fmt: skip
    """A pod's request from its containers' (Kubernetes' rule, kube-scheduler's NodeInfo and
    admission alike): per resource the sum over the app containers and the sidecars (init
    containers with `restartPolicy: Always`, flagged in `sidecars`: they run beside the app),
    at least what any init container needs while it runs — itself plus the sidecars started
    before it; then the pod-level `spec.resources` requests of cpu, memory and hugepages replace
    the containers' sum (a pod-level limit alone stands for its request when no container asks
    the resource, as the API server defaults it); plus the pod's `spec.overhead` (the sandbox's
    cost RuntimeClass admission sets, held for the pod's whole life)."""
    total = aggregate(app, init, sidecars)
    for name, value in (pod_limits or {}).items():
        if pod_level_resource(name) and name not in (pod_requests or {}) and (
            not total.get(name) or name.startswith("hugepages-")  # not overcommittable
        ):
            total[name] = value
    for name, value in (pod_requests or {}).items():
        if pod_level_resource(name):
            total[name] = value
    for name, value in (overhead or {}).items():
        total[name] = total.get(name, 0) + value
    return total


def aggregate(
    app: Iterable[Mapping[str, int]], init: Iterable[Mapping[str, int]] = (),
    sidecars: Sequence[bool] = (),
) -> dict[str, int]:  # fmt: skip
    """The containers' part of `pod_request` (what pod-level requests must be at least)."""
    total: dict[str, int] = {}
    for asks in app:
        for name, value in asks.items():
            total[name] = total.get(name, 0) + value
    started: dict[str, int] = {}  # the sidecars running so far
    peak: dict[str, int] = {}
    for i, asks in enumerate(init):
        if i < len(sidecars) and sidecars[i]:
            for name, value in asks.items():
                total[name] = total.get(name, 0) + value
                started[name] = started.get(name, 0) + value
            running = started
        else:
            running = {**started}
            for name, value in asks.items():
                running[name] = running.get(name, 0) + value
        for name, value in running.items():
            peak[name] = max(peak.get(name, 0), value)
    for name, value in peak.items():
        total[name] = max(total.get(name, 0), value)
    return total


def requested(task: TaskSpec) -> Iterator[tuple[str, int]]:
    """One pod's requests by Kubernetes resource name (cpu, memory and the extended ones, zero
    ones left out): what a PodGroup's minResources and a Queue's allocated add up."""
    for name, value in (("cpu", task.cpu_milli), ("memory", task.memory_mib), *task.scalars.items()):
        if value:
            yield name, value


class Resource:
    """A mutable vector; `clone()` before keeping a copy. Missing scalar = 0."""

    __slots__ = ("cpu", "memory", "pods", "scalars")

    def __init__(
        self, cpu: int = 0, memory: int = 0, pods: int = 0, scalars: Mapping[str, int] | None = None
    ) -> None:
        self.cpu = cpu
        self.memory = memory
        self.pods = pods
        self.scalars: dict[str, int] = dict(scalars) if scalars else {}

    @classmethod
    def from_map(cls, values: Mapping[str, int]) -> Resource:
        scalars = {k: v for k, v in values.items() if k not in ("cpu", "memory", "pods")}
        return cls(values.get("cpu", 0), values.get("memory", 0), values.get("pods", 0), scalars)

    def to_map(self) -> dict[str, int]:
        out = {"cpu": self.cpu, "memory": self.memory}
        if self.pods:
            out["pods"] = self.pods
        out.update({k: v for k, v in sorted(self.scalars.items()) if v})
        return out

    def clone(self) -> Resource:
        return Resource(self.cpu, self.memory, self.pods, self.scalars)

    def get(self, name: str) -> int:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        if name == "pods":
            return self.pods
        return self.scalars.get(name, 0)

    def names(self) -> list[str]:
        """Dimensions with a non-zero value (what a request "requests")."""
        out = [n for n, v in (("cpu", self.cpu), ("memory", self.memory)) if v]
        out.extend(k for k, v in self.scalars.items() if v)
        return out

    def add(self, other: Resource) -> Resource:
        self.cpu += other.cpu
        self.memory += other.memory
        self.pods += other.pods
        for k, v in other.scalars.items():
            self.scalars[k] = self.scalars.get(k, 0) + v
        return self

    def sub(self, other: Resource) -> Resource:
        self.cpu -= other.cpu
        self.memory -= other.memory
        self.pods -= other.pods
        for k, v in other.scalars.items():
            self.scalars[k] = self.scalars.get(k, 0) - v
        return self

    def is_empty(self) -> bool:
        return self.cpu <= 0 and self.memory <= 0 and all(v <= 0 for v in self.scalars.values())

    def less_equal(self, other: Resource, missing_is_zero: bool = True) -> bool:
        """self ≤ other in every dimension; a scalar missing in `other` is 0 (or +∞)."""
        if self.cpu > other.cpu or self.memory > other.memory:
            return False
        for k, v in self.scalars.items():
            if v <= 0:
                continue
            if k in other.scalars:
                if v > other.scalars[k]:
                    return False
            elif missing_is_zero:
                return False
        return True

    def less_equal_in(self, other: Resource, dims: Iterable[str]) -> bool:
        """self ≤ other only on `dims` (Volcano's LessEqualWithDimension)."""
        return all(self.get(d) <= other.get(d) for d in dims)

    def insufficient(self, idle: Resource) -> list[str]:
        """Names of the dimensions where `self` (a request) exceeds `idle`, kube-scheduler wording."""
        out = []
        if self.cpu > idle.cpu:
            out.append("cpu")
        if self.memory > idle.memory:
            out.append("memory")
        for k, v in self.scalars.items():
            if v > idle.scalars.get(k, 0):
                out.append(k)
        return out

    def __repr__(self) -> str:
        return f"Resource({self.to_map()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and self.to_map() == other.to_map()

    __hash__ = None  # type: ignore[assignment]


def share(allocated: int, total: int) -> float:
    """Volcano `helpers.Share`: l/r, with r == 0 ⇒ 0 if l == 0 else 1."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total
