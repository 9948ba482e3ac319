"""Tessera beside a Volcano that stays, and PodGroups whose name outlives their object
(rev-shared's review).

- A PodGroup deleted and made again under its name while Tessera was down is a new object:
  the old job ends and the new one is judged. It was refused for good ("a live job of this name
  exists with a different spec (delete it first)", and deleting it again did not help), and the
  queue service wrote the old job's status over the new object, which woke admission's refusal
  again: thousands of writes a minute on an object another team owns.
- Beside a Volcano that stays (`--scheduler-name tessera`), a PodGroup is Tessera's only when
  Tessera's pods are in it: Volcano's PodGroup controller makes `podgroup-<owner uid>` for the
  ReplicaSets whose pods say `schedulerName: volcano`, and Tessera took every PodGroup not owned
  by a Volcano Job — admitted it, enqueued it on its minResources and rewrote its status (a
  Running gang shown Inqueue with 0 running).
- There, a Queue's status (allocated, running, state) is Volcano's: Tessera wrote its own share
  over it (allocated wiped, running 2 → 0) at every pass; and a bus Command for a Queue is
  Volcano's controller's to consume.
- `tessera up --kubeconfig` looks for a running Volcano or HAMi scheduler first, as the chart
  does.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from contracts.events import JobDeleted, JobSubmitted
from services.admission.service import AdmissionService
from services.cli import preflight
from services.kube import volcano
from services.kube.jobcontroller import JobController
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.test_judged_again import replayed
from tests.kube.test_status_counts import Clock
from tests.processes import ROOT
from tests.test_chart import readme_hami_steps

SYNCED = Change("synced", "", {})


def team_pg(min_member: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup", "metadata": {"name": "team-pg", "namespace": "default"},
            "spec": {"minMember": min_member, "queue": "default", "minResources": {"cpu": cpu}}}  # fmt: skip


def upsert(obj: dict[str, Any], kind: str) -> Change:
    m = obj["metadata"]
    return Change("upsert", f"{m['namespace']}/{m['name']}", volcano.typed(obj, kind))


async def listed(source: PodSource, *changes: tuple[str, Change]) -> None:
    """What a (re)started admission's first listings bring: the changes, then every watch synced."""
    await source.process([*changes, *((what, SYNCED) for what in ("queue", "podgroup", "job", "pod"))])


async def submitted_uids(log: MemoryLog, name: str) -> list[str]:
    return [e.spec.annotations.get(volcano.OBJECT_UID, "") for _m, e in await replayed(log)
            if isinstance(e, JobSubmitted) and e.spec.name == name]  # fmt: skip


async def deletions(log: MemoryLog, name: str) -> int:
    return sum(isinstance(e, JobDeleted) and e.name == name for _m, e in await replayed(log))


def podgroup_writes(cluster: Cluster) -> int:
    """Writes of PodGroups (a patch is counted as an update) by the test's client."""
    return sum(n for (agent, verb, what), n in cluster.requests.items() if agent == cluster.kube.agent
               and verb in ("update", "patch") and what.startswith("scheduling.volcano.sh/podgroups"))  # fmt: skip


async def restarted(log: MemoryLog, cluster: Cluster) -> PodSource:
    """Admission started again on the same log."""
    admission = AdmissionService(log)
    await admission.recover()
    return PodSource(admission, cluster.kube)


async def test_a_podgroup_made_again_under_its_name_while_tessera_was_down_is_a_new_job(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    assert await submitted_uids(log, "team-pg") == [volcano.uid(old)]
    # Tessera is down (an upgrade): the group is deleted and made again, with another spec
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    new = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(2, "2"))
    source = await restarted(log, cluster)
    # its listing's object judged before that listing is over (batches cut anywhere)
    await source.process([*((what, SYNCED) for what in ("queue", "job", "pod")),
                          ("podgroup", upsert(new, "PodGroup"))])  # fmt: skip
    assert await submitted_uids(log, "team-pg") == [volcano.uid(old), volcano.uid(new)]
    await source.process([("podgroup", SYNCED)])
    assert await deletions(log, "team-pg") == 1, "the old object's job ended once, before the new one"
    job = source.admission.known.jobs[("default", "team-pg")]
    assert job.live and job.spec.min_available == 2
    refused = [e for e in await cluster.events() if e.get("reason") == "FailedAdmission"]
    assert not refused, refused
    status = (await cluster.present(volcano.podgroups_path("default", "team-pg")) or {}).get("status") or {}
    assert not any(c.get("type") == "Admitted" for c in status.get("conditions") or []), status


async def test_a_podgroup_deleted_while_tessera_was_down_ends_its_job_at_the_first_listing(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    source = await restarted(log, cluster)
    await listed(source)  # no watch event says it: the listing does not have it
    assert await deletions(log, "team-pg") == 1
    assert not source.admission.known.jobs[("default", "team-pg")].live


async def test_the_queue_service_writes_no_status_on_a_podgroup_it_did_not_admit(cluster: Cluster) -> None:
    """The log's job `team-pg` was admitted from the object with uid A; the API server's
    `team-pg` now has uid B (made again while Tessera was away, admission not caught up): its
    status is not the log's job's to write. It was, whole (conditions included), which dropped
    admission's `Admitted=False`, whose next judgment wrote it again: a loop of thousands of
    writes a minute. Counted: no write at all, however often the job is reconciled."""
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    new = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(2, "2"))
    controller = JobController(log, cluster.kube, clock=Clock())
    for m, event in await replayed(log):
        controller.fold(m.seq, event)
    controller.podgroups["default/team-pg"] = volcano.typed(new, "PodGroup")
    before = podgroup_writes(cluster)
    for _ in range(5):
        await controller.reconcile("default/team-pg")
    assert podgroup_writes(cluster) == before, "status written on a PodGroup the log did not admit"
    assert controller.writes == 0
    status = (await cluster.present(volcano.podgroups_path("default", "team-pg")) or {}).get("status") or {}
    assert status.get("phase") != "Inqueue", status


def queue(name: str) -> dict[str, Any]:
    return {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True}}  # fmt: skip


def tessera_pod(name: str, group: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "tessera", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip


async def volcanos_objects(cluster: Cluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Queue `research` and the PodGroup Volcano's PodGroup controller made for a
    ReplicaSet whose pods say `schedulerName: volcano` (one Running on a node), as a running
    Volcano wrote their status."""
    await cluster.kube.create(volcano.queues_path(), queue("research"))
    q = await cluster.kube.patch(volcano.queues_path("research", "status"), {"status": {
        "state": "Open", "running": 2, "allocated": {"cpu": "2", "memory": "2Gi", "pods": "2"}}})  # fmt: skip
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-v", "uid": "rs-uid-1", "controller": True}
    pg = await cluster.kube.create(volcano.podgroups_path("default"), {
        "apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
        "metadata": {"name": "podgroup-rs-uid-1", "namespace": "default", "ownerReferences": [rs]},
        "spec": {"minMember": 1, "queue": "research", "minResources": {"cpu": "1", "memory": "1Gi"}},
        "status": {"phase": "Running", "running": 1}})  # fmt: skip
    await cluster.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "web-v-abc", "namespace": "default", "ownerReferences": [rs],
        "annotations": {"scheduling.k8s.io/group-name": "podgroup-rs-uid-1"}},
        "spec": {"schedulerName": "volcano", "nodeName": "w2", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}})  # fmt: skip
    return q, pg


async def research_group(cluster: Cluster, name: str) -> dict[str, Any]:
    """A PodGroup of one member in Volcano's queue `research`, whoever's it turns out to be."""
    return await cluster.kube.create(volcano.podgroups_path("default"), {
        "apiVersion": volcano.SCHEDULING, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, "queue": "research"}})  # fmt: skip


async def test_beside_volcano_only_the_podgroups_tessera_pods_are_in_are_tesseras(cluster: Cluster) -> None:
    """`--scheduler-name tessera`: Volcano's PodGroup (its pods are Volcano's: Tessera's pod
    watch never brings them) and a PodGroup no pod is in yet are left alone — not admitted, no
    status written; the PodGroup Tessera's pod names is Tessera's, admitted with its pod."""
    await cluster.volcano_crds()
    q, theirs = await volcanos_objects(cluster)
    mine = await research_group(cluster, "mine")
    empty = await research_group(cluster, "empty")
    member = await cluster.create_pod(tessera_pod("mine-0", "mine"))
    log = MemoryLog()
    source = PodSource(AdmissionService(log), cluster.kube, scheduler_names=("tessera",))
    await listed(source, ("queue", Change("upsert", "research", volcano.typed(q, "Queue"))),
                 *(("podgroup", upsert(pg, "PodGroup")) for pg in (theirs, mine, empty)),
                 ("pod", Change("upsert", "default/mine-0", member)))  # fmt: skip
    submitted = {e.spec.name for _m, e in await replayed(log) if isinstance(e, JobSubmitted)}
    assert submitted == {"mine"}, submitted
    after = await cluster.present(volcano.podgroups_path("default", "podgroup-rs-uid-1")) or {}
    assert after.get("status") == {"phase": "Running", "running": 1}
    assert not await cluster.events(), "Events written about another scheduler's objects"
    # once Tessera's pod is in it, `empty` is Tessera's too
    joined = await cluster.create_pod(tessera_pod("empty-0", "empty"))
    await source.process([("pod", Change("upsert", "default/empty-0", joined))])
    assert "empty" in {e.spec.name for _m, e in await replayed(log) if isinstance(e, JobSubmitted)}


async def test_beside_volcano_its_queues_status_is_not_written(cluster: Cluster) -> None:
    """Tessera's own job runs in Volcano's queue `research`: its status (Volcano's allocated
    and counts) stays Volcano's — the queue service wrote Tessera's share over it each pass."""
    await cluster.volcano_crds()
    q, _theirs = await volcanos_objects(cluster)
    mine = await research_group(cluster, "mine")
    member = await cluster.create_pod(tessera_pod("mine-0", "mine"))
    log = MemoryLog()
    source = PodSource(AdmissionService(log), cluster.kube, scheduler_names=("tessera",))
    await listed(source, ("queue", Change("upsert", "research", volcano.typed(q, "Queue"))),
                 ("podgroup", upsert(mine, "PodGroup")), ("pod", Change("upsert", "default/mine-0", member)))  # fmt: skip
    controller = JobController(log, cluster.kube, clock=Clock(), scheduler_names=("tessera",))
    for m, event in await replayed(log):
        controller.fold(m.seq, event)
    assert "research" in controller.flow.projection.queues and "default/mine" in controller.specs
    controller.queues["research"] = volcano.typed(await cluster.kube.get(volcano.queues_path("research")), "Queue")
    controller.dirty_queues.add("research")
    await controller.queue_statuses()
    status = (await cluster.kube.get(volcano.queues_path("research"))).get("status")
    assert status == {"state": "Open", "running": 2, "allocated": {"cpu": "2", "memory": "2Gi", "pods": "2"}}


class Commands:
    """The queue service's command path, recording what it is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, str]] = []

    async def __call__(self, action: str, namespace: str, name: str, kind: str = "", uid: str = "") -> str:
        self.asked.append((action, namespace, name, kind))
        return "done"


async def test_beside_volcano_a_queue_command_is_left_to_volcanos_controller(cluster: Cluster) -> None:
    """`vcctl queue operate -a close` makes a CloseQueue Command for Volcano's controller: with
    only Tessera's name it stays for it (Tessera consumed it, and closed the queue under
    Volcano's Running gang); so does a Command for a Job of Tessera's name — Volcano's job
    controller reconciles every Job, and took the Command first or after Tessera had."""
    await cluster.volcano_crds()
    await cluster.kube.create(volcano.queues_path(), queue("research"))
    close = await cluster.kube.create(volcano.commands_path("default"), {
        "apiVersion": volcano.BUS, "kind": "Command", "metadata": {"name": "research-close-abcde", "namespace": "default"},
        "action": "CloseQueue", "target": {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "name": "research"}})  # fmt: skip
    lost = await cluster.kube.create(volcano.commands_path("default"), {
        "apiVersion": volcano.BUS, "kind": "Command", "metadata": {"name": "gone-abort", "namespace": "default"},
        "action": "AbortJob", "target": {"apiVersion": volcano.BATCH, "kind": "Job", "name": "gone"}})  # fmt: skip
    ours = await cluster.kube.create(volcano.commands_path("default"), {
        "apiVersion": volcano.BUS, "kind": "Command", "metadata": {"name": "train-abort", "namespace": "default"},
        "action": "AbortJob", "target": {"apiVersion": volcano.BATCH, "kind": "Job", "name": "train"}})  # fmt: skip
    commands = Commands()
    controller = JobController(MemoryLog(), cluster.kube, commands, clock=Clock(), scheduler_names=("tessera",))
    controller.jobs["default/train"] = {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {
        "name": "train", "namespace": "default"}, "spec": {"schedulerName": "tessera"}}  # fmt: skip
    for obj in (close, lost, ours):
        await controller._consume(obj)
    assert commands.asked == []
    for name in ("research-close-abcde", "gone-abort", "train-abort"):
        assert await cluster.present(volcano.commands_path("default", name)) is not None, name


def volcano_job(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": "tessera", "minAvailable": replicas, "queue": "default", "tasks": [
                {"name": "worker", "replicas": replicas, "template": {"spec": {"containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}}  # fmt: skip


def made_by_volcano(job: dict[str, Any]) -> list[dict[str, Any]]:
    """What Volcano's job controller makes for `job`: the PodGroup `<job>-<uid>` first, and
    (once a scheduler made it Inqueue) the pods `<job>-<task>-<i>` naming it, owned by the Job."""
    m = job["metadata"]
    owner = {"apiVersion": volcano.BATCH, "kind": "Job", "name": m["name"], "uid": m["uid"], "controller": True}
    group = f"{m['name']}-{m['uid']}"
    replicas = job["spec"]["minAvailable"]
    pg = {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
          "metadata": {"name": group, "namespace": "default", "ownerReferences": [owner]},
          "spec": {"minMember": replicas, "queue": "default", "minResources": {"cpu": str(replicas)}}}  # fmt: skip
    made = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{m['name']}-worker-{i}", "namespace": "default", "ownerReferences": [owner],
        "labels": {"volcano.sh/job-name": m["name"]},
        "annotations": {"scheduling.k8s.io/group-name": group, "volcano.sh/task-spec": "worker"}},
        "spec": {"schedulerName": "tessera", "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}} for i in range(replicas)]  # fmt: skip
    return [pg, *made]


async def test_beside_volcano_its_job_controller_keeps_the_volcano_jobs(cluster: Cluster) -> None:
    """`--scheduler-name tessera` beside a Volcano that stays: Volcano's job controller
    reconciles every Volcano Job whatever its schedulerName. Tessera admitted a `schedulerName:
    tessera` Job as its own too, and its job controller made the Job's PodGroup and pods beside
    Volcano's (one of each side got 409) and wrote the Job's status over Volcano's. Now the Job
    is not admitted and nothing is made for it: the PodGroup Volcano's controller made is
    Tessera's to schedule — admitted on its minResources before any pod (Volcano's controller
    makes them only once it is Inqueue) — and the pods it then makes join it as its members."""
    await cluster.volcano_crds()
    job = await cluster.kube.create(volcano.jobs_path("default"), volcano_job("train", 2))
    pg, *made = made_by_volcano(job)
    pg = await cluster.kube.create(volcano.podgroups_path("default"), pg)
    log = MemoryLog()
    source = PodSource(AdmissionService(log), cluster.kube, scheduler_names=("tessera",))
    # the PodGroup listed before its Job: judged once the Job says whose it is
    await listed(source, ("podgroup", upsert(pg, "PodGroup")), ("job", upsert(job, "Job")))
    group = volcano.meta(pg)["name"]
    assert {e.spec.name for _m, e in await replayed(log) if isinstance(e, JobSubmitted)} == {group}
    assert ("default", "train") not in source.admission.known.jobs, "Volcano's Job admitted as Tessera's"
    pods_made = [await cluster.create_pod(p) for p in made]
    await source.process([("pod", Change("upsert", f"default/{volcano.meta(p)['name']}", p)) for p in pods_made])
    known = source.admission.known.jobs[("default", group)]
    assert known.live and sorted(n for t in known.spec.tasks for n in t.pod_names) == ["train-worker-0", "train-worker-1"]
    assert not [e for e in await cluster.events() if e.get("type") == "Warning"], await cluster.events()
    # the queue service's job controller: nothing made or written for the Job
    controller = JobController(log, cluster.kube, Commands(), clock=Clock(), scheduler_names=("tessera",))
    for m, event in await replayed(log):
        controller.fold(m.seq, event)
    controller.jobs["default/train"] = volcano.typed(job, "Job")
    controller.podgroups[f"default/{group}"] = volcano.typed(pg, "PodGroup")
    await controller.reconcile("default/train")
    listed_pgs = (await cluster.kube.get(volcano.podgroups_path("default"))).get("items") or []
    assert [volcano.meta(o)["name"] for o in listed_pgs] == [group], "a second PodGroup made for the Job"
    assert not (await cluster.kube.get(volcano.jobs_path("default", "train"))).get("status"), "Job status written"


def deployment(ns: str, name: str, image: str, *, container: str = "main", args: list[str] | None = None,
               replicas: int = 1) -> dict[str, Any]:  # fmt: skip
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": container, "image": image, "args": args or []}]}}}}  # fmt: skip


async def test_up_refuses_a_cluster_whose_volcano_serves_a_name_it_would_take(cluster: Cluster, tmp_path: Path) -> None:
    """The chart's preflight, for `tessera up --kubeconfig`: a running Volcano's scheduler and
    controllers serve `volcano`, which `up` takes by default — refused before anything starts,
    naming each Deployment and the ways out; with only Tessera's name the look finds nothing, a
    scaled-down Volcano counts for nothing, and HAMi's scheduler is refused whatever the names."""
    if cluster.kind != "kmock":
        pytest.skip("makes Deployments in volcano-system: the emulator's only")
    for d in (deployment("volcano-system", "volcano-scheduler", "volcanosh/vc-scheduler:v1.12.1",
                         args=["--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf"]),
              deployment("volcano-system", "volcano-controllers", "volcanosh/vc-controller-manager:v1.12.1"),
              deployment("default", "idle-vc", "volcanosh/vc-scheduler:v1.12.1", replicas=0,
                         args=["--scheduler-name", "tessera"]),
              deployment("default", "web", "nginx:1.27")):  # fmt: skip
        await cluster.kube.create(f"/apis/apps/v1/namespaces/{d['metadata']['namespace']}/deployments", d)
    state = tmp_path / "state"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "up", "--kubeconfig", str(cluster.kubeconfig),
        "--state-dir", str(state), cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        out, err = (b.decode() for b in await asyncio.wait_for(proc.communicate(), 60))
    except TimeoutError:  # it started: stopped as `kill PID` stops it (what it started with it)
        proc.terminate()
        await proc.communicate()
        pytest.fail("tessera up started beside a running Volcano")
    assert proc.returncode == 1, (out, err)
    assert "Deployment volcano-system/volcano-scheduler" in err and "Deployment volcano-system/volcano-controllers" in err
    assert "schedulerName: volcano" in err and "--scheduler-name tessera" in err and "--skip-preflight" in err, err
    assert "default/idle-vc" not in err and "default/web" not in err, err
    assert not (state / "up.json").exists() and "scheduling the cluster" not in out, "started anyway"
    beside = await preflight.look(cluster.kube, ["tessera"])
    assert beside.found == []
    # not refused, but said: Volcano's job controller keeps the Volcano Jobs whatever their names
    (note,) = beside.notes
    assert "volcano-system/volcano-controllers" in note and "every Volcano Job" in note, note
    await cluster.kube.create("/apis/apps/v1/namespaces/kube-system/deployments", deployment(
        "kube-system", "hami-scheduler", "projecthami/hami:v2.5.0", container="vgpu-scheduler-extender"))  # fmt: skip
    (hami,) = (await preflight.look(cluster.kube, ["tessera"])).found
    assert hami.startswith("HAMi's scheduler (Deployment kube-system/hami-scheduler"), hami


def test_ups_refusal_gives_the_steps_readme_gives_and_hamis_chart_has() -> None:
    """`tessera up --kubeconfig` still told to reinstall HAMi with `scheduler.enabled=false`,
    which HAMi's chart does not have (the chart's own message was corrected): a user who
    followed it was refused again. Now it gives README's steps, command for command, with the
    namespace and name of the HAMi Deployment found."""
    seen = preflight.survey([deployment("volcano-system", "volcano-controllers", "volcanosh/vc-controller-manager:v1.12.1"),
                             deployment("kube-system", "hami-scheduler", "projecthami/hami:v2.5.0",
                                        container="vgpu-scheduler-extender")], ["volcano", "tessera"])  # fmt: skip
    message = preflight.refusal(seen, ["volcano", "tessera"])
    assert "scheduler.enabled" not in message.replace("scheduler.admissionWebhook.enabled", ""), message
    for step in readme_hami_steps():
        assert step in message, (step, message)
    assert "--scheduler-name tessera" in message and preflight.SKIP_FLAG in message


async def test_beside_volcano_a_job_admitted_before_the_change_still_ends_when_deleted(cluster: Cluster) -> None:
    """A Volcano Job an earlier Tessera admitted in this mode is no longer judged, but its
    deletion still ends its job in the log (it held its cards in the ledger for good)."""
    await cluster.volcano_crds()
    job = await cluster.kube.create(volcano.jobs_path("default"), volcano_job("old", 1))
    log = MemoryLog()
    await listed(PodSource(AdmissionService(log), cluster.kube), ("job", upsert(job, "Job")))  # as Volcano's replacement
    assert await submitted_uids(log, "old") == [volcano.uid(job)]
    admission = AdmissionService(log)
    await admission.recover()
    beside = PodSource(admission, cluster.kube, scheduler_names=("tessera",))
    await listed(beside, ("job", upsert(job, "Job")))
    assert await deletions(log, "old") == 0
    await beside.process([("job", Change("delete", "default/old", volcano.typed(job, "Job")))])
    assert await deletions(log, "old") == 1
