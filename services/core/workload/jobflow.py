"""Volcano's JobFlow (flow.volcano.sh/v1alpha1): a DAG of JobTemplates run as Volcano Jobs, each
one made once the jobs it depends on have Completed — pure decisions over what the API server
holds (the flow, its templates, the jobs it made); `services.kube.jobflows` reads and writes.

As Volcano's jobflow controller has it:

* the job of a flow step is `<flow>-<step>`, made from the JobTemplate named `<step>` in the
  flow's namespace (its spec as it is), labelled and annotated
  `volcano.sh/createdByJobTemplate: <namespace>.<step>`, owned by the flow;
* a step with no `dependsOn.targets` is made at once, any other when every target's job is
  `Completed` (the `probe` field is accepted and, as in Volcano, not consulted); a job the
  flow's status shows Completed stays done once it is gone (Volcano made it again: a template
  with `ttlSecondsAfterFinished` re-ran its step for ever);
* the flow's phase: from Pending (or none) it becomes Running once a job runs or completed and
  none failed, Failed once one failed; from Running, Succeed once every step's job Completed
  (a job failing while Running leaves it Running); Failed and Terminating flows are left as
  they are — no job made, no status written;
* `jobRetainPolicy: delete`: a Succeed flow's jobs are deleted.

Where Volcano's webhook would refuse the flow (a target that is no step, a cycle), nothing is
made and the problem is reported, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.core.workload import names

CREATED_BY = "volcano.sh/createdByJobTemplate"
PENDING, RUNNING, SUCCEED, FAILED, TERMINATING = "Pending", "Running", "Succeed", "Failed", "Terminating"
#: phases whose flows are left as they are (Volcano's failed and terminating states do nothing)
FROZEN = (FAILED, TERMINATING)
#: the status list each Job phase is counted in (Completing and Terminating in none, as Volcano's
#: status leaves them out; a phase not here is unknown)
LISTS = {"Pending": "pendingJobs", "Running": "runningJobs", "Completed": "completedJobs",
         "Failed": "failedJobs", "Terminated": "terminatedJobs", "Completing": "", "Terminating": ""}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Step:
    name: str  # the JobTemplate's name
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlowJob:
    """What the flow reads of one job it made."""

    name: str
    phase: str = ""
    created: str = ""  # creationTimestamp, as the API server wrote it
    retries: int = 0
    owned: bool = True  # owned by this very flow object (its uid)


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do for one flow now."""

    create: tuple[str, ...] = ()  # steps whose job is to be made
    delete: tuple[str, ...] = ()  # job names to delete (retain policy delete, flow succeeded)
    status: dict[str, Any] | None = None  # the status to write (None: leave it)
    problems: tuple[tuple[str, str, str], ...] = ()  # (path, value, rule)
    missing: tuple[str, ...] = field(default=())  # steps ready but without a JobTemplate


def job_name(flow: str, step: str) -> str:
    return f"{flow}-{step}"


def template_key(namespace: str, step: str) -> str:
    return f"{namespace}.{step}"


def steps_of(spec: Mapping[str, Any], flow: str) -> tuple[list[Step], list[tuple[str, str, str]]]:
    """The flow's steps and what is wrong with them (path, value, rule)."""
    problems: list[tuple[str, str, str]] = []
    steps: list[Step] = []
    raw = spec.get("flows")
    if not isinstance(raw, list) or not raw:
        return [], [("spec.flows", "", "a JobFlow needs at least one flow")]
    for i, item in enumerate(raw):
        path = f"spec.flows[{i}]"
        if not isinstance(item, Mapping) or not item.get("name"):
            problems.append((f"{path}.name", "", "required: the JobTemplate this step runs"))
            continue
        name = str(item["name"])
        if errs := names.dns1123_subdomain(job_name(flow, name)):
            problems.append((f"{path}.name", name, f"its job {job_name(flow, name)}: {names.go_list(errs)}"))
        depends = item.get("dependsOn") or {}
        targets = depends.get("targets") if isinstance(depends, Mapping) else None
        if targets is not None and (not isinstance(targets, list) or not all(isinstance(t, str) for t in targets)):
            problems.append((f"{path}.dependsOn.targets", str(targets), "must be a list of flow names"))
            targets = []
        if any(s.name == name for s in steps):
            problems.append((f"{path}.name", name, "duplicated flow name"))
        steps.append(Step(name, tuple(targets or ())))
    known = {s.name for s in steps}
    for i, s in enumerate(steps):
        for t in s.targets:
            if t not in known:
                problems.append((f"spec.flows[{i}].dependsOn.targets", t, f"no flow is named {t}"))
    if not problems and not _acyclic(steps):
        problems.append(("spec.flows", "", "the flows' dependsOn do not form a directed acyclic graph"))
    return steps, problems


def _acyclic(steps: Sequence[Step]) -> bool:
    waiting = {s.name: set(s.targets) for s in steps}
    while waiting:
        ready = [n for n, deps in waiting.items() if not deps & waiting.keys()]
        if not ready:
            return False
        for n in ready:
            del waiting[n]
    return True


def plan(flow: Mapping[str, Any], templates: Mapping[str, Any], jobs: Mapping[str, FlowJob]) -> Plan:
    """What the flow object asks now: `templates` the JobTemplates of its namespace by name,
    `jobs` the Jobs of the namespace that carry its steps' names."""
    meta = flow.get("metadata") or {}
    spec = flow.get("spec") or {}
    name = str(meta.get("name") or "")
    status = flow.get("status") or {}
    phase = str((status.get("state") or {}).get("phase") or "")
    if phase in FROZEN:
        return Plan()
    steps, problems = steps_of(spec, name)
    if problems:
        return Plan(problems=tuple(problems))
    live = {s.name: jobs.get(job_name(name, s.name)) for s in steps}
    if spec.get("jobRetainPolicy") == "delete" and phase == SUCCEED:
        return Plan(delete=tuple(j.name for j in live.values() if j is not None and j.owned))
    # a job the flow saw Completed and that is gone since (its ttlSecondsAfterFinished, a
    # delete by hand) stays done: Volcano's controller made it again, and a template with a ttl
    # re-ran its step for ever
    seen = {str(e.get("name")): e for e in status.get("jobStatusList") or [] if isinstance(e, Mapping)}
    mine: dict[str, FlowJob | None] = {}
    for s in steps:
        entry = seen.get(job_name(name, s.name))
        if live[s.name] is None and entry is not None and entry.get("state") == "Completed":
            mine[s.name] = FlowJob(name=job_name(name, s.name), phase="Completed",
                                   created=str(entry.get("startTimestamp") or ""),
                                   retries=int(entry.get("restartCount") or 0))  # fmt: skip
        else:
            mine[s.name] = live[s.name]

    def done(target: str) -> bool:
        job = mine.get(target)
        return job is not None and job.phase == "Completed"

    ready = [s.name for s in steps if mine[s.name] is None and all(done(t) for t in s.targets)]
    create = tuple(s for s in ready if s in templates)
    missing = tuple(s for s in ready if s not in templates)
    made = [j for j in mine.values() if j is not None and j.owned]
    return Plan(create=create, missing=missing, status=flow_status(status, made, len(steps), phase))


def flow_status(old: Mapping[str, Any], made: Sequence[FlowJob], steps: int, phase: str) -> dict[str, Any]:
    """The status Volcano's controller writes: jobs by phase, one entry per job (kept in the
    order first seen), the jobs' conditions, and the flow's phase moved on."""
    lists: dict[str, list[str]] = {k: [] for k in ("pendingJobs", "runningJobs", "failedJobs", "completedJobs",
                                                    "terminatedJobs", "unKnowJobs")}  # fmt: skip
    for job in made:
        where = LISTS.get(job.phase, "unKnowJobs")
        if where:
            lists[where].append(job.name)
    entries = [dict(e) for e in old.get("jobStatusList") or [] if isinstance(e, Mapping)]
    for job in made:
        entry = {"name": job.name, "state": job.phase, "restartCount": job.retries,
                 **({"startTimestamp": job.created} if job.created else {})}  # fmt: skip
        at = next((i for i, e in enumerate(entries) if e.get("name") == job.name), None)
        if at is None:
            entries.append(entry)
        else:
            entries[at] = {**entries[at], **entry}
    conditions = {j.name: {"phase": j.phase, **({"createTime": j.created} if j.created else {})} for j in made}
    if phase in ("", PENDING):
        running = bool(lists["runningJobs"] or lists["completedJobs"])
        phase = FAILED if lists["failedJobs"] else RUNNING if running else PENDING
    elif phase == RUNNING and len(lists["completedJobs"]) == steps:
        phase = SUCCEED
    # every list, empty ones too: written as a merge patch, a list left out would keep its old
    # names (a job Completed would still show among the running)
    return {**lists, "jobStatusList": entries, "conditions": conditions, "state": {"phase": phase}}
