"""Tessera on a cluster it shares (issue 28): what other schedulers run there is theirs.

A Volcano Job of another scheduler, its PodGroup, its Running pod (owner references and labels
as Volcano's controller makes them) and a Command for it exist before `tessera up --kubeconfig`;
Tessera then runs the article's job beside them. Nothing of theirs is deleted or written."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.kube import volcano
from services.kube.client import nodes_path, pods_path
from services.kube.status import scheduled_condition
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_volcano import (
    article,
    article_gang_runs,
    create_article_job,
    volcano_served,
)
from tests.kube.workload import cli_json, hami_nodes
from tests.processes import wait_until


def foreign_job() -> dict[str, Any]:
    job = copy.deepcopy(article("Job"))
    job["metadata"] = {"name": "theirs", "namespace": "default"}
    job["spec"]["schedulerName"] = "other-scheduler"
    job["spec"]["queue"] = "default"
    job["spec"]["minAvailable"] = 1
    job["spec"]["tasks"][0]["name"] = "w"
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["tasks"][0]["template"]["spec"]["schedulerName"] = "other-scheduler"
    return job


async def make_foreign(cluster: Cluster) -> dict[str, str]:
    """Their Job, PodGroup `theirs-<uid>` and Running pod `theirs-w-0`: the paths."""
    created = await cluster.kube.create(volcano.jobs_path("default"), foreign_job())
    uid = created["metadata"]["uid"]
    owner = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "theirs", "uid": uid,
              "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": f"theirs-{uid}", "namespace": "default", "ownerReferences": owner},
          "spec": {"minMember": 1, "queue": "default"}}  # fmt: skip
    await cluster.kube.create(volcano.podgroups_path("default"), pg)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "theirs-w-0", "namespace": "default", "ownerReferences": owner,
                        "labels": {volcano.JOB_NAME: "theirs", volcano.TASK_SPEC: "w"},
                        "annotations": {"scheduling.k8s.io/group-name": f"theirs-{uid}",
                                        volcano.RETRY_COUNT: "0", volcano.TASK_INDEX: "0"}},
           "spec": {"schedulerName": "other-scheduler", "nodeName": "node-b",
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"limits": {"huawei.com/Ascend910B3": "1"}}}]},
           "status": {"phase": "Running"}}  # fmt: skip
    await cluster.create_pod(pod)
    command = {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
               "metadata": {"name": "theirs-restartjob", "namespace": "default", "ownerReferences": owner},
               "action": "RestartJob", "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                  "name": "theirs", "uid": uid}}  # fmt: skip
    await cluster.kube.create(volcano.commands_path("default"), command)  # for their controller
    return {"job": volcano.jobs_path("default", "theirs"), "podgroup": volcano.podgroups_path("default", f"theirs-{uid}"),
            "pod": pods_path("default", "theirs-w-0"),
            "command": volcano.commands_path("default", "theirs-restartjob")}  # fmt: skip


async def test_another_schedulers_volcano_job_its_podgroup_and_pod_are_left_alone(cluster: Cluster, tmp_path: Path) -> None:
    await volcano_served(cluster)
    await hami_nodes(cluster)
    paths = await make_foreign(cluster)
    before = {k: await cluster.present(p) for k, p in paths.items()}
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await create_article_job(cluster)  # Tessera's own work beside theirs
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the article's job Running")
            # its own job's pods made, bound and Running, its PodGroup written: every reconcile
            # of the controller has run at least once over their objects too
            after = {k: await cluster.present(p) for k, p in paths.items()}
        finally:
            await asyncio.to_thread(cp.stop)
    for kind in paths:
        assert after[kind] is not None, f"their {kind} was deleted"
        assert after[kind] == before[kind], f"their {kind} was written"


def cpu_pod(name: str, cpu: str, *, scheduler: str = "volcano", node: str = "") -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                           "spec": {"schedulerName": scheduler, "containers": [
                               {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}  # fmt: skip
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


async def test_every_pod_on_a_node_counts_whoever_scheduled_it(cluster: Cluster, tmp_path: Path) -> None:
    """Another scheduler's 190-cpu pods on node-a and node-b (192 cpu each; node-b's by pod-level
    resources, beside a sidecar) leave 2 cpu there:
    Tessera's 40-cpu pods go to gpu-1 (4 fit), the fifth waits saying so — until their pod on
    node-a is deleted; then it runs there. A hami-core card pod found running on node-a (a
    template node: it cannot be fitted there) gets a Warning Event naming it and its node (issue 22)."""
    await hami_nodes(cluster)
    await cluster.create_pod(cpu_pod("big-node-a", "190", scheduler="default-scheduler", node="node-a"))
    # node-b's holds its 190 cpu by pod-level resources (Kubernetes ≥ 1.34), beside 1-cpu containers
    pod_level = cpu_pod("big-node-b", "1", scheduler="default-scheduler", node="node-b")
    pod_level["spec"]["resources"] = {"requests": {"cpu": "190"}}
    pod_level["spec"]["initContainers"] = [{"name": "mesh", "image": "x", "restartPolicy": "Always",
                                            "resources": {"requests": {"cpu": "1"}}}]  # fmt: skip
    await cluster.create_pod(pod_level)
    soft = cpu_pod("soft-npu", "100m", node="node-a")  # placed before Tessera ran
    soft["metadata"]["annotations"] = {"huawei.com/vnpu-mode": "hami-core"}
    soft["spec"]["containers"][0]["resources"]["limits"] = {
        "huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "4000"}  # fmt: skip
    await cluster.create_pod(soft)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            names = [f"forty-{i}" for i in range(5)]
            for n in names:
                await cluster.create_pod(cpu_pod(n, "40"))

            async def placed() -> dict[str, str]:
                return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in await cluster.pods()
                        if p["metadata"]["name"] in names}  # fmt: skip

            async def four_on_gpu1_one_waiting() -> bool:
                got = await placed()
                waiting = [n for n, node in got.items() if not node]
                if len(waiting) != 1 or sorted(set(got.values()) - {""}) != ["gpu-1"]:
                    return False
                cond = scheduled_condition((await cluster.pod("default", waiting[0])) or {}) or {}
                return cond.get("status") == "False" and "cpu" in cond.get("message", "")

            await wait_until(four_on_gpu1_one_waiting, 90, "four 40-cpu pods on gpu-1, the fifth Pending for cpu")
            got = await placed()
            assert not {"node-a", "node-b"} & set(got.values()), got
            waiting = next(n for n, node in got.items() if not node)
            await cluster.kube.delete(pods_path("default", "big-node-a"))

            async def fifth_on_node_a() -> bool:
                return (await placed())[waiting] == "node-a"

            await wait_until(fifth_on_node_a, 90, "the fifth pod on node-a once their pod there is gone")

            async def warned() -> list[str]:
                return [e["message"] for e in await cluster.events() if e.get("reason") == "UnfittedRunningPod"
                        and e["involvedObject"]["name"] == "soft-npu"]  # fmt: skip

            await wait_until(warned, 30, "a Warning Event on the running pod that does not fit node-a's cards")
            text = (await warned())[0]
            assert "running pod default/soft-npu on node node-a" in text and "ModeNotFit" in text, text
        finally:
            await asyncio.to_thread(cp.stop)


def scratch_pod(name: str, disk: str, *, scheduler: str = "volcano", node: str = "") -> dict[str, Any]:
    pod = cpu_pod(name, "1", scheduler=scheduler, node=node)
    pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = disk
    return pod


async def test_ephemeral_storage_is_fitted_against_what_the_kubelet_reports(cluster: Cluster, tmp_path: Path) -> None:
    """Each harness node reports 100Gi of ephemeral-storage, as a kubelet reports its root
    disk. Another scheduler's pod holds 90Gi of disk-1: Tessera's 20Gi pod goes to disk-2, and
    a 95Gi pod waits saying what is short (a pod asking ephemeral-storage used to fit no node)."""
    for node in ("disk-1", "disk-2"):
        await cluster.create_node(node)
    await cluster.create_pod(scratch_pod("theirs", "90Gi", scheduler="default-scheduler", node="disk-1"))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(scratch_pod("twenty", "20Gi"))
            await cluster.create_pod(scratch_pod("ninety-five", "95Gi"))

            async def settled() -> bool:
                twenty, big = await cluster.pod("default", "twenty"), await cluster.pod("default", "ninety-five")
                cond = scheduled_condition(big or {}) or {}
                return bool(twenty and twenty["spec"].get("nodeName")) and cond.get("status") == "False"

            await wait_until(settled, 60, "the 20Gi pod bound, the 95Gi one Pending with its reason")
            assert (await cluster.pod("default", "twenty") or {})["spec"]["nodeName"] == "disk-2"
            big = await cluster.pod("default", "ninety-five") or {}
            assert not big["spec"].get("nodeName")
            message = str((scheduled_condition(big) or {}).get("message"))
            assert "ephemeral-storage" in message, message
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_deleted_worker_of_a_running_job_is_made_again_once_it_is_gone(cluster: Cluster, tmp_path: Path) -> None:
    """`kubectl delete pod npu-train-job-worker-0` on a real server: the pod keeps running with a
    deletionTimestamp until its kubelet confirms. Meanwhile no replacement is made and its card
    stays held; once it is gone the job controller makes it again — Volcano's PodEvicted, which
    the article's policies (PodFailed → RestartJob) leave to SyncJob: the same retry count —
    and the Job runs again with one pod per task index."""
    from tests.kube.test_volcano import WORKERS, Incarnations, _workers

    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, hold_deletions=True) as kubelet, Incarnations(cluster) as seen:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await create_article_job(cluster)
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the article's job Running")
            old = (await _workers(cluster))[WORKERS[0]]
            await cluster.kube.delete(pods_path("default", WORKERS[0]))

            async def held() -> bool:
                return ("default", WORKERS[0]) in kubelet.terminating

            await wait_until(held, 30, "the deleted worker terminating on its node")
            # a pod created after the deletion runs: the services have read past its watch event
            await cluster.create_pod(cpu_pod("probe", "1"))

            async def probe_runs() -> bool:
                return ((await cluster.pod("default", "probe")) or {}).get("status", {}).get("phase") == "Running"

            await wait_until(probe_runs, 60, "a pod created after the deletion Running")
            still = (await _workers(cluster))[WORKERS[0]]
            assert still["metadata"]["uid"] == old["metadata"]["uid"], "replaced before it was gone"
            await kubelet.confirm("default", WORKERS[0])

            async def made_again() -> bool:
                ws = await _workers(cluster)
                return WORKERS[0] in ws and ws[WORKERS[0]]["metadata"]["uid"] != old["metadata"]["uid"] \
                    and await article_gang_runs(cluster, 0)  # fmt: skip

            await wait_until(made_again, 90, "worker-0 made again and the Job Running, retry count 0")

            async def watched() -> bool:  # the test's watch may lag behind the reads above
                return len(seen.uids[WORKERS[0]]) >= 2

            await wait_until(watched, 30, "worker-0's second pod seen by the watch")
            for name in WORKERS:  # one pod per task index at any time: worker-1 never replaced
                assert len(seen.uids[name]) == (2 if name == WORKERS[0] else 1), seen.uids
        finally:
            await asyncio.to_thread(cp.stop)


async def _records(cp: ControlPlane, *args: str) -> Any:
    return await cli_json(cp, *args, codes=(0, 1))


@contextlib.asynccontextmanager
async def _article_job_running(cluster: Cluster, tmp_path: Path) -> AsyncIterator[tuple[ControlPlane, Kubelet]]:
    """The article's Job Running on the HAMi nodes under a control plane, its kubelet holding
    deletions until `confirm`; the plane stopped at the end, pass or fail."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, hold_deletions=True) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await create_article_job(cluster)
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the article's job Running")
            yield cp, kubelet
        finally:
            await asyncio.to_thread(cp.stop)


async def _delete_running_article_job(cluster: Cluster, kubelet: Kubelet) -> None:
    """Delete the article's running Job and wait until both its pods terminate on their node
    (the kubelet holds deletions until `confirm`)."""
    from tests.kube.test_volcano import WORKERS

    await cluster.kube.delete(volcano.jobs_path("default", "npu-train-job"))

    async def both_terminating() -> bool:
        return all(("default", w) in kubelet.terminating for w in WORKERS)

    await wait_until(both_terminating, 60, "the Job's two pods terminating on their node")


async def test_a_deleted_job_holds_its_cards_until_its_pods_are_gone(cluster: Cluster, tmp_path: Path) -> None:
    """`kubectl delete vcjob npu-train-job` on a real server: the Job object goes at once, its
    pods (the garbage collector's, here the job controller's, deletion) run on with a
    deletionTimestamp until their kubelets confirm. Their cards stay booked meanwhile — the
    job's end (`JobDeleted`, which frees them) waits for the last pod to be gone — as a deleted
    pod holds its node; written with the Job's deletion, another pod could be put on cards the
    old ones still use."""
    from tests.kube.test_volcano import WORKERS

    async with _article_job_running(cluster, tmp_path) as (cp, kubelet):

        async def cards_in_use() -> int:
            return sum(1 for c in await _records(cp, "get", "cards", "-o", "records") if c["memory_used"])

        async def job_events() -> list[str]:
            return [e["type"] for e in await _records(cp, "events", "--job", "default/npu-train-job", "-o", "json")]

        assert await cards_in_use() == 2
        await _delete_running_article_job(cluster, kubelet)
        # a pod created after the deletion runs: the services have read past its events
        await cluster.create_pod(cpu_pod("probe", "1"))

        async def probe_runs() -> bool:
            return ((await cluster.pod("default", "probe")) or {}).get("status", {}).get("phase") == "Running"

        await wait_until(probe_runs, 60, "a pod created after the deletion Running")
        assert "JobDeleted" not in await job_events()
        assert await cards_in_use() == 2, "cards freed while the deleted job's pods still run"
        await kubelet.confirm("default", WORKERS[0])

        async def one_left() -> bool:
            return await cards_in_use() == 1

        await wait_until(one_left, 60, "the first pod's card freed once it is gone")
        assert "JobDeleted" not in await job_events()
        await kubelet.confirm("default", WORKERS[1])

        async def ended() -> bool:
            return "JobDeleted" in await job_events() and await cards_in_use() == 0

        await wait_until(ended, 60, "the job deleted in the log once its last pod is gone")
        events = await _records(cp, "events", "--job", "default/npu-train-job", "-o", "json")
        kinds = [e["type"] for e in events]
        after = kinds[kinds.index("PlacementCommitted") + 1:]
        assert "PlacementProposed" not in after, kinds  # nothing placed for it again
        phases = [e["data"]["phase"] for e in events if e["type"] == "JobPhaseChanged"]
        # ended (Terminating; Terminated too unless its JobDeleted came first), never pending again
        assert "Terminating" in phases and set(phases[phases.index("Terminating"):]) <= {"Terminating", "Terminated"}


async def test_a_deleted_jobs_end_survives_an_admission_restart(cluster: Cluster, tmp_path: Path) -> None:
    """Admission restarted while a deleted Job's pods terminate: no watch event will tell the
    new process of that Job's deletion, and the wait for its pods was the old process's. Once
    Jobs and pods are listed, a live job the log admitted whose object is gone is deleted there
    as its last pod goes."""
    from tests.kube.test_volcano import WORKERS

    async with _article_job_running(cluster, tmp_path) as (cp, kubelet):
        await _delete_running_article_job(cluster, kubelet)
        cp.kill("admission")
        await asyncio.to_thread(cp.restart, "admission")
        for w in WORKERS:
            await kubelet.confirm("default", w)

        async def deleted() -> bool:
            events = await _records(cp, "events", "--job", "default/npu-train-job", "-o", "json")
            return "JobDeleted" in [e["type"] for e in events]

        await wait_until(deleted, 60, "the job deleted in the log by the restarted admission")


async def test_a_job_the_job_controllers_watch_has_not_brought_yet_runs(cluster: Cluster, tmp_path: Path) -> None:
    """Two watches of one API server each go at their own pace: admission's may bring a new
    Job before the job controller's does, so the log admits a Job the job controller's store
    does not hold yet. That is not a deleted Job — taking it for one ended the new job before
    its pods were made (one run in ten of the full suite under load). Here the job controller's
    Job watch is held until it has met the admitted job without its object."""
    if cluster.kind != "kmock":
        pytest.skip("holds one client's watch: the emulator's doing")
    await volcano_served(cluster)
    await hami_nodes(cluster)
    lagging = cluster.held[("tessera-queue", "batch.volcano.sh/jobs")] = asyncio.Event()
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.watching("tessera-queue", "batch.volcano.sh/jobs")
            await create_article_job(cluster)

            async def ended() -> bool:
                events = await _records(cp, "events", "--job", "default/npu-train-job", "-o", "json")
                return any(e["type"] == "JobPhaseChanged" and e["data"].get("phase") in ("Terminating", "Terminated")
                           for e in events)  # fmt: skip

            async def met() -> bool:  # asked the API server (the fix), or ended the job (the bug)
                return cluster.requests[("tessera-queue", "fetch", "batch.volcano.sh/jobs")] > 0 or await ended()

            await wait_until(met, 60, "the job controller met the admitted job without its Job object")
            lagging.set()
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the article's job Running")
            assert not await ended()
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_queue_drained_to_empty_shows_nothing_allocated(cluster: Cluster, tmp_path: Path) -> None:
    """A Queue's `status.allocated` follows its jobs down as well as up: the merge patch writes
    `null` for what is no longer allocated (a patch that only adds keys kept the last
    allocation for ever)."""
    await volcano_served(cluster)
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await create_article_job(cluster)
            await wait_until(lambda: article_gang_runs(cluster, 0), 90, "the article's job Running")

            async def allocated() -> dict[str, Any]:
                q = await cluster.present(volcano.queues_path("train-queue"))
                return dict(((q or {}).get("status") or {}).get("allocated") or {})

            async def holds_cards() -> bool:  # the article asks `huawei.com/Ascend910` (a family)
                return any(v == "2" for k, v in (await allocated()).items() if k.startswith("huawei.com/"))

            await wait_until(holds_cards, 30, "train-queue allocated its two cards")
            await cluster.kube.delete(volcano.jobs_path("default", "npu-train-job"))

            async def drained() -> bool:
                return not {k: v for k, v in (await allocated()).items() if v not in ("0", 0)}

            await wait_until(drained, 60, "train-queue's allocated empty once its job is gone")
        finally:
            await asyncio.to_thread(cp.stop)


def exporter_pod(node: str) -> dict[str, Any]:
    """A DaemonSet's node-exporter as kube-scheduler's DaemonSet controller leaves it: bound,
    Running, holding hostPort 9100 on its node."""
    pod = cpu_pod(f"node-exporter-{node}", "100m", scheduler="default-scheduler", node=node)
    pod["metadata"]["namespace"] = "monitoring"
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter",
                                           "uid": "ds-uid", "controller": True}]  # fmt: skip
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}]
    return pod


def port_pod(name: str, node: str = "") -> dict[str, Any]:
    pod = cpu_pod(name, "1")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    if node:
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


async def test_host_ports_other_schedulers_pods_hold_are_not_free(cluster: Cluster, tmp_path: Path) -> None:
    """rev-shared finding 1: node-exporter (a default-scheduler DaemonSet pod) holds hostPort
    9100 on the roomier w2. Tessera's pod asking 9100 goes to w1; the one pinned to w2 waits
    with kube-scheduler's NodePorts words — the kubelet would refuse it there — and is bound
    once node-exporter is gone. Before, both went to w2."""
    await cluster.create_node("w1", cpu="8", memory="32Gi")
    await cluster.create_node("w2", cpu="64", memory="256Gi")
    await cluster.create_pod(exporter_pod("w2"))
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(port_pod("free"))
            await cluster.create_pod(port_pod("pinned", node="w2"))

            async def free_bound_pinned_waits() -> bool:
                free, pinned = await cluster.pod("default", "free"), await cluster.pod("default", "pinned")
                cond = scheduled_condition(pinned or {}) or {}
                return bool((free or {}).get("spec", {}).get("nodeName")) and cond.get("status") == "False"

            await wait_until(free_bound_pinned_waits, 90, "free bound, pinned Pending with its reason")
            assert (await cluster.pod("default", "free") or {})["spec"]["nodeName"] == "w1"
            pinned = await cluster.pod("default", "pinned") or {}
            assert not pinned["spec"].get("nodeName"), "bound onto a host port another pod holds"
            message = str((scheduled_condition(pinned) or {}).get("message"))
            assert "node(s) didn't have free ports for the requested pod ports" in message, message
            await cluster.kube.delete(pods_path("monitoring", "node-exporter-w2"))

            async def pinned_on_w2() -> bool:
                return (await cluster.pod("default", "pinned") or {}).get("spec", {}).get("nodeName") == "w2"

            await wait_until(pinned_on_w2, 90, "pinned bound to w2 once node-exporter is gone")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_failed_scheduling_counts_every_node_in_kube_schedulers_words(cluster: Cluster, tmp_path: Path) -> None:
    """rev-shared finding 8: alert rules grep kube-scheduler's words. A pod pinned to a tainted
    node is told of all four Nodes — the NotReady one too, by the taint kube's node lifecycle
    controller puts on it — each reason as kube-scheduler says it; a pod no node has room for
    says `Insufficient cpu`. Before: "0/3 nodes are available: 1 has a taint the pod does not
    tolerate (dedicated: infer), 1 is cordoned, …" and "has too little free cpu"."""
    await cluster.create_node("w1", cpu="8", memory="32Gi")
    await cluster.create_node("cordon", cpu="8", memory="32Gi", unschedulable=True)
    await cluster.create_node("nosched", cpu="8", memory="32Gi")
    await cluster.kube.patch(nodes_path("nosched"), {"spec": {"taints": [
        {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]}})  # fmt: skip
    await cluster.create_node("down", cpu="8", memory="32Gi", ready=False)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            pinned = cpu_pod("pinned", "100m")
            pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "nosched"}
            await cluster.create_pod(pinned)
            await cluster.create_pod(cpu_pod("big", "64"))

            async def said(name: str) -> str:
                cond = scheduled_condition(await cluster.pod("default", name) or {}) or {}
                return str(cond.get("message") or "") if cond.get("status") == "False" else ""

            async def both_told_of_four_nodes() -> bool:
                told = [await said(n) for n in ("pinned", "big")]
                return all("0/4 nodes are available" in t for t in told)

            await wait_until(both_told_of_four_nodes, 90, "both pods Pending, told of the four nodes")
            assert await said("pinned") == (
                "1/1 tasks in gang unschedulable: 0/4 nodes are available: "
                "1 node(s) didn't match Pod's node affinity/selector, "
                "1 node(s) had untolerated taint {dedicated: infer}, "
                "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
                "1 node(s) were unschedulable.")  # fmt: skip
            big = await said("big")
            assert "Insufficient cpu" in big and "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in big, big
            events = [e["message"] for e in await cluster.events() if e.get("reason") == "FailedScheduling"
                      and e["involvedObject"]["name"] == "pinned"]  # fmt: skip
            assert await said("pinned") in events, events
        finally:
            await asyncio.to_thread(cp.stop)
