"""Volcano's objects on a cluster (issue 14): the article's Queue and `npu-train-job` created as
`kubectl apply` creates them → the PodGroup `<job>-<uid>` → Inqueue → the two pods created and
bound on whole cards → PodGroup Running with `Scheduled`, Job Running; a pod fails → RestartJob
→ the pods recreated with retry count 1 → Job Running again; a Command closes the queue →
Closing → Closed once the Job is deleted (its pods and PodGroup with it). Against kmock's
emulator, and a real API server with Volcano's CRDs when one is given.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.events import EvictionRequested, JobSubmitted, JobUpdated, TaskFinished
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import KubeError, pods_path
from services.kube.listwatch import Reflector
from services.runtime.tasks import cancel_all
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_disruption_budgets import logged
from tests.kube.workload import EXAMPLES, hami_nodes
from tests.processes import wait_until

JOB = "npu-train-job"
WORKERS = (f"{JOB}-worker-0", f"{JOB}-worker-1")


def article(kind: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all((EXAMPLES / "article.yaml").read_text()) if d["kind"] == kind)


async def volcano_served(cluster: Cluster) -> None:
    """kmock serves the kinds (harness); a real API server gets the chart's CRDs."""
    await cluster.volcano_crds()


class Incarnations:
    """Every uid each pod name had, seen by a watch: a pod created twice shows two uids for
    one retry count."""

    def __init__(self, cluster: Cluster) -> None:
        self.kube = cluster.kube
        self.uids: dict[str, dict[str, str]] = collections.defaultdict(dict)  # name → uid → retry
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Incarnations:
        async def watch() -> None:
            async for ch in Reflector(self.kube, pods_path()).changes():
                if ch.kind == "upsert" and volcano.owner_job(ch.obj):
                    m = ch.obj["metadata"]
                    retry = (m.get("annotations") or {}).get(volcano.RETRY_COUNT, "")
                    self.uids[m["name"]].setdefault(m.get("uid", ""), retry)

        self._task = asyncio.create_task(watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        await cancel_all([self._task])


async def _job(cluster: Cluster) -> dict[str, Any]:
    job = await cluster.present(volcano.jobs_path("default", JOB))
    assert job is not None
    return job


async def _phase(cluster: Cluster) -> str:
    return str(((await _job(cluster)).get("status") or {}).get("state", {}).get("phase", ""))


async def _workers(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in await cluster.pods() if p["metadata"]["name"] in WORKERS}


async def create_article_job(cluster: Cluster) -> str:
    """The article's Queue and `npu-train-job`, as `kubectl apply` creates them; the path of
    the PodGroup the job controller makes for it."""
    await cluster.kube.create(volcano.queues_path(), article("Queue"))
    job = article("Job")
    job["metadata"]["namespace"] = "default"
    await cluster.kube.create(volcano.jobs_path("default"), job)
    uid = (await _job(cluster))["metadata"]["uid"]
    return volcano.podgroups_path("default", f"{JOB}-{uid}")


async def _start(cp: ControlPlane) -> None:
    await asyncio.to_thread(cp.start, lambda _line: None)


def huge_job(queue: str) -> dict[str, Any]:
    """The article's Job as `huge`: four pods of eight whole cards, more than the cluster holds."""
    job = article("Job")
    job["metadata"] = {"name": "huge", "namespace": "default"}
    job["spec"]["queue"] = queue
    job["spec"]["minAvailable"] = 4
    task = job["spec"]["tasks"][0]
    task["replicas"] = 4
    task["template"]["spec"]["containers"][0]["resources"]["limits"] = {"huawei.com/Ascend910B3": "8"}
    return job


async def article_gang_runs(cluster: Cluster, retry: int) -> bool:
    """Both workers Running with retry count `retry`, and the Job Running."""
    ws = await _workers(cluster)
    return len(ws) == 2 and all(
        kpods.phase(p) == "Running" and p["metadata"]["annotations"].get(volcano.RETRY_COUNT) == str(retry)
        for p in ws.values()) and await _phase(cluster) == "Running"  # fmt: skip


@pytest.mark.parametrize("restart_queue", [False, True], ids=["steady", "queue-restarted-mid-restart"])
async def test_article_job_lifecycle_on_the_cluster(cluster: Cluster, tmp_path: Path, restart_queue: bool) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet, Incarnations(cluster) as seen:
        await _start(cp)
        try:
            pg_path = await create_article_job(cluster)
            uid = (await _job(cluster))["metadata"]["uid"]

            def gang_runs(retry: int) -> Awaitable[bool]:
                return article_gang_runs(cluster, retry)

            await wait_until(lambda: gang_runs(0), 90, "the job's two pods Running, the Job Running")
            pg = await cluster.present(pg_path)
            assert pg is not None
            assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "train-queue"
            assert pg["spec"]["minTaskMember"] == {"worker": 2}
            assert pg["metadata"]["ownerReferences"][0]["uid"] == uid

            async def pg_running() -> bool:
                st = ((await cluster.present(pg_path)) or {}).get("status") or {}
                return st.get("phase") == "Running" and st.get("running") == 2 and \
                    [c["type"] for c in st.get("conditions") or []] == ["Scheduled"]  # fmt: skip

            await wait_until(pg_running, 30, "PodGroup Running with Scheduled")
            ws = await _workers(cluster)
            for i, name in enumerate(WORKERS):
                m = ws[name]["metadata"]
                assert m["labels"][volcano.JOB_NAME] == JOB and m["labels"][volcano.TASK_SPEC] == "worker"
                assert m["annotations"][volcano.TASK_INDEX] == str(i)
                assert m["annotations"]["scheduling.k8s.io/group-name"] == f"{JOB}-{uid}"
                assert m["ownerReferences"][0]["kind"] == "Job" and m["ownerReferences"][0]["uid"] == uid
                assert ws[name]["spec"]["schedulerName"] == "volcano"
                allocated = [v for k, v in m["annotations"].items() if k.endswith("-devices-allocated")]
                assert allocated and allocated[0].endswith(",65536,20:;"), allocated  # one whole card
            before = {n: p["metadata"]["uid"] for n, p in ws.items()}

            await kubelet.finish("default", WORKERS[0], 1)  # PodFailed → RestartJob
            if restart_queue:
                cp.kill("queue")
                cp.restart("queue")
            await wait_until(lambda: gang_runs(1), 90, "both pods recreated with retry count 1, Job Running")
            job_status = (await _job(cluster))["status"]
            assert job_status["retryCount"] == 1 and job_status["running"] == 2
            assert job_status["version"] == 1 and job_status["conditions"][-1]["status"] == "Running"
            ws = await _workers(cluster)
            assert all(ws[n]["metadata"]["uid"] != before[n] for n in WORKERS)

            async def watched() -> bool:  # the test's watch may lag behind the reads above
                return all("1" in seen.uids[name].values() for name in WORKERS)

            await wait_until(watched, 30, "the recreated pods seen by the watch")
            for name in WORKERS:  # one pod per name and incarnation, whatever restarted
                assert sorted(seen.uids[name].values()) == ["0", "1"], seen.uids[name]

            async def queue_state(state: str) -> bool:
                q = await cluster.present(volcano.queues_path("train-queue"))
                return ((q or {}).get("status") or {}).get("state") == state

            async def queue_shows_the_job() -> bool:  # written as it converges, at most once a second
                q = await cluster.present(volcano.queues_path("train-queue"))
                st = (q or {}).get("status") or {}
                return st.get("state") == "Open" and st.get("running") == 1

            await wait_until(queue_shows_the_job, 30, "the Queue's status written: Open, one PodGroup Running")
            q = await cluster.present(volcano.queues_path("train-queue"))
            assert q is not None
            command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                       "metadata": {"name": "close-train", "namespace": "default"}, "action": "CloseQueue",
                       "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                  "name": "train-queue", "uid": q["metadata"].get("uid", "")}}  # fmt: skip
            await cluster.kube.create(volcano.commands_path("default"), command)
            await wait_until(lambda: queue_state("Closing"), 30, "the queue Closing (a PodGroup left)")

            async def consumed() -> bool:
                return await cluster.present(volcano.commands_path("default", "close-train")) is None

            await wait_until(consumed, 30, "the Command consumed and deleted")
            await cluster.kube.delete(volcano.jobs_path("default", JOB))

            async def children_gone() -> bool:
                return not await _workers(cluster) and await cluster.present(pg_path) is None

            await wait_until(children_gone, 60, "the Job's pods and PodGroup deleted with it")
            await wait_until(lambda: queue_state("Closed"), 30, "the queue Closed once empty")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_completed_job_the_log_has_forgotten_is_not_run_again(cluster: Cluster, tmp_path: Path) -> None:
    """Users keep their Completed Jobs; admission forgets a finished job once `--keep-finished`
    others finished after it (and the queue service's compaction drops it from the log). Such a
    Job met again — at admission's restart, which lists every Job, or at any change of the
    object (its status written late: benchmarks.kube_churn) — was taken for a new one:
    submitted, and run a second time. A Job whose status says it ended, and that the log does
    not hold live, is not submitted again. (Here admission keeps no finished job at all.)"""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig),
                      extra={"admission": ["--keep-finished", "0"]})  # fmt: skip
    second = {**article("Job"), "metadata": {"name": "second", "namespace": "default"}}
    async with Kubelet(cluster, run_for={**dict.fromkeys(WORKERS, 0), "second-worker-0": 0, "second-worker-1": 0}):
        await _start(cp)
        try:
            await create_article_job(cluster)
            await wait_until(lambda: _phase_is(cluster, JOB, "Completed"), 90, "the article's Job Completed")
            pods_before = {p["metadata"]["uid"] for p in await cluster.pods()}
            after = max(seq for seq, _e in await logged(cp))
            await asyncio.to_thread(cp.kill, "admission")
            await asyncio.to_thread(cp.restart, "admission")  # lists every Job again
            await cluster.kube.patch(volcano.jobs_path("default", JOB), {"metadata": {"labels": {"seen": "again"}}})
            await cluster.kube.create(volcano.jobs_path("default"), second)  # watched after both
            await wait_until(lambda: _phase_is(cluster, "second", "Completed"), 90, "a later Job runs and ends")
            again = [e for seq, e in await logged(cp) if seq > after and isinstance(e, JobSubmitted)]
            assert [e.spec.name for e in again] == ["second"]
            assert await _phase_is(cluster, JOB, "Completed")
            made = [p["metadata"]["name"] for p in await cluster.pods() if p["metadata"]["uid"] not in pods_before]
            assert sorted(made) == ["second-worker-0", "second-worker-1"]
        finally:
            await asyncio.to_thread(cp.stop)


async def _phase_is(cluster: Cluster, name: str, phase: str) -> bool:
    job = await cluster.present(volcano.jobs_path("default", name))
    return ((job or {}).get("status") or {}).get("state", {}).get("phase") == phase


async def test_gang_that_cannot_be_admitted_keeps_its_pods_uncreated(cluster: Cluster, tmp_path: Path) -> None:
    """Four pods of eight whole cards each: more than the cluster holds, so the PodGroup stays
    Pending and no pod is made. Its Unschedulable condition names the rule (the gang against
    the cluster's cards) and the nodes, as enqueue's trial placement found them: two pods fill
    node-a and node-b, the third finds fewer than eight free cards there and on gpu-1, and
    node-c is cordoned (its cards still count in the cluster's 24)."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    job = huge_job("default")
    async with Kubelet(cluster):
        await _start(cp)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), job)
            uid = (await cluster.present(volcano.jobs_path("default", "huge")) or {})["metadata"]["uid"]
            pg_path = volcano.podgroups_path("default", f"huge-{uid}")

            # every node named: a session before all four nodes (and their cards) registered
            # says fewer; the condition is rewritten as the nodes' words change
            want = ("2/4 tasks in gang unschedulable: 0/4 nodes are available: 3 have fewer than 8 free "
                    "Ascend910B3 cards, 1 node(s) were unschedulable. Gang needs 32 whole Ascend910B3 cards, "
                    "the cluster has 24.")
            seen: dict[str, Any] = {}

            async def unschedulable() -> bool:
                st = seen["status"] = ((await cluster.present(pg_path)) or {}).get("status") or {}
                return st.get("phase") == "Pending" and any(
                    c["type"] == "Unschedulable" and c["status"] == "True" and c["reason"] == "NotEnoughResources"
                    and c["message"] == want for c in st.get("conditions") or [])

            try:
                await wait_until(unschedulable, 60, "PodGroup Pending with Unschedulable naming every node")
            except TimeoutError as exc:
                raise AssertionError(f"PodGroup status {seen.get('status')!r}, wanted the message {want!r}") from exc
            assert not [p for p in await cluster.pods() if p["metadata"]["name"].startswith("huge-")]
            job_status = ((await cluster.present(volcano.jobs_path("default", "huge"))) or {}).get("status") or {}
            assert job_status.get("state", {}).get("phase") == "Pending"
        finally:
            await asyncio.to_thread(cp.stop)


QUEUE_AGENT = "tessera-queue"


async def _queue_pod_watch_held(cluster: Cluster) -> asyncio.Event:
    """The article's cluster, with the queue process's pod watches waiting on the Event returned
    (held until it is set): a lagging watch of the job controller's (kmock only)."""
    if cluster.kind != "kmock":
        pytest.skip("holds one client's watch: the emulator's doing")
    await volcano_served(cluster)
    await hami_nodes(cluster)
    gate = cluster.held[(QUEUE_AGENT, "pods")] = asyncio.Event()
    return gate


async def test_a_pod_asked_for_is_asked_once_while_the_pod_watch_lags(cluster: Cluster, tmp_path: Path) -> None:
    """The job controller makes a Job's pods, and its own pod watch brings them later (a real
    API server's watch lags the write under load): every reconcile in between — the job's
    placements, bindings and binding results each mark it — asked to create them again and met
    409 (0.25 extra creations per pod in a loaded `benchmarks.k8s --shapes vcjob` run). Here
    the queue process's pod watches are held until the gang is bound; each pod is asked for
    once, and the job runs once the watch comes."""
    agent = QUEUE_AGENT
    held = await _queue_pod_watch_held(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await _start(cp)
        try:
            await cluster.watching(agent, "pods")
            await create_article_job(cluster)

            async def bound() -> bool:
                ws = await _workers(cluster)
                return len(ws) == len(WORKERS) and all(p["spec"].get("nodeName") for p in ws.values())

            await wait_until(bound, 90, "both workers made and bound while the controller's pod watch lags")
            assert cluster.requests[(agent, "create", "pods")] == len(WORKERS)
            held.set()
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the gang Running once the watch comes")
            assert cluster.requests[(agent, "create", "pods")] == len(WORKERS)
        finally:
            held.set()
            await asyncio.to_thread(cp.stop)


async def test_a_finished_pod_is_kept_while_the_controllers_pod_watch_lags(cluster: Cluster, tmp_path: Path) -> None:
    """The node agent's pod watch tells the log the workers succeeded; the job controller's own
    pod watch, in another process, may bring that later. It ended the Job on the log's word and
    killed what its lagging view still showed running: the Succeeded pods, and their logs, were
    gone (CI: a Job Completed with one of its two pods left). A pod the log has finished is kept,
    whatever its object still shows there."""
    agent = QUEUE_AGENT
    gate = await _queue_pod_watch_held(cluster)
    gate.set()  # open until the gang runs
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await _start(cp)
        try:
            await cluster.watching(agent, "pods")
            await create_article_job(cluster)
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the gang Running")
            gate.clear()
            for worker in WORKERS:
                await kubelet.finish("default", worker, 0)
            # its status is written by the reconcile that ended it, after that one's kill step
            await wait_until(lambda: _phase_is(cluster, JOB, "Completed"), 90, "Completed while its pod watch lags")
            assert cluster.requests[(agent, "delete", "pods")] == 0
            gate.set()
            ws = await _workers(cluster)
            assert sorted(ws) == sorted(WORKERS) and {kpods.phase(p) for p in ws.values()} == {"Succeeded"}
        finally:
            gate.set()
            await asyncio.to_thread(cp.stop)


async def test_a_pod_asked_for_is_asked_again_after_a_relist_or_a_409() -> None:
    """What the controller remembers of a pod asked for (the test above) lasts until its watch
    brings the pod's name; a relist forgets all of it — a pod made and deleted between two
    lists is never seen, and must be asked for again — and so does a 409 (a pod under the name
    that this watch may never bring: another's)."""
    from services.kube.jobcontroller import JobController
    from services.kube.listwatch import Change
    from services.runtime.eventlog.memory import MemoryLog

    asked: list[str] = []

    class Server:
        async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
            asked.append(name := body["metadata"]["name"])
            if name == "theirs":
                raise KubeError(409, "AlreadyExists")
            return body

    class Relisted:
        def __init__(self, *changes: Change) -> None:
            self.script = changes

        async def changes(self):  # type: ignore[no-untyped-def]
            for ch in self.script:
                yield ch

    controller = JobController(MemoryLog(), Server())  # type: ignore[arg-type]
    bodies = [{"metadata": {"name": n, "namespace": "ns"}} for n in ("w-0", "w-1", "theirs")]
    await controller._create_pods("ns", bodies)
    assert asked == ["w-0", "w-1", "theirs"] and controller.expected == {"ns/w-0", "ns/w-1"}
    seen = {"metadata": {"name": "w-0", "namespace": "ns", "ownerReferences": []}}
    await controller._watch("pod", Relisted(Change("upsert", "ns/w-0", seen)), controller.pods, "Pod")  # type: ignore[arg-type]
    assert controller.expected == {"ns/w-1"}
    await controller._watch("pod", Relisted(Change("synced", "", {})), controller.pods, "Pod")  # type: ignore[arg-type]
    assert not controller.expected


async def test_rejected_job_gets_a_warning_and_a_failed_state(cluster: Cluster, tmp_path: Path) -> None:
    """A Job into a queue that does not exist: refused by the rules `tessera apply` uses, with
    a Warning Event and `state: Failed, reason Rejected` naming the rule (the fields Volcano's
    Job status has: the harness prunes the rest, as a real API server does); nothing is created."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    job = article("Job")
    job["metadata"] = {"name": "lost", "namespace": "default"}
    job["spec"]["queue"] = "no-such-queue"
    await _start(cp)
    try:
        await cluster.kube.create(volcano.jobs_path("default"), job)

        async def refused() -> bool:
            st = ((await cluster.present(volcano.jobs_path("default", "lost"))) or {}).get("status") or {}
            return (st.get("state") or {}).get("reason") == "Rejected"

        await wait_until(refused, 60, "the Job refused on the API")
        cond = (await cluster.present(volcano.jobs_path("default", "lost")) or {})["status"]["state"]
        assert cond["phase"] == "Failed"
        assert "spec.queue" in cond["message"] and "no-such-queue" in cond["message"]
        warnings = [e for e in await cluster.events() if e["involvedObject"].get("name") == "lost"]
        assert [e["type"] for e in warnings] == ["Warning"] and warnings[0]["message"] == cond["message"]
        assert warnings[0]["involvedObject"]["kind"] == "Job"
        assert not [p for p in await cluster.pods() if p["metadata"]["name"].startswith("lost-")]
    finally:
        await asyncio.to_thread(cp.stop)


def _pair() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A PodGroup of two and its two one-card pods, as kubectl makes them."""
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pair", "namespace": "default"}, "spec": {"minMember": 2, "queue": "default"}}  # fmt: skip
    members = [{"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pair-{i}", "annotations": {"scheduling.k8s.io/group-name": "pair"}},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox", "resources": {
                    "limits": {"huawei.com/Ascend910B3": "1"}}}]}} for i in range(2)]  # fmt: skip
    return pg, members


async def _pair_events(cp: ControlPlane, *types: type) -> list[Any]:
    return [e for _, e in await logged(cp) if isinstance(e, types) and getattr(e, "name", "") == "pair"]


def _scheduled_last(status: dict[str, Any]) -> bool:
    """The group's newest condition is `Scheduled` (an `Unschedulable` from before its second
    pod came stays beside it, older, as Volcano's gang keeps one condition of each type)."""
    conds = {c["type"]: c for c in status.get("conditions") or []}
    scheduled, unschedulable = conds.get("Scheduled"), conds.get("Unschedulable")
    return scheduled is not None and scheduled["status"] == "True" and (
        unschedulable is None or unschedulable["lastTransitionTime"] <= scheduled["lastTransitionTime"])


async def test_pods_made_by_kubectl_join_their_podgroup(cluster: Cluster, tmp_path: Path) -> None:
    """A PodGroup and two pods naming it (`scheduling.k8s.io/group-name`), all made by kubectl:
    one gang of two, bound together, and the PodGroup's status says Running with Scheduled.

    Then one of its pods is edited into something admission refuses (a task priority that is
    no number) and the PodGroup is changed: the change was taken without that pod and the pod,
    running as admitted, evicted. Now nothing changes: the PodGroup and the pod each get a
    Warning naming the rule, and both pods run on."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pg, members = _pair()
    async with Kubelet(cluster):
        await _start(cp)
        try:
            await cluster.kube.create(volcano.podgroups_path("default"), pg)
            for pod in members:
                await cluster.create_pod(pod)

            async def gang_runs() -> bool:
                ps = {p["metadata"]["name"]: p for p in await cluster.pods()}
                st = ((await cluster.present(volcano.podgroups_path("default", "pair"))) or {}).get("status") or {}
                return all(kpods.phase(ps.get(f"pair-{i}", {})) == "Running" for i in range(2)) \
                    and st.get("phase") == "Running" and st.get("running") == 2 \
                    and _scheduled_last(st)  # fmt: skip

            await wait_until(gang_runs, 90, "both pods Running as one gang, the PodGroup Running")
            uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}
            # (the group is admitted as soon as it exists, its pods joining it as they come:
            # what changes is judged by the events after the edits, not before)
            before = len(await _pair_events(cp, JobUpdated, EvictionRequested, TaskFinished))
            await cluster.kube.patch(pods_path("default", "pair-1"),
                                     {"metadata": {"annotations": {"volcano.sh/task-priority": "high"}}})  # fmt: skip
            await cluster.kube.patch(volcano.podgroups_path("default", "pair"),
                                     {"metadata": {"annotations": {"team": "search"}}})  # fmt: skip

            async def told() -> dict[str, str]:
                return {e["involvedObject"]["name"]: e["message"] for e in await cluster.events()
                        if e.get("reason") == "FailedUpdate"}  # fmt: skip

            async def both_told() -> bool:
                return {"pair", "pair-1"} <= set(await told())

            await wait_until(both_told, 30, "a Warning on the PodGroup and on its refused pod")
            said = await told()
            assert "pod pair-1" in said["pair"] and "volcano.sh/task-priority" in said["pair"]
            assert "volcano.sh/task-priority" in said["pair-1"]
            assert len(await _pair_events(cp, JobUpdated, EvictionRequested, TaskFinished)) == before
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()} == uids
            assert all(kpods.phase(p) == "Running" for p in await cluster.pods())
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_podgroup_edited_while_its_pods_pull_their_images_keeps_them(cluster: Cluster, tmp_path: Path) -> None:
    """A gang's pods bound and still Pending (their images pulling: minutes for an NPU image)
    when its PodGroup changes: admission judged each such pod a pod claiming a node it was
    never given, took the change without them — a scale-down — and both pods were deleted.
    Seen as a loaded run's flake, whenever the binding reached admission before anything else
    touched the group; `kubectl annotate podgroup` or an admission restart (both here) did it at
    will. A finished pod, bound and Succeeded, was refused alike: a change after it stays whole.

    The restart found one more: admission's watches list side by side, and a live group met
    before the pods' listing was judged with the pods listed so far — none — a scale-down to
    nothing, every pod evicted. A group is judged once the pods are listed."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pg, members = _pair()
    async with Kubelet(cluster, hold_starts=True) as kubelet:
        await _start(cp)
        try:
            await cluster.kube.create(volcano.podgroups_path("default"), pg)
            for pod in members:
                await cluster.create_pod(pod)

            async def pulling() -> bool:
                return len(kubelet.pulling) == 2

            await wait_until(pulling, 60, "both pods bound, their images pulling")
            uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}
            # admission restarted meanwhile (an upgrade): its first look at each live group
            # judges it again, with the pods as they are now
            await asyncio.to_thread(cp.kill, "admission")
            await asyncio.to_thread(cp.restart, "admission")
            await cluster.kube.patch(volcano.podgroups_path("default", "pair"),
                                     {"metadata": {"annotations": {"team": "search"}}})  # fmt: skip

            async def taken() -> bool:
                return any(e.spec.annotations.get("team") == "search" for e in await _pair_events(cp, JobUpdated))

            await wait_until(taken, 30, "the PodGroup's change in the log")
            await kubelet.start()

            async def gang_runs() -> bool:
                ps = {p["metadata"]["name"]: p for p in await cluster.pods()}
                st = ((await cluster.present(volcano.podgroups_path("default", "pair"))) or {}).get("status") or {}
                return all(kpods.phase(ps.get(f"pair-{i}", {})) == "Running" for i in range(2)) \
                    and st.get("running") == 2  # fmt: skip

            await wait_until(gang_runs, 60, "both pods Running, the PodGroup counting them")
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()} == uids
            assert not await _pair_events(cp, EvictionRequested, TaskFinished)
            update = (await _pair_events(cp, JobUpdated))[-1]
            assert sorted(n for t in update.spec.tasks for n in t.pod_names) == ["pair-0", "pair-1"]

            await kubelet.finish("default", "pair-0", 0)  # one is done; a change still keeps it

            async def finished() -> bool:
                return bool(await _pair_events(cp, TaskFinished))

            await wait_until(finished, 30, "pair-0's end in the log")
            await cluster.kube.patch(volcano.podgroups_path("default", "pair"),
                                     {"metadata": {"annotations": {"team": "ads"}}})  # fmt: skip

            async def again() -> bool:
                return any(e.spec.annotations.get("team") == "ads" for e in await _pair_events(cp, JobUpdated))

            await wait_until(again, 30, "the second change in the log")
            update = (await _pair_events(cp, JobUpdated))[-1]
            assert sorted(n for t in update.spec.tasks for n in t.pod_names) == ["pair-0", "pair-1"]
            assert not await _pair_events(cp, EvictionRequested)
            assert not [e for e in await cluster.events() if e.get("reason") in ("FailedUpdate", "FailedAdmission")]
        finally:
            await asyncio.to_thread(cp.stop)

