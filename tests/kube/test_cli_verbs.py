"""`tessera get|queue|job … --kubeconfig`: vcctl's verbs on the cluster's Volcano objects
(issue 14, item 5), run as the real command line against the API server of the `cluster`
fixture (kmock's emulator; a real one with KUBEBUILDER_ASSETS / TESSERA_TEST_KUBECONFIG).

Objects are created with their status as Volcano writes it (volcano.md §1), so these tests read
what the job controller and scheduler would have written without needing them; Commands are
asserted as created (consuming them is the queue service's part).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contracts import hami
from services.cli.kubeverbs import commands_path, jobs_path, podgroups_path, queue_path
from services.kube.client import KubeError
from tests.kube.cluster import Cluster
from tests.kube.workload import ascend_register
from tests.processes import ROOT


@dataclass
class Ran:
    code: int
    out: str
    err: str


async def tessera(cluster: Cluster, *args: str) -> Ran:
    """The `tessera` command line in its own process, pointed at the cluster."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", *args, "--kubeconfig", str(cluster.kubeconfig),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def _with_status(cluster: Cluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create, then write the status as Volcano's controllers do: through the status
    subresource for a Queue or Job, with the object itself for a PodGroup (its CRD has none)."""
    status = body.pop("status", None)
    created = await cluster.kube.create(path, body)
    if status:
        name = body["metadata"]["name"]
        where = f"{path}/{name}" + ("" if body["kind"] == "PodGroup" else "/status")
        created = await cluster.kube.patch(where, {"status": status})
    return created


def _queue(name: str, state: str = "Open", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **spec}, "status": {"state": state}}  # fmt: skip


@pytest.fixture
async def volcano(cluster: Cluster) -> AsyncIterator[Cluster]:
    """The article's cluster on the API server: one 8 × 910B3 node (template vNPU), the
    article's queue with what the scheduler wrote, its job and PodGroup, the job's pods — one on
    a whole card, one on a vir05_1c_16g template slice."""
    await cluster.volcano_crds()
    ns = cluster.namespace
    await cluster.create_node("node-a", allocatable={"huawei.com/Ascend910B3": "8"}, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("node-a")})  # fmt: skip
    await _with_status(cluster, queue_path(), _queue(
        "train-queue", weight=2, capability={"cpu": "64", "memory": "256Gi", "huawei.com/Ascend910": "8"}) | {
        "status": {"state": "Open", "allocated": {"cpu": "2", "memory": "16Gi", "huawei.com/Ascend910": "2938m"},
                   "running": 1}})  # fmt: skip
    await _with_status(cluster, queue_path(), _queue("typo", capability={"huawei.com/Ascend910B2-npu": "2"}))
    job = await _with_status(cluster, jobs_path(ns), {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "npu-train-job", "namespace": ns},
        "spec": {"schedulerName": "volcano", "minAvailable": 2, "queue": "train-queue",
                 "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {"containers": [
                     {"name": "train", "image": "ascend-pytorch:24.0.RC1"}]}}}]},
        "status": {"state": {"phase": "Running"}, "minAvailable": 2, "running": 2, "retryCount": 1}})  # fmt: skip
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "npu-train-job",
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    await _with_status(cluster, podgroups_path(ns), {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": f"npu-train-job-{job['metadata']['uid']}", "namespace": ns, "ownerReferences": [owner]},
        "spec": {"minMember": 2, "queue": "train-queue"},
        "status": {"phase": "Running", "running": 2, "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled"}]}})  # fmt: skip
    await _with_status(cluster, podgroups_path(ns), {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "big-gang", "namespace": ns}, "spec": {"minMember": 4, "queue": "typo"},
        "status": {"phase": "Pending", "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
             "message": "4/4 tasks in gang unschedulable: 1/1 nodes are unavailable: 1 Insufficient huawei.com/Ascend910B2-npu."}]}})  # fmt: skip
    for i, (uuid, memory, cores, temp) in enumerate([("node-a-npu-0", 65536, 20, None),
                                                     ("node-a-npu-1", 16384, 5, "vir05_1c_16g")]):  # fmt: skip
        annotations = {hami.ascend_allocated_key("Ascend910B3"): hami.encode_pod_devices(
            [[hami.PodDevice(uuid, "Ascend910B3", memory, cores)]])}  # fmt: skip
        if temp:
            annotations["huawei.com/Ascend910B3"] = json.dumps([{"UUID": uuid, "temp": temp}])
        await cluster.create_pod({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"npu-train-job-worker-{i}", "namespace": ns, "annotations": annotations,
                         "labels": {"volcano.sh/job-name": "npu-train-job"}},
            "spec": {"schedulerName": "volcano", "nodeName": "node-a",
                     "containers": [{"name": "train", "image": "ascend-pytorch:24.0.RC1"}]},
            "status": {"phase": "Running"}})  # fmt: skip
    await cluster.create_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-batch", "namespace": ns},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}})  # fmt: skip
    yield cluster


async def test_get_queues_shows_weight_capability_deserved_allocated_as_cards_and_units(volcano: Cluster) -> None:
    got = await tessera(volcano, "get", "queues")
    assert got.code == 0, got.err
    header, *lines = got.out.splitlines()
    assert header.split() == ["NAME", "STATE", "WEIGHT", "PARENT", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN",
                              "COMPLETED", "CAPABILITY", "DESERVED", "ALLOCATED", "WARNING"]
    train = next(line for line in lines if line.startswith("train-queue"))
    assert train.split()[:10] == ["train-queue", "Open", "2", "root", "0", "0", "1", "0", "0",
                                  "cpu=64,huawei.com/Ascend910=8,memory=256Gi"]  # the Queue's status counts  # fmt: skip
    assert "cpu=2,huawei.com/Ascend910=2.9,memory=16Gi" in train  # 2938m cards: 2.9 cards
    typo = next(line for line in lines if line.startswith("typo"))
    assert "capability names huawei.com/Ascend910B2-npu, which no node reports" in typo
    records = {q["name"]: q for q in json.loads((await tessera(volcano, "get", "q", "-o", "records")).out)}
    assert records["train-queue"]["allocated"] == {"cpu": 2000, "huawei.com/Ascend910": 2938, "memory": 16384}
    assert records["train-queue"]["weight"] == 2 and "warning" not in records["train-queue"]


async def test_get_jobs_podgroups_pods_read_the_status_volcano_writes(volcano: Cluster) -> None:
    ns = volcano.namespace
    jobs = json.loads((await tessera(volcano, "get", "vcjob", "-n", ns, "-o", "records")).out)
    assert [(j["name"], j["queue"], j["phase"]) for j in jobs] == [("npu-train-job", "train-queue", "Running")]
    listed = await tessera(volcano, "get", "pg", "-n", ns, "-o", "records")
    groups = {g["name"]: g for g in _yaml(listed.out)}
    assert groups["big-gang"]["phase"] == "Pending" and groups["big-gang"]["kind"] == "PodGroup"
    assert groups["big-gang"]["reason"].startswith("4/4 tasks in gang unschedulable")
    (owned,) = [g for g in groups.values() if g["kind"] == "Job"]
    assert owned["phase"] == "Running" and owned["queue"] == "train-queue"
    table = await tessera(volcano, "get", "pods", "-n", ns)
    assert table.code == 0, table.err
    rows = {line.split()[0]: line for line in table.out.splitlines()[1:]}  # (no NAMESPACE: -n)
    assert "not-batch" not in rows  # the default scheduler's pod is not a batch pod
    assert "node-a-npu-0:65536MB/whole" in rows["npu-train-job-worker-0"]
    assert "node-a-npu-1:16384MB/5/20 cores[vir05_1c_16g]" in rows["npu-train-job-worker-1"]
    one = json.loads((await tessera(volcano, "get", "pod", "npu-train-job-worker-1", "-n", ns, "-o", "records")).out)
    assert [(p["node"], p["devices"][0]["kind"], p["devices"][0]["card_cores"]) for p in one] == [("node-a", "template", 20)]
    missing = await tessera(volcano, "get", "pods", "nope", "-n", ns)
    assert missing.code == 1 and 'pods "nope" not found' in missing.err


async def test_get_o_json_prints_the_objects_the_api_server_holds(volcano: Cluster) -> None:
    ns = volcano.namespace
    served = await volcano.kube.get(f"/api/v1/namespaces/{ns}/pods/npu-train-job-worker-0")
    one = json.loads((await tessera(volcano, "get", "pod", "npu-train-job-worker-0", "-n", ns, "-o", "json")).out)
    assert (one["apiVersion"], one["kind"]) == ("v1", "Pod")
    assert one["metadata"]["uid"] == served["metadata"]["uid"] and one["spec"]["nodeName"] == "node-a"
    listed = json.loads((await tessera(volcano, "get", "pg", "-n", ns, "-o", "json")).out)
    assert listed["kind"] == "List" and {g["kind"] for g in listed["items"]} == {"PodGroup"}
    labelled = await tessera(volcano, "get", "po", "-n", ns, "-l", "volcano.sh/job-name=npu-train-job", "-o", "json")
    names = {o["metadata"]["name"] for o in json.loads(labelled.out)["items"]}
    assert names == {"npu-train-job-worker-0", "npu-train-job-worker-1"}


def _yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


async def test_queue_create_update_and_delete_write_the_queue(volcano: Cluster) -> None:
    made = await tessera(volcano, "queue", "create", "team-x", "--weight", "3", "--capability", "cpu=8,memory=32Gi")
    assert (made.code, made.out.strip()) == (0, "queue/team-x created"), made.err
    q = await volcano.kube.get(queue_path("team-x"))
    assert q["spec"]["weight"] == 3 and q["spec"]["capability"] == {"cpu": "8", "memory": "32Gi"}
    again = await tessera(volcano, "queue", "create", "team-x")
    assert again.code == 1 and "queue team-x already exists" in again.err
    updated = await tessera(volcano, "queue", "update", "team-x", "--capability", "cpu=4")
    assert updated.code == 0, updated.err
    assert updated.out.splitlines() == ["queue/team-x configured", (
        "    Warning: capability is now cpu=4 (--capability replaces the whole capability): no longer capped: "
        "memory (was 32Gi); to keep it, give --capability cpu=4,memory=32Gi")]  # fmt: skip
    assert (await volcano.kube.get(queue_path("team-x")))["spec"]["capability"] == {"cpu": "4"}  # replaced
    gone = await tessera(volcano, "queue", "delete", "team-x")
    assert (gone.code, gone.out.strip()) == (0, "queue team-x deleted"), gone.err
    with pytest.raises(KubeError) as exc:
        await volcano.kube.get(queue_path("team-x"))
    assert exc.value.status == 404


async def test_queue_delete_is_refused_as_volcanos_webhook_refuses_it(volcano: Cluster) -> None:
    busy = await tessera(volcano, "queue", "delete", "typo")  # big-gang names it
    assert busy.code == 1 and "queue typo can not be deleted: it has 1 PodGroup(s)" in busy.err
    await _with_status(volcano, queue_path(), _queue("parent-q"))
    await _with_status(volcano, queue_path(), _queue("child-q", parent="parent-q"))
    parent = await tessera(volcano, "queue", "delete", "parent-q")
    assert parent.code == 1 and "it is the parent of child-q" in parent.err
    await _with_status(volcano, queue_path(), _queue("default"))
    default = await tessera(volcano, "queue", "delete", "default")
    assert default.code == 1 and "queue default can not be deleted: pods and jobs that name no queue" in default.err
    for name in ("typo", "parent-q", "default"):
        assert (await volcano.kube.get(queue_path(name)))["metadata"]["name"] == name  # all still there
    missing = await tessera(volcano, "queue", "close", "nope")
    assert missing.code == 1 and "queue 'nope' not found" in missing.err


async def _commands(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    return list((await cluster.kube.get(commands_path(ns))).get("items") or [])


async def test_queue_open_close_and_job_suspend_resume_create_vcctls_commands(volcano: Cluster) -> None:
    ns = volcano.namespace
    closed = await tessera(volcano, "queue", "close", "train-queue")
    assert closed.code == 0 and "CloseQueue requested" in closed.out, closed.err
    queue = await volcano.kube.get(queue_path("train-queue"))
    (cmd,) = [c for c in await _commands(volcano, "default") if c["action"] == "CloseQueue"]
    ref = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "train-queue",
           "uid": queue["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    assert cmd["target"] == ref and cmd["metadata"]["ownerReferences"] == [ref]
    assert cmd["metadata"]["name"].startswith("train-queue-closequeue-")
    assert cmd["metadata"]["name"] in closed.out
    opened = await tessera(volcano, "queue", "open", "train-queue")
    assert opened.code == 0 and any(c["action"] == "OpenQueue" for c in await _commands(volcano, "default"))
    job = await volcano.kube.get(jobs_path(ns, "npu-train-job"))
    for verb, action in (("suspend", "AbortJob"), ("resume", "ResumeJob")):
        done = await tessera(volcano, "job", verb, "npu-train-job", "-n", ns)
        assert done.code == 0 and f"{action} requested" in done.out, done.err
        (cmd,) = [c for c in await _commands(volcano, ns) if c["action"] == action]
        assert cmd["target"]["kind"] == "Job" and cmd["target"]["uid"] == job["metadata"]["uid"]
        assert cmd["metadata"]["name"].startswith(f"npu-train-job-{action.lower()}-")
    deleted = await tessera(volcano, "job", "delete", "npu-train-job", "-n", ns)
    assert (deleted.code, deleted.out.strip()) == (0, f"job {ns}/npu-train-job deleted"), deleted.err
    assert not (await volcano.kube.get(jobs_path(ns))).get("items")
    again = await tessera(volcano, "job", "suspend", "npu-train-job", "-n", ns)
    assert again.code == 1 and f"job {ns}/npu-train-job not found" in again.err


async def test_what_a_cluster_cannot_answer_is_one_line(volcano: Cluster, tmp_path: Path) -> None:
    nodes = await tessera(volcano, "get", "nodes")
    assert nodes.code == 2 and "with --kubeconfig, get lists queues, jobs, podgroups, pods" in nodes.err
    dead = tmp_path / "kubeconfig"
    dead.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "users": [{"name": "x", "user": {"token": "x"}}]}))  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", "get", "queues", "--kubeconfig", str(dead), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert err.decode().strip().startswith("error: cannot reach the API server at http://127.0.0.1:1")
    assert "Traceback" not in err.decode()
