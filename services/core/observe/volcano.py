"""volcano-scheduler's queue and job gauges from one session (Volcano `pkg/scheduler/metrics`).

Names and label names are Volcano's (`queue.go`, `metrics.go`), so its dashboards read Tessera.
Units follow Volcano's: cpu in milli-cores, memory in bytes, every other resource as a
`*_scalar_resources{resource=…}` series in milli-units (Volcano's `Resource` keeps scalars as
`MilliValue()`; one whole card is 1000). The core's memory is MiB, hence × 2²⁰; Tessera counts a
device slice against its queue as the share of a card it holds (`plugins/shares.py`), so a
4 GB slice of a 64 GB card is 62.5 here where Volcano would say 1000.

What Volcano lacks and Tessera adds: `tessera_unschedulable_jobs{reason}` — how many jobs wait,
by the one-word reason of `Unschedulable.code` (every reason exported, 0 when none waits, so a
dashboard's series never vanish).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.core.observe.series import MetricSpec, Series
from services.core.scheduling.decisions import Decisions
from services.core.scheduling.lifecycle import gang_broken
from services.core.scheduling.snapshot import Snapshot
from services.core.workload.podgroups import podgroup_name

MIB = 1024 * 1024
_Q = ("queue_name",)
_QR = ("queue_name", "resource")


def _resource_specs(what: str, help_: str) -> tuple[MetricSpec, MetricSpec, MetricSpec]:
    return (
        MetricSpec(f"volcano_queue_{what}_milli_cpu", f"{help_} CPU count for one queue", _Q),
        MetricSpec(f"volcano_queue_{what}_memory_bytes", f"{help_} memory for one queue", _Q),
        MetricSpec(f"volcano_queue_{what}_scalar_resources", f"{help_} scalar resources for one queue", _QR),
    )


ALLOCATED = _resource_specs("allocated", "Allocated")
DESERVED = _resource_specs("deserved", "Deserved")
CAPACITY = _resource_specs("capacity", "Capacity")  # Volcano's name for the spec's capability
SHARE = MetricSpec("volcano_queue_share", "Share for one queue", _Q)
WEIGHT = MetricSpec("volcano_queue_weight", "Weight for one queue", _Q)
POD_GROUPS = {
    phase: MetricSpec(f"volcano_queue_pod_group_{phase.lower()}_count",
                      f"The number of {phase} PodGroup in this queue", _Q)
    for phase in ("Inqueue", "Pending", "Running", "Unknown", "Completed")
}  # fmt: skip
UNSCHEDULE_TASKS = MetricSpec("volcano_unschedule_task_count", "Number of tasks could not be scheduled", ("job_id",))
UNSCHEDULE_JOBS = MetricSpec("volcano_unschedule_job_count", "Number of jobs could not be scheduled")
UNSCHEDULABLE = MetricSpec("tessera_unschedulable_jobs", "Jobs waiting after the last session, by reason", ("reason",))
REASONS = ("NotEnqueued", "NotEnoughTasks", "NotEnoughResources")

SPECS: tuple[MetricSpec, ...] = (*ALLOCATED, *DESERVED, *CAPACITY, SHARE, WEIGHT,
                                 *POD_GROUPS.values(), UNSCHEDULE_TASKS, UNSCHEDULE_JOBS,
                                 UNSCHEDULABLE)  # fmt: skip


def _resources(specs: tuple[MetricSpec, MetricSpec, MetricSpec], queue: str,
               values: Mapping[str, int], always: bool = True) -> list[Series]:  # fmt: skip
    """cpu / memory / scalars of one queue; `always`: cpu and memory even when absent (0)."""
    cpu, memory, scalar = specs
    out = []
    if always or "cpu" in values:
        out.append(Series(cpu.name, (queue,), values.get("cpu", 0)))
    if always or "memory" in values:
        out.append(Series(memory.name, (queue,), values.get("memory", 0) * MIB))
    for name, v in sorted(values.items()):
        if name not in ("cpu", "memory", "pods"):
            out.append(Series(scalar.name, (queue, name), v))
    return out


def session_series(snapshot: Snapshot, decisions: Decisions) -> list[Series]:
    """The gauges after a session over `snapshot` concluded `decisions`."""
    out: list[Series] = []
    phases = {f"{p.namespace}/{p.name}": p.phase for p in decisions.phases}
    groups: dict[tuple[str, str], int] = {}
    for job in snapshot.jobs:
        phase = phases.get(job.key, job.phase)
        if phase == "Running" and gang_broken(job.spec.min_available, [t.status for t in job.tasks]):
            phase = "Unknown"  # a running gang cut below minMember, as Volcano's jobStatus shows it
        groups[(job.spec.queue, phase)] = groups.get((job.spec.queue, phase), 0) + 1
    for q in sorted(snapshot.queues, key=lambda q: q.spec.name):
        name = q.spec.name
        out += _resources(ALLOCATED, name, decisions.queue_allocated.get(name, {}))
        if name in decisions.queue_deserved:
            out += _resources(DESERVED, name, decisions.queue_deserved[name])
        # the spec's names as shares read them (an alias as the cluster's one type of it)
        out += _resources(CAPACITY, name, decisions.queue_capability.get(name, q.spec.capability), always=False)
        if name in decisions.queue_share:
            out.append(Series(SHARE.name, (name,), decisions.queue_share[name]))
        out.append(Series(WEIGHT.name, (name,), q.spec.weight))
        for phase, spec in POD_GROUPS.items():
            out.append(Series(spec.name, (name,), groups.get((name, phase), 0)))
    by_reason = dict.fromkeys(REASONS, 0)
    specs = {job.key: job for job in snapshot.jobs} if decisions.unschedulable else {}
    for u in decisions.unschedulable:
        job = specs.get(f"{u.namespace}/{u.name}")
        # Volcano's job_id is the job's name, its PodGroup's (no namespace): `JobInfo.SetPodGroup`
        job_id = podgroup_name(job.spec, job.created) if job is not None else u.name
        out.append(Series(UNSCHEDULE_TASKS.name, (job_id,), u.tasks))
        by_reason[u.code] = by_reason.get(u.code, 0) + 1
    out.append(Series(UNSCHEDULE_JOBS.name, (), len(decisions.unschedulable)))
    out += [Series(UNSCHEDULABLE.name, (reason,), n) for reason, n in by_reason.items()]
    return out
