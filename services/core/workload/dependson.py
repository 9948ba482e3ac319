"""A Volcano Job task's `dependsOn`: its pods start only once the tasks it names are ready.

Volcano's job controller makes a dependent task's pods only when `isDependsOnPodsReady` holds
for the tasks it names — all of them, or any one with `iteration: any` and two or more names —
a task being ready when at least its `minAvailable` pods (its replicas when unset) are ready.
What "a ready pod" is belongs to the caller: on a cluster a pod Running with every container
ready, or Succeeded (`services.kube.jobcontroller`); in `tessera simulate` a task started or
succeeded. One rule, so the simulator and the cluster start a job's tasks in the same order.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from contracts.workloads import TaskSpec

#: `dependsOn.iteration`'s value that asks any one of the named tasks, not all
ANY = "any"


def named(depends: object) -> tuple[tuple[str, ...], bool]:
    """(task names, any one of them) from a task's raw `dependsOn` ((), False: none)."""
    if not isinstance(depends, Mapping):
        return (), False
    listed = depends.get("name")
    names = tuple(str(n) for n in listed) if isinstance(listed, list) else ()
    return names, depends.get("iteration") == ANY and len(names) > 1


def ready(names: Sequence[str], any_of: bool, tasks: Sequence[TaskSpec],
          ready_pods: Callable[[TaskSpec], int]) -> bool:  # fmt: skip
    """Whether a task depending on `names` may start its pods: `ready_pods(task)` counts the
    named task's ready pods. A name no task has counts as ready (admission refuses such a Job)."""
    if not names:
        return True
    by_name = {t.name: t for t in tasks}

    def one(dep: str) -> bool:
        t = by_name.get(dep)
        if t is None:
            return True
        need = t.replicas if t.min_available is None else t.min_available
        return ready_pods(t) >= need

    return any(one(n) for n in names) if any_of else all(one(n) for n in names)


def task_ready(task: TaskSpec, tasks: Sequence[TaskSpec], ready_pods: Callable[[TaskSpec], int]) -> bool:
    """`ready` for a task whose spec carries its `dependsOn` (admitted since it does)."""
    return ready(task.depends_on, task.depends_any, tasks, ready_pods)
