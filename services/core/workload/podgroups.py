"""The name of a job's PodGroup, as Volcano gives it — what Volcano's scheduler calls the job
(`JobInfo.SetPodGroup`: `ji.Name = pg.Name`) and writes in `volcano_unschedule_task_count`'s
`job_id`, without the namespace.

* an explicit PodGroup (kind `PodGroup`): its own name;
* a Volcano Job: `<job>-<job uid>` (the job controller's `generateRelatedPodGroupName`);
* a plain pod: `podgroup-<pod uid>` (the podgroup controller's implied group).

The uid is the Kubernetes object's where the job came from the API server (the pod source
keeps it: `OBJECT_UID` on a Job, `POD_UID` on a pod's task); a job applied through `tessera
apply` never had one, and gets the one `tessera get` derives from its submission's place in the
log (services/cli/kubeobjects.py: stable for that incarnation, new after a delete and
re-apply, as a real uid is).
"""

from __future__ import annotations

import uuid

from contracts.workloads import JobSpec
from services.core.workload.jobupdate import OBJECT_UID, POD_UID

__all__ = ["OBJECT_UID", "POD_UID", "derived_uid", "podgroup_name"]


def derived_uid(subject: str, born_seq: int) -> str:
    """The uid of an object that never had a Kubernetes one (`tessera get`'s, the same)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tessera:{subject}:{born_seq}"))


def podgroup_name(spec: JobSpec, born_seq: int) -> str:
    """The job's PodGroup name; `born_seq`: the log sequence of its submission."""
    ns, name = spec.namespace, spec.name
    if spec.kind == "Job":
        return f"{name}-{spec.annotations.get(OBJECT_UID) or derived_uid(f'{ns}/{name}', born_seq)}"
    if spec.kind == "Pod":
        uid = next((t.annotations[POD_UID] for t in spec.tasks if name in t.pod_names and POD_UID in t.annotations), "")
        return f"podgroup-{uid or derived_uid(f'{ns}/{name}/{name}', born_seq)}"
    return name
