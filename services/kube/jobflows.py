"""Volcano's JobFlows run: the Jobs of a flow's steps made as their dependencies complete, the
flow's status written, its jobs deleted after it succeeded when it says so. What to do is
`services.core.workload.jobflow.plan`; this reads the API server and writes to it.

It runs in the queue service beside the job controller, on the API server's objects alone:
the Jobs it makes enter Tessera's log as any Job does (admission), and a flow holds no state
the API server does not (the flow, its templates, its jobs), so a restart just lists again.

A JobTemplate's `status.jobDependsOnList` names the Jobs made from it (Volcano's jobtemplate
controller: written once there is one, never emptied).

A flow is Tessera's to run when the JobTemplates it names ask one of Tessera's scheduler
names (empty: `volcano`, as Volcano's webhook defaults a Job) — beside Volcano's own
controllers (the chart without `volcano` among its scheduler names), their flows are theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from services.core.workload import jobflow as jf
from services.kube import status, volcano
from services.kube.client import REFUSALS, Kube, KubeError, next_retry, retry_cap
from services.kube.listwatch import Change, Reflector
from services.kube.volcano import jobflows_path, jobs_path, jobtemplates_path
from services.runtime.tasks import cancel_all

log = logging.getLogger(__name__)


def _key(obj: dict[str, Any]) -> str:
    m = volcano.meta(obj)
    return f"{m.get('namespace') or 'default'}/{m.get('name') or ''}"


class JobFlowController:
    def __init__(self, kube: Kube, *, scheduler_names: Collection[str] = ("volcano",),
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.kube = kube
        self.scheduler_names = frozenset(scheduler_names)
        self.clock = clock
        self.flows: dict[str, dict[str, Any]] = {}
        self.templates: dict[str, dict[str, Any]] = {}  # ns/name → JobTemplate
        self.jobs: dict[str, dict[str, Any]] = {}  # ns/name → Job made from a template
        self.dirty: set[str] = set()
        self.dirty_templates: set[str] = set()
        self.said: dict[str, str] = {}  # flow → the last problem told (told once per change)
        #: flow → the delay before its failed reconcile is retried (doubled at each failure in a
        #: row, dropped at one that goes through), and the refused create last said on it
        self.failing: dict[str, float] = {}
        self.refusal_said: dict[str, str] = {}
        #: flow uid → its jobs seen Completed or Failed (a job deleted by its ttl keeps its end)
        self.ended: dict[str, dict[str, jf.FlowJob]] = {}
        self._wake = asyncio.Event()
        self.synced = {k: asyncio.Event() for k in ("flow", "template", "job")}

    async def recover(self) -> None:
        """Nothing to recover: everything is listed from the API server at start."""

    # --- the API -----------------------------------------------------------------------------

    async def _watch(self, what: str, reflector: Reflector, store: dict[str, dict[str, Any]]) -> None:
        async for ch in reflector.changes():
            if ch.kind == "synced":
                self.synced[what].set()
                self._wake.set()
                continue
            self._observe(what, ch, store)

    def _observe(self, what: str, ch: Change, store: dict[str, dict[str, Any]]) -> None:
        if ch.kind == "delete":
            store.pop(ch.key, None)
        else:
            store[ch.key] = ch.obj
        ns = ch.key.split("/", 1)[0]
        if what == "template":
            self.dirty_templates.add(ch.key)
        elif what == "job" and (made_by := str((volcano.meta(ch.obj).get("labels") or {}).get(jf.CREATED_BY) or "")):
            self.dirty_templates.add(made_by.replace(".", "/", 1))
        if what == "job":
            self._note_ended(ch.obj)
        if what == "flow":
            self.dirty.add(ch.key)
            if ch.kind == "delete":
                self.said.pop(ch.key, None)
                self.ended.pop(volcano.uid(ch.obj), None)
        else:  # a template or a job: every flow of the namespace that names it
            step = ch.key.split("/", 1)[1]
            for key, flow in self.flows.items():
                if key.startswith(f"{ns}/") and any(
                        step in (s, jf.job_name(key.split("/", 1)[1], s)) for s in _step_names(flow)):  # fmt: skip
                    self.dirty.add(key)
        self._wake.set()

    def _note_ended(self, job: dict[str, Any]) -> None:
        """A job's end is known the moment its watch says it, not at the flow's next pass: with
        a ttl of 0 it is deleted at once, and when both words came while a pass was out (a
        status write, an event) the pass after found neither job nor status naming it, and
        made the step again (the CI flake of the ttl test)."""
        if str(((job.get("status") or {}).get("state") or {}).get("phase") or "") not in ("Completed", "Failed"):
            return
        for owner in volcano.meta(job).get("ownerReferences") or []:
            if owner.get("kind") == "JobFlow" and owner.get("uid"):
                got = _flow_job(job, str(owner["uid"]))
                self.ended.setdefault(str(owner["uid"]), {})[got.name] = got

    def _ours(self, key: str, flow: dict[str, Any]) -> bool:
        ns = key.split("/", 1)[0]
        names = [self.templates.get(f"{ns}/{s}") for s in _step_names(flow)]
        known = [t for t in names if t is not None]
        return bool(known) and all(self._our_template(t) for t in known)

    def _our_template(self, template: dict[str, Any]) -> bool:
        return str((template.get("spec") or {}).get("schedulerName") or "volcano") in self.scheduler_names

    async def template_status(self, key: str) -> None:
        """The Jobs made from this JobTemplate, in its status (none yet: left as it is)."""
        template = self.templates.get(key)
        if template is None or not self._our_template(template):
            return
        ns, name = key.split("/", 1)
        label = jf.template_key(ns, name)
        made = sorted(str(volcano.meta(j).get("name") or "") for k, j in self.jobs.items() if k.startswith(f"{ns}/")
                      and (volcano.meta(j).get("labels") or {}).get(jf.CREATED_BY) == label)  # fmt: skip
        if made and (template.get("status") or {}).get("jobDependsOnList") != made:
            await self.kube.patch(jobtemplates_path(ns, name, "status"), {"status": {"jobDependsOnList": made}})

    def _made(self, key: str, flow: dict[str, Any]) -> dict[str, jf.FlowJob]:
        ns, name = key.split("/", 1)
        uid = volcano.uid(flow)
        out: dict[str, jf.FlowJob] = {}
        ended = self.ended.get(uid) or {}
        pending = str(((flow.get("status") or {}).get("state") or {}).get("phase") or jf.PENDING) == jf.PENDING
        for step in _step_names(flow):
            job = self.jobs.get(f"{ns}/{jf.job_name(name, step)}")
            if job is None:
                # seen to end by this process's watch and gone since (a ttl), maybe before any
                # pass wrote the flow's status to say so: Completed stays done; Failed fails a
                # flow still Pending, as seeing it would have (a Running flow makes it again,
                # as Volcano's does with a failed job gone)
                last = ended.get(jf.job_name(name, step))
                if last is not None and (last.phase == "Completed" or pending):
                    out[last.name] = last
                continue
            out[jf.job_name(name, step)] = _flow_job(job, uid)
        return out

    async def reconcile(self, key: str) -> None:
        flow = self.flows.get(key)
        if flow is None:  # deleted: nothing of it is kept
            self.refusal_said.pop(key, None)
        if flow is None or not self._ours(key, flow):
            return
        ns, name = key.split("/", 1)
        templates = {k.split("/", 1)[1]: t for k, t in self.templates.items() if k.startswith(f"{ns}/")}
        plan = jf.plan(flow, templates, self._made(key, flow))
        said = "; ".join(f"{p}: {r}" + (f" (value: {v})" if v else "") for p, v, r in plan.problems) or \
            "; ".join(f"spec.flows: JobTemplate {ns}/{s} not found: its job waits for it" for s in plan.missing)  # fmt: skip
        if said and self.said.get(key) != said:
            self.said[key] = said
            log.warning("JobFlow %s: %s", key, said)
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, volcano.typed(flow, "JobFlow"), "Warning",
                                         "InvalidJobFlow" if plan.problems else "JobTemplateNotFound", said,
                                         self.clock())  # fmt: skip
        elif not said:
            self.said.pop(key, None)
        for job in plan.delete:
            await self.kube.delete_this(jobs_path(ns, job), volcano.uid(self.jobs.get(f"{ns}/{job}") or {}))
        for step in plan.create:
            await self._create(flow, ns, name, step, templates[step])
        if plan.status is not None and volcano.status_differs(flow.get("status"), plan.status):
            written = await self.kube.patch(jobflows_path(ns, name, "status"),
                                            {"status": volcano.removals(flow.get("status"), plan.status)})  # fmt: skip
            if isinstance(written, dict) and self.flows.get(key) is flow:
                # the next pass reads what was written, not the watch's older copy: a job the
                # status now holds Completed may be gone (ttl) before the watch brings the flow
                self.flows[key] = volcano.typed(written, "JobFlow")

    async def _create(self, flow: dict[str, Any], ns: str, name: str, step: str, template: dict[str, Any]) -> None:
        made_by = jf.template_key(ns, step)
        owner = {"apiVersion": volcano.FLOW, "kind": "JobFlow", "name": name, "uid": volcano.uid(flow),
                 "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        body = {"apiVersion": volcano.BATCH, "kind": "Job",
                "metadata": {"name": jf.job_name(name, step), "namespace": ns, "labels": {jf.CREATED_BY: made_by},
                             "annotations": {jf.CREATED_BY: made_by}, "ownerReferences": [owner]},
                "spec": template.get("spec") or {}}  # fmt: skip
        try:
            await self.kube.create(jobs_path(ns), body)
        except KubeError as exc:
            if exc.status == 409:  # there already (made before a restart): its watch brings it
                return
            message = f"Error creating job {body['metadata']['name']}: {exc.message}"
            if exc.status in REFUSALS and self.refusal_said.get(f"{ns}/{name}") != message:
                with contextlib.suppress(KubeError):  # (a quota, a webhook: said where the user looks)
                    await status.write_event(self.kube, volcano.typed(flow, "JobFlow"), "Warning", "FailedCreate",
                                             message, self.clock())  # fmt: skip
                    self.refusal_said[f"{ns}/{name}"] = message
            raise
        else:
            log.info("JobFlow %s/%s: made job %s", ns, name, body["metadata"]["name"])
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, volcano.typed(flow, "JobFlow"), "Normal", "Created",
                                         f"create a job named {body['metadata']['name']}!", self.clock())  # fmt: skip

    # --- running -------------------------------------------------------------------------------

    async def _loop(self) -> None:
        for ev in self.synced.values():
            await ev.wait()
        self.dirty.update(self.flows)
        self.dirty_templates.update(self.templates)
        while True:
            await self._wake.wait()
            self._wake.clear()
            keys, self.dirty = sorted(self.dirty), set()
            for key in keys:
                await self._reconcile_one(key)
            templates, self.dirty_templates = sorted(self.dirty_templates), set()
            for key in templates:
                try:
                    await self.template_status(key)
                except KubeError as exc:
                    log.warning("JobTemplate %s status not written (%s): at its next change", key, exc)

    async def _reconcile_one(self, key: str) -> None:
        """One flow reconciled; a failure is retried after a delay that doubles while it keeps
        failing (to minutes when the server refused, seconds when it did not answer), as a
        controller's rate-limited requeue: retried every second, a flow whose Job a quota
        refused asked the API server once a second for as long as it lived."""
        try:
            await self.reconcile(key)
        except KubeError as exc:
            delay = self.failing[key] = next_retry(self.failing.get(key), retry_cap(exc.status))
            log.warning("JobFlow %s not reconciled (%s): again in %.0f s", key, exc, delay)
            asyncio.get_running_loop().call_later(delay, self._again, key)
        else:
            self.failing.pop(key, None)
            self.refusal_said.pop(key, None)  # (the same refusal coming back later is said again)

    def _again(self, key: str) -> None:
        self.dirty.add(key)
        self._wake.set()

    async def run(self, stopping: asyncio.Event) -> None:
        tasks = [asyncio.create_task(c) for c in (
            self._watch("flow", Reflector(self.kube, jobflows_path()), self.flows),
            self._watch("template", Reflector(self.kube, jobtemplates_path()), self.templates),
            self._watch("job", Reflector(self.kube, jobs_path(), query={"labelSelector": jf.CREATED_BY}), self.jobs),
            self._loop(),
        )]  # fmt: skip
        try:
            await stopping.wait()
        finally:
            await cancel_all(tasks)


def _flow_job(job: dict[str, Any], flow_uid: str) -> jf.FlowJob:
    """What the flow with this uid reads of one of its steps' jobs."""
    meta, st = volcano.meta(job), job.get("status") or {}
    owners = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "JobFlow"]
    return jf.FlowJob(name=str(meta.get("name") or ""), phase=str((st.get("state") or {}).get("phase") or ""),
                      created=str(meta.get("creationTimestamp") or ""), retries=int(st.get("retryCount") or 0),
                      owned=any(r.get("uid") == flow_uid for r in owners))  # fmt: skip


def _step_names(flow: dict[str, Any]) -> list[str]:
    return [str(f.get("name")) for f in (flow.get("spec") or {}).get("flows") or []
            if isinstance(f, dict) and f.get("name")]  # fmt: skip
