"""Volcano's JobFlow (refused before: no controller read it, its Jobs were never made): the
decisions as pure functions (services/core/workload/jobflow.py), then on the emulated cluster
a two-step flow runs its second step only once the first Completed, writes Volcano's status
and, with `jobRetainPolicy: delete`, deletes its jobs once it succeeded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.core.workload import jobflow as jf
from services.kube import volcano
from services.kube.client import Kube, Limits
from services.kube.jobflows import JobFlowController
from services.kube.volcano import jobflows_path, jobs_path, jobtemplates_path
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until


def flow(*steps: tuple[str, list[str]], phase: str = "", retain: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"flows": [{"name": s, **({"dependsOn": {"targets": t}} if t else {})} for s, t in steps]}
    if retain:
        spec["jobRetainPolicy"] = retain
    return {"metadata": {"name": "pipe", "namespace": "default", "uid": "f-1"}, "spec": spec,
            "status": {"state": {"phase": phase}} if phase else {}}  # fmt: skip


TEMPLATES = {"prep": {"spec": {}}, "train": {"spec": {}}, "eval": {"spec": {}}}


def job(step: str, phase: str, owned: bool = True) -> jf.FlowJob:
    return jf.FlowJob(name=f"pipe-{step}", phase=phase, created="2026-12-06T10:00:00Z", owned=owned)


def test_a_step_is_made_once_every_target_completed_and_the_phase_moves_as_volcanos() -> None:
    dag = flow(("prep", []), ("train", ["prep"]), ("eval", ["prep", "train"]))
    first = jf.plan(dag, TEMPLATES, {})
    assert first.create == ("prep",) and first.status == {
        "pendingJobs": [], "runningJobs": [], "failedJobs": [], "completedJobs": [], "terminatedJobs": [],
        "unKnowJobs": [], "jobStatusList": [], "conditions": {}, "state": {"phase": "Pending"}}  # fmt: skip
    running = jf.plan(dag, TEMPLATES, {"pipe-prep": job("prep", "Running")})
    assert running.create == () and running.status is not None
    assert running.status["runningJobs"] == ["pipe-prep"] and running.status["state"] == {"phase": "Running"}
    assert running.status["jobStatusList"] == [{"name": "pipe-prep", "state": "Running", "restartCount": 0,
                                                "startTimestamp": "2026-12-06T10:00:00Z"}]  # fmt: skip
    dag["status"] = running.status
    done = jf.plan(dag, TEMPLATES, {"pipe-prep": job("prep", "Completed")})
    assert done.create == ("train",)  # eval waits for train as well
    assert done.status is not None and done.status["completedJobs"] == ["pipe-prep"]
    all_done = {f"pipe-{s}": job(s, "Completed") for s in ("prep", "train", "eval")}
    assert jf.plan(dag, TEMPLATES, all_done).status["state"] == {"phase": "Succeed"}  # type: ignore[index]
    # a failure: from Pending the flow fails; from Running it stays Running (as Volcano's does)
    assert jf.plan(flow(("prep", [])), TEMPLATES, {"pipe-prep": job("prep", "Failed")}).status["state"] == {"phase": "Failed"}  # type: ignore[index]
    assert jf.plan(dag, TEMPLATES, {"pipe-prep": job("prep", "Failed")}).status["state"] == {"phase": "Running"}  # type: ignore[index]
    # Failed and Terminating flows are left as they are
    assert jf.plan(flow(("prep", []), phase="Failed"), TEMPLATES, {}) == jf.Plan()


def test_a_missing_template_waits_and_a_succeeded_flow_deletes_only_its_own_jobs() -> None:
    lacking = jf.plan(flow(("prep", []), ("train", [])), {"prep": {}}, {})
    assert lacking.create == ("prep",) and lacking.missing == ("train",)
    deleting = flow(("prep", []), ("train", ["prep"]), phase="Succeed", retain="delete")
    plan = jf.plan(deleting, TEMPLATES, {"pipe-prep": job("prep", "Completed"),
                                         "pipe-train": job("train", "Completed", owned=False)})  # fmt: skip
    assert plan.delete == ("pipe-prep",) and plan.create == () and plan.status is None
    kept = jf.plan(flow(("prep", []), phase="Succeed"), TEMPLATES, {"pipe-prep": job("prep", "Completed")})
    assert kept.delete == () and kept.status is not None and kept.status["state"] == {"phase": "Succeed"}


def test_a_completed_job_gone_since_stays_done_and_is_not_made_again() -> None:
    """A template with ttlSecondsAfterFinished: its job is deleted once Completed. Volcano's
    controller then made it again (the step ran for ever); here the flow's status remembers it."""
    dag = flow(("prep", []), ("train", ["prep"]))
    dag["status"] = jf.plan(dag, TEMPLATES, {"pipe-prep": job("prep", "Completed")}).status
    gone = jf.plan(dag, TEMPLATES, {})  # prep's job deleted by its ttl, train not made yet
    assert gone.create == ("train",) and gone.status is not None
    assert gone.status["completedJobs"] == ["pipe-prep"] and gone.status["state"] == {"phase": "Running"}
    dag["status"] = gone.status
    finished = jf.plan(dag, TEMPLATES, {"pipe-train": job("train", "Completed")})
    assert finished.create == () and finished.status["state"] == {"phase": "Succeed"}  # type: ignore[index]
    # a job seen running and gone is made again (it never finished)
    running = flow(("prep", []))
    running["status"] = jf.plan(running, TEMPLATES, {"pipe-prep": job("prep", "Running")}).status
    assert jf.plan(running, TEMPLATES, {}).create == ("prep",)


def test_what_volcanos_webhook_would_refuse_is_named_and_nothing_is_made() -> None:
    cases = {
        "cycle": (flow(("a", ["b"]), ("b", ["a"])), [("spec.flows", "", "the flows' dependsOn do not form a directed acyclic graph")]),
        "unknown": (flow(("a", ["nope"])), [("spec.flows[0].dependsOn.targets", "nope", "no flow is named nope")]),
        "twice": (flow(("a", []), ("a", [])), [("spec.flows[1].name", "a", "duplicated flow name")]),
        "name": (flow(("Train_1", [])), [("spec.flows[0].name", "Train_1", "its job pipe-Train_1: [a lowercase RFC 1123 subdomain")]),
        "empty": ({"metadata": {"name": "pipe"}, "spec": {"flows": []}}, [("spec.flows", "", "a JobFlow needs at least one flow")]),
    }  # fmt: skip
    for what, (bad, want) in cases.items():
        plan = jf.plan(bad, {"a": {}, "b": {}, "Train_1": {}}, {})
        assert plan.create == () and plan.status is None, what
        got = [(p, v, r[: len(want[i][2])]) for i, (p, v, r) in enumerate(plan.problems)]
        assert got == want, what


def template(name: str) -> dict[str, Any]:
    return {"apiVersion": volcano.FLOW, "kind": "JobTemplate", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "default", "tasks": [
                {"name": "main", "replicas": 1, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                    "restartPolicy": "Never"}}}]}}  # fmt: skip


async def test_a_flow_runs_its_steps_in_order_and_deletes_its_jobs_once_it_succeeded(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    for step in ("prep", "train"):
        await cluster.kube.create(jobtemplates_path("default"), template(step))
    body = {"apiVersion": volcano.FLOW, "kind": "JobFlow", "metadata": {"name": "pipe", "namespace": "default"},
            "spec": {"jobRetainPolicy": "delete",
                     "flows": [{"name": "prep"}, {"name": "train", "dependsOn": {"targets": ["prep"]}}]}}  # fmt: skip
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            made = await cluster.kube.create(jobflows_path("default"), body)

            async def phase_of(name: str) -> str:
                obj = await cluster.present(jobs_path("default", name)) or {}
                return str(((obj.get("status") or {}).get("state") or {}).get("phase") or "")

            async def running(name: str) -> bool:
                return await phase_of(name) == "Running"

            await wait_until(lambda: running("pipe-prep"), 60, "the first step's job Running")
            prep = await cluster.present(jobs_path("default", "pipe-prep")) or {}
            assert prep["metadata"]["labels"] == {jf.CREATED_BY: "default.prep"}
            assert [(r["kind"], r["uid"]) for r in prep["metadata"]["ownerReferences"]] == [("JobFlow", made["metadata"]["uid"])]
            assert await cluster.present(jobs_path("default", "pipe-train")) is None  # waits for prep

            async def listed_in_template() -> bool:
                got = await cluster.present(jobtemplates_path("default", "prep")) or {}
                return (got.get("status") or {}).get("jobDependsOnList") == ["pipe-prep"]

            await wait_until(listed_in_template, 60, "the JobTemplate listing the job made from it")

            async def flow_status() -> dict[str, Any]:
                return (await cluster.present(jobflows_path("default", "pipe")) or {}).get("status") or {}

            async def flow_running() -> bool:
                st = await flow_status()
                return st.get("runningJobs") == ["pipe-prep"] and st.get("state") == {"phase": "Running"}

            await wait_until(flow_running, 60, "the flow Running with its first job")
            await kubelet.finish("default", "pipe-prep-main-0", 0)
            await wait_until(lambda: running("pipe-train"), 60, "the second step made once the first Completed")

            async def moved_on() -> bool:
                st = await flow_status()
                return st.get("runningJobs") == ["pipe-train"] and st.get("completedJobs") == ["pipe-prep"]

            await wait_until(moved_on, 60, "the first job among the completed, no longer among the running")
            await kubelet.finish("default", "pipe-train-main-0", 0)

            async def all_gone() -> bool:
                st = await flow_status()
                gone = [await cluster.present(jobs_path("default", n)) is None for n in ("pipe-prep", "pipe-train")]
                return st.get("state") == {"phase": "Succeed"} and all(gone)

            await wait_until(all_gone, 60, "the flow Succeed and its jobs deleted (jobRetainPolicy: delete)")
            st = await flow_status()
            assert sorted(e["name"] for e in st["jobStatusList"]) == ["pipe-prep", "pipe-train"]
            assert st["runningJobs"] == [] and st["completedJobs"] == ["pipe-prep", "pipe-train"]  # none left behind
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_step_whose_job_its_ttl_deleted_is_not_run_again(cluster: Cluster, tmp_path: Path) -> None:
    """`ttlSecondsAfterFinished: 0` in the first template: its job goes the moment it Completed.
    The second step still starts, the first is never made again, and the flow succeeds."""
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    prep = template("prep")
    prep["spec"]["ttlSecondsAfterFinished"] = 0
    await cluster.kube.create(jobtemplates_path("default"), prep)
    await cluster.kube.create(jobtemplates_path("default"), template("train"))
    body = {"apiVersion": volcano.FLOW, "kind": "JobFlow", "metadata": {"name": "pipe", "namespace": "default"},
            "spec": {"flows": [{"name": "prep"}, {"name": "train", "dependsOn": {"targets": ["prep"]}}]}}  # fmt: skip
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, run_for={"pipe-prep-main-0": 0, "pipe-train-main-0": 0}):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            made = await cluster.kube.create(jobflows_path("default"), body)
            seen: set[str] = set()  # uids of every pipe-prep Job there was

            async def succeeded() -> bool:
                got = await cluster.present(jobs_path("default", "pipe-prep"))
                if got is not None:
                    seen.add(got["metadata"]["uid"])
                flow_obj = await cluster.present(jobflows_path("default", "pipe")) or {}
                return ((flow_obj.get("status") or {}).get("state") or {}).get("phase") == "Succeed"

            await wait_until(succeeded, 60, "the flow Succeed with its first job gone by its ttl")
            assert await cluster.present(jobs_path("default", "pipe-prep")) is None  # gone, and not made again
            assert len(seen) <= 1
            events = await cluster.kube.get("/api/v1/namespaces/default/events")
            created = [e["message"] for e in events.get("items") or []
                       if e["involvedObject"].get("uid") == made["metadata"]["uid"] and e["reason"] == "Created"]  # fmt: skip
            assert sorted(created) == ["create a job named pipe-prep!", "create a job named pipe-train!"]
        finally:
            await asyncio.to_thread(cp.stop)


@pytest.mark.parametrize("end", ["Completed", "Failed"])
async def test_a_job_ended_and_gone_while_the_controller_was_busy_is_not_made_again(cluster: Cluster, end: str) -> None:
    """The CI flake of the ttl test above, made to happen: the flow's controller is busy (its
    status write held) while its first job ends and is deleted (ttl 0). Both words reach its
    watch before its next pass: it must still know how the step ended — before, it went by what
    it read at a pass, found no job and a status without it, and made the step again. Completed:
    the next step is made; Failed, the flow still Pending: the flow fails, as seeing it would."""
    await cluster.volcano_crds()
    for step in ("prep", "train"):
        await cluster.kube.create(jobtemplates_path("default"), template(step))
    agent = "flows-under-test"
    held = cluster.held_requests[(agent, "update", "flow.volcano.sh/jobflows/status")] = asyncio.Event()
    kube = await Kube.connect(str(cluster.kubeconfig), Limits(qps=0), agent=agent)
    controller = JobFlowController(kube)
    stopping = asyncio.Event()
    running = asyncio.create_task(controller.run(stopping))
    try:
        body = {"apiVersion": volcano.FLOW, "kind": "JobFlow", "metadata": {"name": "pipe", "namespace": "default"},
                "spec": {"flows": [{"name": "prep"}, {"name": "train", "dependsOn": {"targets": ["prep"]}}]}}  # fmt: skip
        await cluster.kube.create(jobflows_path("default"), body)

        async def status_out() -> bool:  # the first pass made prep's job and is writing the status
            return cluster.requests[(agent, "update", "flow.volcano.sh/jobflows/status")] > 0

        await wait_until(status_out, 30, "the flow's first status write sent")
        await cluster.kube.patch(jobs_path("default", "pipe-prep", "status"), {"status": {"state": {"phase": end}}})

        async def seen(phase: str | None) -> bool:
            job = controller.jobs.get("default/pipe-prep")
            return (job is None) if phase is None else ((job or {}).get("status") or {}).get("state", {}).get("phase") == phase  # fmt: skip

        await wait_until(lambda: seen(end), 30, f"the {end} job on the controller's watch")
        await cluster.kube.delete(jobs_path("default", "pipe-prep"))
        await wait_until(lambda: seen(None), 30, "the job's deletion on the controller's watch")
        held.set()

        async def settled() -> bool:
            if end == "Completed":
                return await cluster.present(jobs_path("default", "pipe-train")) is not None
            flow_obj = await cluster.present(jobflows_path("default", "pipe")) or {}
            return ((flow_obj.get("status") or {}).get("state") or {}).get("phase") == "Failed"

        await wait_until(settled, 30, "the second step's job made" if end == "Completed" else "the flow Failed")
        assert await cluster.present(jobs_path("default", "pipe-prep")) is None  # not made again
        assert cluster.requests[(agent, "create", "batch.volcano.sh/jobs")] == (2 if end == "Completed" else 1)
    finally:
        held.set()
        stopping.set()
        await cancel_all([running])
        await kube.close()


async def test_a_flows_refused_job_is_said_on_the_flow_and_retried_with_backoff(cluster: Cluster) -> None:
    """A flow's step whose Job the API server refuses (an object-count ResourceQuota on Volcano
    Jobs, a webhook) was asked again every second for as long as the flow lived, said nowhere.
    Now the JobFlow gets a `FailedCreate` Warning naming the Job and the server's words, once
    per refusal, the retries double (to minutes), and the Job is made once the quota has room."""
    await cluster.volcano_crds()
    ns, key = "flows-capped", "count/jobs.batch.volcano.sh"
    await cluster.limit_count(ns, key, 0)
    made_template = template("prep")
    made_template["metadata"]["namespace"] = ns
    made_template = await cluster.kube.create(jobtemplates_path(ns), made_template)
    body = {"apiVersion": volcano.FLOW, "kind": "JobFlow", "metadata": {"name": "pipe", "namespace": ns},
            "spec": {"flows": [{"name": "prep"}]}}  # fmt: skip
    made_flow = await cluster.kube.create(jobflows_path(ns), body)
    controller = JobFlowController(cluster.kube)
    controller.templates[f"{ns}/prep"] = volcano.typed(made_template, "JobTemplate")
    controller.flows[f"{ns}/pipe"] = volcano.typed(made_flow, "JobFlow")

    async def refusals() -> list[dict[str, Any]]:
        return [e for e in await cluster.events(ns) if e.get("reason") == "FailedCreate"]

    delays = []
    for _ in range(3):
        await controller._reconcile_one(f"{ns}/pipe")
        delays.append(controller.failing[f"{ns}/pipe"])
    assert delays == [1.0, 2.0, 4.0]
    (event,) = await refusals()
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "JobFlow", event
    assert str(event["message"]).startswith("Error creating job pipe-prep: "), event["message"]
    assert "forbidden" in str(event["message"]), event["message"]
    assert await cluster.present(jobs_path(ns, "pipe-prep")) is None

    await cluster.limit_count(ns, key, None)
    await controller._reconcile_one(f"{ns}/pipe")
    assert await cluster.present(jobs_path(ns, "pipe-prep")) is not None
    assert f"{ns}/pipe" not in controller.failing
