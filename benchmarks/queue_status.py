"""What one loop pass of the job controller spends on Queue status: `python -m
benchmarks.queue_status [--jobs N] [--queues Q] [--repeat R]`.

The controller used to recompute every queue's status on every pass, walking all jobs once per
queue (O(queues × jobs)), even when one pod of one job changed; now it recomputes only the
queues an event or a Queue object touched, in one walk over the jobs. This folds `--jobs` jobs
of two pods (half of them running) over `--queues` queues into a `JobController`, writes every
status once, then times a pass: the previous way (kept below as `previous_pass`, for the
comparison only), a pass after one task of one job finished, and a full pass (every queue
marked, as right after start). The API server is a stand-in that counts writes: what is timed is
the controller's own work. Writes `benchmarks/results/queue_status.md`. Run by hand; never part
of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from pathlib import Path
from typing import Any

from contracts.events import (
    JobSubmitted,
    PlacementCommitted,
    QueueCreated,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import snapshot as st
from services.kube import volcano
from services.kube.jobcontroller import JobController
from services.runtime.eventlog import MemoryLog

RESULTS = Path(__file__).parent / "results" / "queue_status.md"


class CountingApi:
    """Answers the status patches and counts them (the benchmark times the controller)."""

    def __init__(self) -> None:
        self.patches = 0

    async def patch(self, path: str, body: object, content_type: str = "") -> Any:
        self.patches += 1
        return body


class Folded:
    """A `JobController` fed events by hand, in log order."""

    def __init__(self) -> None:
        self.api = CountingApi()
        self.jc = JobController(MemoryLog(), self.api)  # type: ignore[arg-type]
        self.seq = 0

    def fold(self, event: Any) -> None:
        self.seq += 1
        self.jc.fold(self.seq, event)


def build(jobs: int, queues: int) -> Folded:
    f = Folded()
    for q in range(queues):
        name = f"q{q}"
        f.fold(QueueCreated(spec=QueueSpec(name=name)))
        f.jc.queues[name] = {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": name}, "status": {}}
    task = TaskSpec(name="w", replicas=2, cpu_milli=1000, memory_mib=1024, scalars={"huawei.com/Ascend910B3": 1000})
    for j in range(jobs):
        name = f"j{j}"
        f.fold(JobSubmitted(spec=JobSpec(namespace="ns", name=name, queue=f"q{j % queues}", min_available=2,
                                         tasks=(task,))))  # fmt: skip
        if j % 2 == 0:
            pods = [f"{name}-w-0", f"{name}-w-1"]
            f.fold(PlacementCommitted(namespace="ns", name=name, placements=tuple(
                TaskPlacement(task=p, node="n1") for p in pods)))  # fmt: skip
            for p in pods:
                f.fold(TaskStarted(namespace="ns", name=name, task=p, node="n1"))
    return f


async def previous_pass(jc: JobController) -> None:
    """The pass as it was before this change: every queue, each walking every job."""
    proj = jc.flow.projection
    for name, obj in list(jc.queues.items()):
        q = proj.queues.get(name)
        if q is None:
            continue
        allocated: dict[str, int] = {}
        phases = []
        for key, job in proj.jobs.items():
            if job.spec.queue != name:
                continue
            phases.append(job.phase)
            for t in proj.tasks.get(key, {}).values():
                if t.status in (st.BOUND, st.RUNNING):
                    for res, v in (("cpu", t.spec.cpu_milli), ("memory", t.spec.memory_mib), *t.spec.scalars.items()):
                        if v:
                            allocated[res] = allocated.get(res, 0) + v
        await jc._write_status(obj, volcano.queue_status(q.state, allocated, phases))


async def timed(repeat: int, make: Any) -> float:
    """Seconds per pass, the best of `repeat` (the least disturbed by the machine's load)."""
    best = float("inf")
    for _ in range(repeat):
        coro = make()
        start = time.perf_counter()
        await coro
        best = min(best, time.perf_counter() - start)
    return best


async def measure(jobs: int, queues: int, repeat: int) -> list[str]:
    f = build(jobs, queues)
    jc, api = f.jc, f.api
    jc.dirty_queues.update(jc.queues)
    await jc.queue_statuses()  # every status written once
    first = api.patches
    running = iter(range(0, jobs, 2))

    def one_task_finished() -> Any:
        """One task of a running job finishes: its queue's status changes, no other's."""
        j = next(running)
        f.fold(TaskFinished(namespace="ns", name=f"j{j}", task=f"j{j}-w-0", node="n1", exit_code=0))
        return jc.queue_statuses()

    def all_marked() -> Any:
        jc.dirty_queues.update(jc.queues)
        return jc.queue_statuses()

    before = await timed(repeat, lambda: previous_pass(jc))
    before_writes = api.patches
    after_one = await timed(repeat, one_task_finished)
    one_writes = api.patches
    after_full = await timed(repeat, all_marked)
    return [
        "# Queue status per job-controller pass",
        "",
        f"`python -m benchmarks.queue_status --jobs {jobs} --queues {queues} --repeat {repeat}` on "
        f"{platform.machine()}, CPython {platform.python_version()}; {jobs} jobs of 2 pods (half running) "
        f"over {queues} queues; best of {repeat} passes; {first} statuses written by the first pass.",
        "",
        "| pass | ms | statuses compared | written |",
        "|---|---:|---:|---:|",
        f"| before: every queue, each walking every job | {before * 1000:.2f} | {queues} | "
        f"{before_writes - first} |",
        f"| after: one task of one job finished | {after_one * 1000:.3f} | 1 | {(one_writes - before_writes) // repeat} |",
        f"| after: every queue marked (start, relist) | {after_full * 1000:.2f} | {queues} | "
        f"{api.patches - one_writes} |",
        "",
        "Statuses are written only on change in every case; what the change saves is the recomputation: "
        "a pass walks the jobs once and recomputes only the marked queues, instead of every queue walking "
        "every job on every pass.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    lines = asyncio.run(measure(args.jobs, args.queues, args.repeat))
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
