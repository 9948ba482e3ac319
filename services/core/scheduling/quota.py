"""What a job asks and holds in a namespace ResourceQuota's terms (the quotas themselves, as the
log holds them: quotastate.py).

Kubernetes' quota admission counts a pod's requests when the pod is created, but a Volcano
Job's pods are made by the job controller only after enqueue; so Volcano's `resourcequota`
plugin holds a PodGroup at enqueue whose minResources would exceed what its namespace has left
(plugins/resourcequota.py). This module is the arithmetic it decides with.

Names. A hard key is read without its `requests.` / `limits.` prefix: Tessera keeps one value
per resource (a HAMi device's limit is its request; cpu and memory limits are not modelled, so
`limits.cpu` counts requests), and `count/pods` is `pods`. So `requests.huawei.com/Ascend910B3`,
`limits.huawei.com/Ascend910B3` and `huawei.com/Ascend910B3` all limit the same count.

Cards. A card count counts every card a pod asks or holds, a slice as one card — what the
Kubernetes quota counts for the pod's `huawei.com/Ascend910B3: 1`, and what HAMi's quota counts
(devices × number). Card memory (`…-memory`, `nvidia.com/gpumem`, MB) counts what a slice holds
once placed — a 16 GB vNPU template 16384 MB, a whole card its memory — and before that the
request as admission trimmed it (the template's memory), or the card type's memory for a whole
card with no memory asked.

Used. A namespace's use is what Tessera's own jobs there hold (admitted jobs: all their live
pods — the job controller makes every replica — and at least their minResources; placed pods
of any job) plus what the API server's `status.used` counts beyond Tessera's own pods there
(other schedulers' pods): status.used less the requests of the Tessera pods the API server
has (plain Pods and PodGroup members from their creation, a Volcano Job's once it is admitted),
never below zero. Adding status.used to Tessera's holdings would count every Tessera pod twice;
status.used alone lags and never sees HAMi's `limits.` device names or a slice's real memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from contracts.events import SliceAssignment
from contracts.workloads import DeviceRequest, TaskSpec
from services.core.scheduling.snapshot import FAILED, PENDING, SUCCEEDED

if TYPE_CHECKING:
    from services.core.scheduling.model import JobInfo

Vec = dict[str, int]
#: PodGroup phases of a job enqueue admitted: its pods exist and hold quota
ADMITTED = frozenset({"Inqueue", "Running", "Unknown", "Terminating", "Completing", "Aborting", "Failing"})
ENDED = frozenset({SUCCEEDED, FAILED})
_PREFIXES = ("requests.", "limits.")
UNIT = 1000  # a scalar's milli-units per unit (quantity.py)


def base_name(key: str) -> str:
    """The resource a hard/used key limits: `requests.cpu` → `cpu`, `count/pods` → `pods`."""
    for p in _PREFIXES:
        if key.startswith(p):
            return key[len(p) :]
    return "pods" if key == "count/pods" else key


def card_count_name(card_type: str) -> str:
    return "nvidia.com/gpu" if card_type.startswith("NVIDIA") else f"huawei.com/{card_type}"


def card_memory_name(count_name: str) -> str:
    """HAMi's memory resource beside a count resource (its chart defaults)."""
    return "nvidia.com/gpumem" if count_name.startswith("nvidia.com/") else f"{count_name}-memory"


def amount(name: str, units: float) -> str:
    """A value in the core's units as a quota shows it (`4`, `500m`, `16Gi`, `16384`)."""
    if name == "cpu":
        return f"{units / 1000:g}" if units % 100 == 0 else f"{units:g}m"
    if name in ("memory", "ephemeral-storage"):
        return f"{units / 1024:g}Gi" if units % 1024 == 0 else f"{units:g}Mi"
    if name == "pods":
        return f"{units:g}"
    return f"{units / UNIT:g}"


def add_into(acc: Vec, more: Mapping[str, int], times: int = 1) -> None:
    for k, v in more.items():
        acc[k] = acc.get(k, 0) + v * times


class Accounting:
    """A task's and a job's use in quota terms, in one session (card memory by type from the
    session's cards, for whole-card asks)."""

    def __init__(self, card_types: Mapping[str, str], type_memory: Mapping[str, int]) -> None:
        self.card_types = card_types  # card uuid → type
        self.type_memory = type_memory  # card type → its (largest) memory, MB
        self._asked: dict[int, tuple[TaskSpec, Vec]] = {}

    def asked(self, spec: TaskSpec) -> Vec:
        """One pod's requests as the Kubernetes quota counts them (cards as asked); once per
        spec and session (a job's replicas share theirs). Callers never change the vector."""
        got = self._asked.get(id(spec))
        if got is not None and got[0] is spec:
            return got[1]
        out = self._ask(spec)
        self._asked[id(spec)] = (spec, out)
        return out

    def _ask(self, spec: TaskSpec) -> Vec:
        out: Vec = {"pods": 1}
        if spec.cpu_milli:
            out["cpu"] = spec.cpu_milli
        if spec.memory_mib:
            out["memory"] = spec.memory_mib
        cards = {r.resource for r in spec.devices}
        for k, v in spec.scalars.items():
            if k not in cards:  # a device's count is counted from its request below
                out[k] = v
        for req in spec.devices:
            self._device(out, req)
        return out

    def _device(self, out: Vec, req: DeviceRequest) -> None:
        count = req.resource or card_count_name(req.type)
        out[count] = out.get(count, 0) + req.count * UNIT
        memory = req.memory
        if not memory:
            card = self.type_memory.get(req.type, 0)
            memory = card * req.memory_pct // 100 if 0 < req.memory_pct <= 100 else card
        if memory:
            name = card_memory_name(count)
            out[name] = out.get(name, 0) + req.count * memory * UNIT

    def held(self, spec: TaskSpec, slices: tuple[SliceAssignment, ...]) -> Vec:
        """A placed pod: cpu, memory and scalars as asked; its cards as the slices it holds."""
        if not slices:
            return self.asked(spec)
        out = {k: v for k, v in self.asked(spec).items() if not _is_card_name(k, spec)}
        for s in slices:
            count = card_count_name(self.card_types.get(s.card, ""))
            out[count] = out.get(count, 0) + UNIT
            name = card_memory_name(count)
            out[name] = out.get(name, 0) + s.slice.memory * UNIT
        return out

    def job_ask(self, job: JobInfo) -> Vec | None:
        """What enqueue weighs: a PodGroup's minResources as written, else the requests of the
        first minAvailable pods by priority (how Volcano's job controller computes them)."""
        raw = job.spec.min_resources
        if raw is None:
            return None
        if job.spec.kind == "PodGroup":
            out: Vec = {}
            for k, v in raw.items():
                name = base_name(k)
                out[name] = max(out.get(name, 0), v)  # `cpu` and `requests.cpu` are one
            return out
        out = {}
        left = job.min_available
        for task in sorted(job.spec.tasks, key=lambda t: -t.priority):
            n = min(left, task.replicas if not task.pod_names else len(task.pod_names))
            left -= n
            if n > 0:
                add_into(out, self.asked(task), n)
        return out

    def job_held(self, job: JobInfo) -> Vec:
        """What the job holds now: an admitted job all its live pods (at least its ask), any
        other only its placed pods."""
        out: Vec = {}
        admitted = job.phase in ADMITTED
        for t in job.tasks.values():
            if t.status in ENDED or (not admitted and t.status == PENDING):
                continue
            add_into(out, self.held(t.spec, t.slices) if t.node else self.asked(t.spec))
        if admitted:
            for k, v in (self.job_ask(job) or {}).items():
                if v > out.get(k, 0):
                    out[k] = v
        return out

    def job_in_api(self, job: JobInfo) -> Vec:
        """The requests of the job's pods the API server has (and so counts in status.used):
        a plain Pod's or a PodGroup's members from their creation, a Job's once admitted."""
        out: Vec = {}
        if job.spec.kind == "Job" and job.phase not in ADMITTED:
            return out
        for t in job.tasks.values():
            if t.status not in ENDED:
                add_into(out, self.asked(t.spec))
        return out


def _is_card_name(name: str, spec: TaskSpec) -> bool:
    return any(
        name in (r.resource, card_memory_name(r.resource)) for r in spec.devices if r.resource
    )


def accounting_of(nodes: Iterable[object]) -> Accounting:
    """From the session's nodes (`NodeInfo`, their `cards`)."""
    types: dict[str, str] = {}
    memory: dict[str, int] = {}
    for n in nodes:
        for c in getattr(n, "cards", ()):
            types[c.spec.uuid] = c.spec.type
            memory[c.spec.type] = max(memory.get(c.spec.type, 0), c.spec.memory)
    return Accounting(types, memory)
