"""The workload zoo (issue 27): one of every kind of pod users hand to kube-scheduler + Volcano
+ HAMi, as they write it, and where each must end. `tests/e2e/test_zoo.py` applies it through
the admission service on a simulated cluster; `tests/kube/test_zoo.py` creates it as Kubernetes
objects on the emulator. Both clusters have the same shape:

- node-a: 8 × Ascend910B3, vNPU templates (HAMi's default),
- node-b: 8 × Ascend910B3, hami-core soft slicing (`hami-vnpu-core: "true"`),
- gpu-1:  2 × NVIDIA A100 40 GB (HAMi vGPU),

192 cpu and 1536Gi each (the kube cluster also has a cordoned node-c, which gets nothing).

Besides each pod's end, the log must stay small. A job placed once writes a handful of events
on its subject: JobSubmitted, PlacementProposed (which admits it: Inqueue), PlacementCommitted
(which runs it: Running) and one TaskStarted per pod — 4 for a pod, 5 for the gang of two, 6
for the Volcano Job of three (issue 29 folded the two JobPhaseChanged into the proposal and the
commit); a pod that finishes adds TaskFinished and two phase changes (7); the pod that waits
writes JobSubmitted, one phase change and its reason once per change (3). `EVENTS_PER_POD` per pod plus `EVENTS_PER_JOB` per job
(24 for a pod, 40 for the gang, 56 for the Volcano Job) leaves room for proposals refused and
re-planned or bindings failed and re-placed for a while (a loaded kube run has written 29 on
the gang's subject so, before its pods ran), and is far below the loop issue 27 is about: a
cpu-only pod proposed, refused "already placed as proposed" and proposed again wrote 750-1350
events on its subject within the 30-40 s the tests wait.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from contracts.api import ApplyReply, ApplyRequest, decode, encode
from contracts.events import PlacementRejected
from contracts.registry import default_registry
from contracts.subjects import Subjects
from services.runtime.eventlog.model import StoredMessage

DURATION = "tessera.io/duration"  # the simulated runtime ends the pod after this many seconds
MEMORY_910B3 = 65536
NVIDIA_MEMORY = 40960

#: the log bound: at most EVENTS_PER_POD × pods + EVENTS_PER_JOB events on a job's subject
EVENTS_PER_POD = 16
EVENTS_PER_JOB = 8
#: what the allocator answers a proposal it already committed; seen in a loop, never once
ALREADY_PLACED = "already placed as proposed"

#: the e2e cluster as an inventory (tests/kube/workload.py's hami_nodes registers the same)
INVENTORY: dict[str, Any] = {"nodes": [
    {"name": "node-a", "cpu": 192, "memory": "1536Gi", "devices": [{"type": "Ascend910B3", "count": 8}]},
    {"name": "node-b", "cpu": 192, "memory": "1536Gi", "annotations": {"hami-vnpu-core": "true"},
     "devices": [{"type": "Ascend910B3", "count": 8}]},
    {"name": "gpu-1", "cpu": 192, "memory": "1536Gi",
     "devices": [{"type": "NVIDIA-A100", "count": 2, "memory": NVIDIA_MEMORY}]},
]}  # fmt: skip


@dataclass(frozen=True)
class Card:
    """The one card slice a pod must hold: kind `whole` / `template` / `soft`, its memory (MB),
    its cores when they matter, the vNPU template when it is one, and the nodes whose cards cut
    this kind of slice (a template on the template node, a soft slice on the hami-core one)."""

    kind: str
    memory: int
    cores: int | None = None
    template: str | None = None
    vendor: str = "huawei"
    on: frozenset[str] = frozenset()  # the nodes this kind of slice exists on (empty: any)


@dataclass(frozen=True)
class Outcome:
    """Where one pod ends. `phase`: Running, Succeeded (it has a duration) or Pending; `nodes`:
    where it may run (empty: any schedulable node); `card`: the slice it holds (None: none);
    `cards`: other slices it may hold instead (same count, any of these); `reason`: words a
    Pending pod's reason must contain."""

    phase: str
    nodes: frozenset[str] = frozenset()
    card: Card | None = None
    cards: tuple[Card, ...] = ()
    reason: str = ""

    def slices(self) -> tuple[Card, ...]:
        """Every slice this pod may hold (the first is `card`)."""
        return ((self.card,) if self.card else ()) + self.cards


def _pod(name: str, limits: Mapping[str, str], *, annotations: Mapping[str, str] | None = None,
         node_selector: Mapping[str, str] | None = None,
         init: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    resources = {"limits": dict(limits)}
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "busybox", "resources": resources}]
    }
    if init is not None:
        spec["initContainers"] = [
            {"name": "init", "image": "busybox", "resources": {"limits": dict(init)}}
        ]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


CPU = {"cpu": "2", "memory": "4Gi"}
GANG = "zoo-gang"
VCJOB = "zoo-vcjob"
SOFT = {"huawei.com/vnpu-mode": "hami-core"}

PODGROUP: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
    "metadata": {"name": GANG}, "spec": {"minMember": 2, "queue": "default"},
}  # fmt: skip

VOLCANO_JOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
    "metadata": {"name": VCJOB},
    "spec": {"schedulerName": "volcano", "minAvailable": 3, "queue": "default", "tasks": [
        {"name": "ps", "replicas": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "ps", "image": "busybox", "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}]}}},
        {"name": "worker", "replicas": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "worker", "image": "busybox", "resources": {"limits": {
                "cpu": "8", "memory": "32Gi", "huawei.com/Ascend910B3": "1"}}}]}}},
    ]},
}  # fmt: skip

#: the plain pods (a Pod's job is the pod itself; the gang's job is its PodGroup)
PODS: list[dict[str, Any]] = [
    _pod("zoo-cpu", CPU, annotations={DURATION: "1"}),
    *[_pod(f"{GANG}-{i}", CPU, annotations={"scheduling.k8s.io/group-name": GANG}) for i in range(2)],
    _pod("zoo-init", {"cpu": "1", "memory": "2Gi"},
         init={"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"}),
    _pod("zoo-whole", {"huawei.com/Ascend910B3": "1"}),
    # 20000 MB rounds up to the smallest template that holds it (hami.md §2.3)
    _pod("zoo-template", {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "20000"},
         node_selector={"kubernetes.io/hostname": "node-a"}),
    _pod("zoo-soft", {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384",
                      "huawei.com/Ascend910B3-core": "25"}, annotations=SOFT),
    _pod("zoo-vgpu", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000", "nvidia.com/gpucores": "30"}),
    _pod("zoo-toobig", {"cpu": "500", "memory": "4Gi"}),  # no node has 500 cpu
]  # fmt: skip

#: applied once the zoo settled: a harmless pod whose run marks a later, otherwise idle moment
LATER_POD = "zoo-later"  # 4096 MB: rounded up to 16384 as VNPU_16G says
LATER: dict[str, Any] = _pod(
    LATER_POD, {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "4096"}
)

WHOLE = Card("whole", MEMORY_910B3)
ASCEND = frozenset({"node-a", "node-b"})
#: a pod without `huawei.com/vnpu-mode` asking ≤ 16384 MB: HAMi's admission rounds the memory up
#: to the vir05_1c_16g template (hard mode's trimMemory, hami.md §2.4); a template of that size
#: on node-a, a soft slice of that memory on node-b (an annotation-less pod may use either, v2.10)
VNPU_16G = (Card("template", 16384, template="vir05_1c_16g", on=frozenset({"node-a"})),
            Card("soft", 16384, on=frozenset({"node-b"})))  # fmt: skip

EXPECTED: dict[str, Outcome] = {
    "zoo-cpu": Outcome("Succeeded"),
    f"{GANG}-0": Outcome("Running"),
    f"{GANG}-1": Outcome("Running"),
    f"{VCJOB}-ps-0": Outcome("Running"),
    f"{VCJOB}-worker-0": Outcome("Running", ASCEND, WHOLE),
    f"{VCJOB}-worker-1": Outcome("Running", ASCEND, WHOLE),
    "zoo-init": Outcome("Running", ASCEND, VNPU_16G[0], VNPU_16G[1:]),
    "zoo-whole": Outcome("Running", ASCEND, WHOLE),
    "zoo-template": Outcome("Running", frozenset({"node-a"}), Card("template", 32768, template="vir10_3c_32g")),
    "zoo-soft": Outcome("Running", frozenset({"node-b"}), Card("soft", 16384, cores=25)),
    "zoo-vgpu": Outcome("Running", frozenset({"gpu-1"}), Card("soft", 10000, cores=30, vendor="nvidia")),
    "zoo-toobig": Outcome("Pending", reason="cpu"),  # the reason names the resource
}  # fmt: skip
LATER_EXPECTED = Outcome("Running", ASCEND, VNPU_16G[0], VNPU_16G[1:])

#: job (the log's aggregate) → its pods
JOBS: dict[str, tuple[str, ...]] = {
    "zoo-cpu": ("zoo-cpu",),
    GANG: (f"{GANG}-0", f"{GANG}-1"),
    VCJOB: (f"{VCJOB}-ps-0", f"{VCJOB}-worker-0", f"{VCJOB}-worker-1"),
    **{n: (n,) for n in ("zoo-init", "zoo-whole", "zoo-template", "zoo-soft", "zoo-vgpu", "zoo-toobig")},
    "zoo-later": ("zoo-later",),
}  # fmt: skip
UNFITTABLE = "zoo-toobig"


def manifests() -> list[dict[str, Any]]:
    """Every zoo object in the order a user applies them (the PodGroup before its pods)."""
    return [PODGROUP, VOLCANO_JOB, *PODS]


def manifest_text(docs: Iterable[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False)


def bound(job: str) -> int:
    return EVENTS_PER_POD * len(JOBS.get(job, ("",))) + EVENTS_PER_JOB


async def apply(url: str, text: str) -> ApplyReply:
    """`tessera apply`: the admission service's apply request."""
    from services.cli.control import request

    data = await request(url, "tessera", "admission", "apply", encode(ApplyRequest(manifest=text)))
    return decode(data, ApplyReply)


# --- what the log says -----------------------------------------------------------------------


@dataclass
class LogFacts:
    """Per job subject of the zoo: how many events, by type; every PlacementRejected reason."""

    per_job: dict[str, collections.Counter[str]] = field(default_factory=dict)
    rejections: list[tuple[str, str]] = field(default_factory=list)  # (job, reason)
    total: int = 0

    def count(self, job: str) -> int:
        return sum(self.per_job.get(job, collections.Counter()).values())


def log_facts(messages: Iterable[StoredMessage], namespace: str = "default",
              jobs: Iterable[str] = ()) -> LogFacts:  # fmt: skip
    subjects = Subjects("tessera")
    wanted = {subjects.job(namespace, j): j for j in (jobs or JOBS)}
    reg = default_registry()
    facts = LogFacts(per_job={j: collections.Counter() for j in wanted.values()})
    for m in messages:
        facts.total += 1
        kind = m.headers.get("Tessera-Type", "")
        job = wanted.get(m.subject)
        if job is not None:
            facts.per_job[job][kind] += 1
        if kind == "PlacementRejected":
            ev = reg.decode(kind, m.data)
            assert isinstance(ev, PlacementRejected)
            facts.rejections.append((ev.name, ev.reason))
    return facts


def log_problems(facts: LogFacts, jobs: Iterable[str] = ()) -> list[str]:
    """The bound broken per job, and any proposal answered "already placed as proposed"."""
    out = []
    for job in jobs or JOBS:
        n = facts.count(job)
        if n > bound(job):
            top = ", ".join(f"{k}×{v}" for k, v in facts.per_job[job].most_common(4))
            out.append(f"job {job}: {n} events on its subject > bound {bound(job)} ({top})")
    looped = collections.Counter(
        job for job, reason in facts.rejections if ALREADY_PLACED in reason
    )
    if looped:
        out.append(f"PlacementRejected {ALREADY_PLACED!r}: {dict(looped)}")
    return out


# --- what a pod ended with -------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """One card slice a pod holds, as the report (e2e) or HAMi's annotations (kube) say."""

    kind: str
    memory: int
    cores: int
    template: str | None
    vendor: str

    def text(self) -> str:
        what = f"[{self.template}]" if self.template else ""
        return f"{self.vendor} {self.kind}{what} {self.memory}MB/{self.cores}"


def fits(card: Card, held: Held, node: str | None) -> bool:
    return (card.kind == held.kind and card.memory == held.memory and card.vendor == held.vendor
            and (card.cores is None or card.cores == held.cores)
            and (card.template is None or card.template == held.template)
            and (not card.on or node in card.on))  # fmt: skip


def outcome_problems(name: str, want: Outcome, phase: str, node: str | None, held: list[Held],
                     reason: str) -> list[str]:  # fmt: skip
    """What is wrong with one pod's end (empty: it ended where it should)."""
    got = f"{name}: {phase} on {node or '-'} holding [{', '.join(h.text() for h in held)}]"
    if reason:
        got += f" ({reason[:200]})"
    out = []
    if phase != want.phase:
        out.append(f"{got}: want phase {want.phase}")
    if want.phase == "Pending":
        if node:
            out.append(f"{got}: want no node")
        if not reason or want.reason not in reason:
            out.append(f"{got}: want a reason naming {want.reason!r}")
    elif not node:
        if phase == want.phase:
            out.append(f"{got}: want a node")
    elif want.nodes and node not in want.nodes:
        out.append(f"{got}: want a node of {sorted(want.nodes)}")
    allowed = want.slices()
    if not allowed and held:
        out.append(f"{got}: want no card slice")
    if (
        allowed
        and want.phase != "Pending"
        and (len(held) != 1 or not any(fits(c, held[0], node) for c in allowed))
    ):
        kinds = " or ".join(f"{c.vendor} {c.kind}{f'[{c.template}]' if c.template else ''} {c.memory}MB"
                            + (f" on {'/'.join(sorted(c.on))}" if c.on else "") for c in allowed)  # fmt: skip
        out.append(f"{got}: want one slice: {kinds}")
    return list(dict.fromkeys(out))
