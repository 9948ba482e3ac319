"""A Volcano Job's own `spec.volumes[]` (`mountPath` + `volumeClaimName`): the claim is
mounted at that path in every app container of every pod of the job (Volcano's
`createJobPod`), so a training job's dataset or checkpoint volume is named once for all its
tasks. Admission reads the job's tasks with the volumes in their templates (so the claims are
scheduled for as a pod's own are: bound, on the node their volume allows), and the job
controller makes the pods from the same templates.

Volcano's webhook rules, in its words (`validateIO`): a mountPath, no mountPath twice, a claim
name or a claim spec but not both. A `volumeClaim` spec is a claim the job controller creates,
owned by the Job (deleted with it), before the job's pods: named `<job>-volume-<12 characters>`
as Volcano names it — here derived from the Job's uid and the volume's index instead of drawn
at random, so admission schedules for the very claim the controller makes, and Volcano's write
of the drawn name back into the Job is not needed.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from services.core.workload.names import dns1123_subdomain

CONFLICT = ("conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to "
            "create a new PVC, you do not need to specify VolumeClaimName")  # fmt: skip


def volume_problems(raw: object) -> list[tuple[str, object, str]]:
    """(path, value, rule) for `spec.volumes`."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        return [("spec.volumes", raw, "must be a list of {mountPath, volumeClaimName}")]
    problems: list[tuple[str, object, str]] = []
    paths: set[str] = set()
    for i, v in enumerate(raw):
        where = f"spec.volumes[{i}]"
        if not isinstance(v, Mapping):
            problems.append((where, v, "must be a map of mountPath and volumeClaimName"))
            continue
        mount = str(v.get("mountPath") or "")
        claim, spec = v.get("volumeClaimName"), v.get("volumeClaim")
        if not mount:
            problems.append((f"{where}.mountPath", None, "mountPath is required"))
        elif mount in paths:
            problems.append((f"{where}.mountPath", mount, f"duplicated mountPath: {mount}"))
        paths.add(mount)
        if claim and spec:
            problems.append((where, None, CONFLICT))
        elif spec is not None and not isinstance(spec, Mapping):
            problems.append((f"{where}.volumeClaim", spec, "must be a PersistentVolumeClaim spec"))
        elif spec:
            pass  # the API server judges the claim when the job controller creates it
        elif not claim:
            problems.append((where, None, "either VolumeClaim or VolumeClaimName must be specified"))
        elif errors := dns1123_subdomain(str(claim)):
            problems.append((f"{where}.volumeClaimName", claim, f"invalid VolumeClaimName {claim} : {errors[0]}"))
    return problems


def generated_claim(job: str, uid: str, index: int) -> str:
    """The claim the job controller makes for `spec.volumes[index].volumeClaim`."""
    return f"{job}-volume-{hashlib.blake2b(f'{uid}/{index}'.encode(), digest_size=6).hexdigest()}"


def claims_to_make(job: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, spec) of each claim a Job's `spec.volumes` asks its controller to create."""
    meta = job.get("metadata") or {}
    raw = (job.get("spec") or {}).get("volumes")
    if not isinstance(raw, list):
        return []
    return [(generated_claim(str(meta.get("name") or ""), str(meta.get("uid") or ""), i), dict(v["volumeClaim"]))
            for i, v in enumerate(raw)
            if isinstance(v, Mapping) and isinstance(v.get("volumeClaim"), Mapping) and not v.get("volumeClaimName")]  # fmt: skip


def with_job_volumes(template: Mapping[str, Any], raw: object, job: str = "", uid: str = "") -> dict[str, Any]:
    """The pod template with the job's volumes in it: a volume `job-volume-<i>` per claim
    (each claim once, as Volcano skips a repeated one) mounted in every app container; a claim
    to create (`volumeClaim`) under the name the job controller gives it."""
    out = copy.deepcopy(dict(template))
    if not isinstance(raw, list) or not raw:
        return out
    spec = out.setdefault("spec", {})
    seen: set[str] = set()
    for i, v in enumerate(raw):
        claim = str(v.get("volumeClaimName") or "") if isinstance(v, Mapping) else ""
        if not claim and isinstance(v, Mapping) and isinstance(v.get("volumeClaim"), Mapping):
            claim = generated_claim(job, uid, i)
        if not claim or claim in seen or not isinstance(v, Mapping) or not v.get("mountPath"):
            continue  # (admission refuses what is missing)
        seen.add(claim)
        name = f"job-volume-{i}"
        spec["volumes"] = [*(spec.get("volumes") or []), {"name": name, "persistentVolumeClaim": {"claimName": claim}}]
        for c in spec.get("containers") or []:
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), {"name": name, "mountPath": str(v["mountPath"])}]
    return out
