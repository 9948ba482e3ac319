"""A Volcano Job's task `dependsOn`: the job controller makes a task's pods only once the tasks
it depends on are ready (their minAvailable pods Running with every container ready, as
Volcano's does, or Succeeded, which Volcano's never counts); the whole gang is placed (its
cards booked) from the start, so the waiting task's pods bind as soon as they are made. Admission refuses a dependency that names no task
or forms a cycle, in Volcano's words."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.core.workload.jobplugins import NOT_A_DAG, dependency_problems
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from services.kube.listwatch import Reflector
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster, Kubelet
from tests.processes import wait_until


@pytest.mark.parametrize(
    ("depends", "ok"),
    [({"launcher": ["worker"]}, True), ({"launcher": ["worker"], "worker": ["launcher"]}, False),
     ({"launcher": ["workers"]}, False), ({"launcher": ["launcher"]}, False)],
)  # fmt: skip
def test_dependencies_must_form_a_dag_of_the_jobs_tasks(depends: dict[str, list[str]], ok: bool) -> None:
    names = ["launcher", "worker"]
    tasks = [{"name": n, **({"dependsOn": {"name": depends[n]}} if n in depends else {})} for n in names]
    problems = dependency_problems(tasks, names)
    assert problems == ([] if ok else [("spec.tasks", None, NOT_A_DAG)])


def mpi_like_job() -> dict[str, Any]:
    def task(name: str, replicas: int, depends: list[str] | None = None) -> dict[str, Any]:
        t: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}  # fmt: skip
        if depends:
            t["dependsOn"] = {"name": depends}
        return t

    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "mpi", "namespace": "default"},
            "spec": {"minAvailable": 3, "schedulerName": "volcano", "queue": "default",
                     "tasks": [task("launcher", 1, ["worker"]), task("worker", 2)]}}  # fmt: skip


async def test_the_launcher_pod_is_made_once_the_workers_run(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    seen: list[tuple[str, str]] = []  # (pod, phase) in the order the API server told them

    async def record() -> None:
        async for ch in Reflector(cluster.kube, pods_path()).changes():
            if ch.kind == "upsert":
                seen.append((ch.obj["metadata"]["name"], kpods.phase(ch.obj)))

    recorder = asyncio.create_task(record())
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:
        await cluster.kube.create(volcano.jobs_path("default"), mpi_like_job())
        workers = ("mpi-worker-0", "mpi-worker-1")

        async def workers_bound() -> bool:
            got = [await cluster.pod("default", w) for w in workers]
            return all(p is not None and p["spec"].get("nodeName") for p in got)

        await wait_until(workers_bound, 60, "the workers made and bound (no kubelet runs them yet)")
        async with Kubelet(cluster):

            async def launcher_running() -> bool:
                p = await cluster.pod("default", "mpi-launcher-0")
                return p is not None and kpods.phase(p) == "Running"

            await wait_until(launcher_running, 60, "the launcher made, bound and Running once the workers run")

        async def watched() -> bool:  # the test's watch may lag behind the read above
            return any(n == "mpi-launcher-0" for n, _ in seen)

        await wait_until(watched, 30, "the launcher seen by the watch")
        first_launcher = next(i for i, (n, _) in enumerate(seen) if n == "mpi-launcher-0")
        for w in workers:
            running = next(i for i, (n, phase) in enumerate(seen) if n == w and phase == "Running")
            assert running < first_launcher, seen
    finally:
        await asyncio.to_thread(cp.stop)
        await cancel_all([recorder])


async def test_a_task_whose_dependency_ran_to_its_end_unseen_running_is_still_made(cluster: Cluster, tmp_path: Path) -> None:
    """A preparation task whose pod the kubelet first reports Succeeded (a container done within
    its first status sync; or Running and Succeeded both came while the controller was busy):
    its containers are not ready (terminated), which Volcano's check asks of a Succeeded pod
    too — the training task was never made, its cards booked for good."""
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    job = mpi_like_job()
    job["metadata"]["name"] = "pipe"
    job["spec"]["minAvailable"] = 2
    job["spec"]["tasks"] = [job["spec"]["tasks"][1], job["spec"]["tasks"][0]]  # worker, then launcher
    job["spec"]["tasks"][0].update(name="prep", replicas=1)
    job["spec"]["tasks"][1].update(name="train", dependsOn={"name": ["prep"]})
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:
        await cluster.kube.create(volcano.jobs_path("default"), job)

        async def prep_bound() -> bool:
            p = await cluster.pod("default", "pipe-prep-0")
            return p is not None and bool(p["spec"].get("nodeName"))

        await wait_until(prep_bound, 60, "the prep pod made and bound")
        assert await cluster.pod("default", "pipe-train-0") is None  # waits for prep
        done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        await cluster.kube.patch(pods_path("default", "pipe-prep-0", "status"), {"status": {
            "phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": False, "state": done}]}})  # fmt: skip

        async def train_bound() -> bool:
            p = await cluster.pod("default", "pipe-train-0")
            return p is not None and bool(p["spec"].get("nodeName"))

        await wait_until(train_bound, 60, "the train pod made and bound once prep Succeeded")
    finally:
        await asyncio.to_thread(cp.stop)


async def test_a_job_suspended_before_its_launcher_is_made_is_aborted_and_resumes(cluster: Cluster, tmp_path: Path) -> None:
    """The launcher is placed with the gang but made only once the workers run: suspended
    before that, its task had nothing to stop and nothing ever said it stopped, so the job sat
    in Aborting for good, its nodes booked (helper-22's review). Now the job controller reports
    the never-made task stopped: the job is Aborted once its workers are gone, and resumes."""
    from tests.kube.test_volcano_commands import command, consumed

    await cluster.volcano_crds()
    await cluster.create_node("n1")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:
        job = await cluster.kube.create(volcano.jobs_path("default"), mpi_like_job())
        workers = ("mpi-worker-0", "mpi-worker-1")

        async def workers_bound() -> bool:
            got = [await cluster.pod("default", w) for w in workers]
            return all(p is not None and p["spec"].get("nodeName") for p in got)

        await wait_until(workers_bound, 60, "the workers made and bound (no kubelet runs them yet)")
        async with Kubelet(cluster, hold_starts=True):  # the workers' images pulling: never Running
            await cluster.kube.create(volcano.commands_path("default"), command("stop", "AbortJob", job))
            await wait_until(lambda: consumed(cluster, "stop"), 30, "the AbortJob Command consumed")

            async def phase_is(want: str) -> bool:
                now = await cluster.present(volcano.jobs_path("default", "mpi")) or {}
                return ((now.get("status") or {}).get("state") or {}).get("phase") == want

            await wait_until(lambda: phase_is("Aborted"), 60, "the job Aborted once its workers are gone")
            assert await cluster.pod("default", "mpi-launcher-0") is None
            await cluster.kube.create(volcano.commands_path("default"), command("go", "ResumeJob", job))
            await wait_until(lambda: consumed(cluster, "go"), 30, "the ResumeJob Command consumed")
            await wait_until(workers_bound, 60, "the workers made and bound again")
    finally:
        await asyncio.to_thread(cp.stop)
