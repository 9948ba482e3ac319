"""Whose pod it is on a cluster: a pod's `spec.schedulerName` picks its scheduler, and Tessera
places only the pods whose name is one of its own (`--scheduler-name`, chart `schedulerNames`;
default `volcano` and `tessera`).

The API server writes `default-scheduler` into a pod that names none, so a plain pod without a
schedulerName is kube-scheduler's on a cluster (HAMi's webhook renames a device pod
`hami-scheduler`). A Volcano Job that names none is `volcano`'s (its mutating webhook's default),
and a task's template that names one keeps it for its pods (the job controller writes the
Job's name only into a template that has none).

The local control plane has no other scheduler: `tessera apply` of such a pod still places it,
as a cluster where Tessera served that name would, and says so in a warning naming the field,
the value and the names Tessera serves — the same manifest applied on a cluster would not be
Tessera's to place.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

#: what the API server writes into a pod that names no scheduler
KUBE_DEFAULT = "default-scheduler"
#: what Volcano's job webhook writes into a Job that names none (`patchDefaultScheduler`)
VOLCANO_DEFAULT = "volcano"
#: Tessera's names when it is given none (services/runtime/bootstrap.py `scheduler_names`)
DEFAULT_SCHEDULER_NAMES = ("volcano", "tessera")
#: whose such a pod is on a cluster, in a few words
_OWNERS = {KUBE_DEFAULT: "kube-scheduler's (whole cards, no slices)", "hami-scheduler": "HAMi's scheduler's"}


def pod_scheduler(spec: object) -> str:
    """The schedulerName the API server stores for a pod of this `spec`."""
    return _named(spec) or KUBE_DEFAULT


def job_scheduler(spec: object) -> str:
    """The schedulerName Volcano's webhook stores for a Job of this `spec`."""
    return _named(spec) or VOLCANO_DEFAULT


def _named(spec: object) -> str:
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return str(name) if name else ""


def not_served(spec: object, default: str, served: Collection[str], pods: str = "this pod") -> str | None:
    """The warning's rule for a pod (or a Job's pods) whose `spec` names a scheduler Tessera
    does not serve (`served`; empty: nothing is checked), or None. `default`: the name stored
    when the spec gives none (`KUBE_DEFAULT` for a pod, `VOLCANO_DEFAULT` for a Job)."""
    name = _named(spec) or default
    if not served or name in served:
        return None
    unset = "" if _named(spec) else f"unset, so {default} is stored: "
    single = pods == "this pod"
    whose = (f"{'is' if single else 'are'} {_OWNERS[name]}, not Tessera's" if name in _OWNERS
             else f"{'waits' if single else 'wait'} for a scheduler named {name}")  # fmt: skip
    fix = VOLCANO_DEFAULT if VOLCANO_DEFAULT in served else next(iter(served))
    return (f"{unset}not one of Tessera's names ({' or '.join(served)}): on a cluster {pods} {whose}; "
            f"the local control plane places {'it' if single else 'them'} anyway "
            f"(schedulerName: {fix} for a cluster to do the same)")  # fmt: skip
