"""Volcano's job plugins as Tessera's job controller runs them (services/kube/jobplugins.py;
which ones and their flags: services/core/workload/jobplugins.py): what a distributed training
Job's pods get (env, svc, pytorch, hcclrank) and what is made beside them, as pure functions,
then on the emulated cluster: a PyTorch Job's pods carry the rendezvous, the hosts ConfigMap,
headless Service and NetworkPolicy are made owned by the Job and go when it goes."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from services.cli.up import ControlPlane
from services.core.workload.jobplugins import check_plugins, parse_flags
from services.kube import jobplugins, volcano
from services.kube.client import configmaps_path, networkpolicies_path, services_path
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.test_volcano import _get
from tests.processes import wait_until


def training_job(plugins: dict[str, list[str]], masters: int = 1, workers: int = 2) -> dict[str, Any]:
    def task(name: str, replicas: int) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "initContainers": [{"name": "fetch", "image": "busybox"}],
            "containers": [{"name": "train", "image": "torch-npu", "resources": {"requests": {"cpu": "1"}}}],
            "restartPolicy": "OnFailure"}}}  # fmt: skip

    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "ddp", "namespace": "default", "uid": "u-9"},
            "spec": {"minAvailable": masters + workers, "schedulerName": "volcano", "queue": "default",
                     "plugins": plugins, "tasks": [task("master", masters), task("worker", workers)]}}  # fmt: skip


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def made_pod(job: dict[str, Any], task: str, index: int) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": f"ddp-{task}-{index}", "annotations": {}},
                           "spec": copy.deepcopy(next(t for t in job["spec"]["tasks"] if t["name"] == task)["template"]["spec"])}  # fmt: skip
    jobplugins.apply_to_pod(pod, job, task, index)
    return pod


def test_a_pytorch_workers_pod_gets_the_rendezvous_its_index_and_the_hosts() -> None:
    job = training_job({"svc": [], "env": [], "pytorch": ["--master=master", "--worker=worker", "--port=23456"]})
    pod = made_pod(job, "worker", 1)
    spec = pod["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("ddp-worker-1", "ddp")
    [train], [fetch] = spec["containers"], spec["initContainers"]
    env = env_of(train)
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "VC_TASK_INDEX", "VK_TASK_INDEX")} == {
        "MASTER_ADDR": "ddp-master-0.ddp", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2",
        "VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1"}  # fmt: skip
    assert env["VC_WORKER_HOSTS"] == {"configMapKeyRef": {"name": "ddp-svc", "key": "VC_WORKER_HOSTS"}}
    assert env["VC_MASTER_NUM"] == {"configMapKeyRef": {"name": "ddp-svc", "key": "VC_MASTER_NUM"}}
    assert {"name": "pytorchjob-port", "containerPort": 23456} in train["ports"]
    assert {"name": "ddp-svc", "mountPath": "/etc/volcano"} in train["volumeMounts"]
    # init containers: the index and the hosts, not the rendezvous
    assert "VC_TASK_INDEX" in env_of(fetch) and "VC_WORKER_HOSTS" in env_of(fetch) and "RANK" not in env_of(fetch)
    assert spec["volumes"] == [{"name": "ddp-svc", "configMap": {"name": "ddp-svc"}}]
    master = env_of(made_pod(job, "master", 0)["spec"]["containers"][0])
    assert master["RANK"] == "0"


def test_the_hosts_configmap_service_and_network_policy() -> None:
    job = training_job({"svc": ["--publish-not-ready-addresses"]}, masters=1, workers=2)
    owner = {"apiVersion": volcano.BATCH, "kind": "Job", "name": "ddp", "uid": "u-9", "controller": True,
             "blockOwnerDeletion": True}  # fmt: skip
    objects = dict(jobplugins.svc_objects(job, owner))
    assert objects["ConfigMap"]["metadata"]["name"] == "ddp-svc"
    assert objects["ConfigMap"]["data"] == {
        "master.host": "ddp-master-0.ddp", "VC_MASTER_HOSTS": "ddp-master-0.ddp", "VC_MASTER_NUM": "1",
        "worker.host": "ddp-worker-0.ddp\nddp-worker-1.ddp", "VC_WORKER_HOSTS": "ddp-worker-0.ddp,ddp-worker-1.ddp",
        "VC_WORKER_NUM": "2"}  # fmt: skip
    service = objects["Service"]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True
    assert service["selector"] == {"volcano.sh/job-name": "ddp", "volcano.sh/job-namespace": "default"}
    assert objects["NetworkPolicy"]["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": service["selector"]}}]}]
    assert all(o["metadata"]["ownerReferences"] == [owner] for o in objects.values())
    quiet = dict(jobplugins.svc_objects(training_job({"svc": ["--disable-network-policy=true"]}), owner))
    assert "NetworkPolicy" not in quiet and not jobplugins.svc_objects(training_job({"env": []}), owner)


def test_hccl_ranks_follow_the_master_count_unless_the_template_says() -> None:
    job = training_job({"hcclrank": []}, masters=2, workers=2)
    ranks = [made_pod(job, t, i)["metadata"]["annotations"]["hccl/rankIndex"]
             for t, i in (("master", 0), ("master", 1), ("worker", 0), ("worker", 1))]  # fmt: skip
    assert ranks == ["0", "1", "2", "3"]
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["env"] = [{"name": "RANK", "value": "7"}]
    assert made_pod(job, "worker", 0)["metadata"]["annotations"]["hccl/rankIndex"] == "7"


def test_flags_are_read_as_gos_flag_package_reads_them() -> None:
    assert parse_flags("pytorch", ["--port", "29500", "-master=chief"])[0] == {"master": "chief", "worker": "worker", "port": 29500}
    assert parse_flags("svc", ["--disable-network-policy"])[0]["disable-network-policy"] is True
    assert parse_flags("pytorch", ["--master=m", "extra", "--port=1"])[0]["port"] == 23456  # flags end at "extra"


@pytest.mark.parametrize(
    ("plugins", "refused", "warned"),
    [
        ({"pytorch": ["--prot=1"]}, ["spec.plugins.pytorch[0]: unknown flag --prot (pytorch's flags: --master, --worker, --port)"], []),
        ({"pytorch": ["--port=x"]}, ["spec.plugins.pytorch[0]: --port is a number"], []),
        ({"svc": ["--disable-network-policy=maybe"]}, ["spec.plugins.svc[0]: --disable-network-policy is a boolean: true or false"], []),
        ({"horovod": []}, ["spec.plugins.horovod: unable to find job plugin"], []),
        ({"mpi": [], "ssh": []}, [], ["spec.plugins.mpi: Tessera's job controller does not run the mpi plugin: its pods will lack MPI_HOST and the ssh setup mpirun needs",
                                     "spec.plugins.ssh: Tessera's job controller does not run the ssh plugin: its pods will lack the job's SSH key Secret mounted at /root/.ssh"]),
        ({"pytorch": ["--master=chief"]}, [], ["spec.plugins.pytorch: the job has no task chief: its pods will lack MASTER_ADDR, WORLD_SIZE and RANK"]),
    ],
)  # fmt: skip
def test_admission_refuses_bad_flags_and_warns_of_what_is_not_run(
    plugins: dict[str, list[str]], refused: list[str], warned: list[str]
) -> None:
    bad, told = check_plugins(plugins, ["master", "worker"])
    assert [f"{p.path}: {p.rule}" for p in bad] == refused
    assert [f"{p.path}: {p.rule}" for p in told] == warned


async def test_a_pytorch_job_runs_with_its_rendezvous_and_its_service_goes_with_it(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.volcano_crds()
    for node in ("n1", "n2"):
        await cluster.create_node(node)
    job = training_job({"svc": [], "env": [], "pytorch": ["--master=master", "--worker=worker", "--port=23456"]})
    del job["metadata"]["uid"]
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pods = ("ddp-master-0", "ddp-worker-0", "ddp-worker-1")
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            created = await cluster.kube.create(volcano.jobs_path("default"), job)

            async def running() -> bool:
                got = [await cluster.pod("default", p) for p in pods]
                return all(p is not None and (p.get("status") or {}).get("phase") == "Running" for p in got)

            await wait_until(running, 60, "the job's three pods Running")
            worker = await cluster.pod("default", "ddp-worker-1") or {}
            env = env_of(worker["spec"]["containers"][0])
            assert (env["MASTER_ADDR"], env["WORLD_SIZE"], env["RANK"]) == ("ddp-master-0.ddp", "3", "2")
            assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("ddp-worker-1", "ddp")
            paths = (configmaps_path("default", "ddp-svc"), services_path("default", "ddp"),
                     networkpolicies_path("default", "ddp"))  # fmt: skip
            for path in paths:
                obj = await _get(cluster, path)
                assert obj is not None, path
                assert volcano.owner_job(obj) == ("ddp", created["metadata"]["uid"]), path
            cm = await _get(cluster, paths[0]) or {}
            assert cm["data"]["VC_WORKER_HOSTS"] == "ddp-worker-0.ddp,ddp-worker-1.ddp"

            await cluster.kube.delete(volcano.jobs_path("default", "ddp"))

            async def gone() -> bool:
                return all([await _get(cluster, p) is None for p in paths])

            await wait_until(gone, 60, "the ConfigMap, Service and NetworkPolicy gone with the Job")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_a_jobs_volume_claim_is_made_owned_by_the_job_and_its_pods_run_on_it(cluster: Cluster, tmp_path: Path) -> None:
    """`spec.volumes[].volumeClaim` (the Job of Volcano's own cdp guide has one): the job
    controller makes the claim, owned by the Job, before its pods (refused before: Tessera made
    none); once it is bound (the test plays the PV controller; pods wait for that as in
    test_volumes.py) they run with it mounted; it goes with the Job."""
    from services.core.workload.jobvolumes import generated_claim
    from services.kube.client import claims_path, volumes_path

    await cluster.volcano_crds()
    await cluster.create_node("n1")
    job = training_job({}, masters=1, workers=1)
    del job["metadata"]["uid"]
    wanted = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    job["spec"]["volumes"] = [{"mountPath": "/ckpt", "volumeClaim": wanted}]
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            created = await cluster.kube.create(volcano.jobs_path("default"), job)
            name = generated_claim("ddp", created["metadata"]["uid"], 0)
            path = claims_path("default", name)

            async def made() -> bool:
                return await _get(cluster, path) is not None

            await wait_until(made, 60, f"the claim {name} made")
            claim = await _get(cluster, path) or {}
            assert volcano.owner_job(claim) == ("ddp", created["metadata"]["uid"])
            assert claim["spec"]["accessModes"] == wanted["accessModes"]
            assert claim["spec"]["resources"] == wanted["resources"]
            await cluster.kube.create(volumes_path(), {"apiVersion": "v1", "kind": "PersistentVolume",
                                                       "metadata": {"name": "pv-ckpt"},
                                                       "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                                "hostPath": {"path": "/mnt/ckpt"},
                                                                "claimRef": {"namespace": "default", "name": name}}})  # fmt: skip
            await cluster.kube.patch(path, {"spec": {"volumeName": "pv-ckpt"}})
            await cluster.kube.patch(claims_path("default", name, "status"), {"status": {"phase": "Bound"}})

            async def running() -> bool:
                got = [await cluster.pod("default", p) for p in ("ddp-master-0", "ddp-worker-0")]
                return all(p is not None and (p.get("status") or {}).get("phase") == "Running" for p in got)

            await wait_until(running, 60, "the job's pods Running on the bound claim")
            worker = await cluster.pod("default", "ddp-worker-0") or {}
            vol = next(v for v in worker["spec"]["volumes"] if "persistentVolumeClaim" in v)
            assert vol["persistentVolumeClaim"] == {"claimName": name}
            assert {"name": vol["name"], "mountPath": "/ckpt"} in worker["spec"]["containers"][0]["volumeMounts"]

            await cluster.kube.delete(volcano.jobs_path("default", "ddp"))

            async def gone() -> bool:
                return await _get(cluster, path) is None

            await wait_until(gone, 60, "the claim gone with the Job")
        finally:
            await asyncio.to_thread(cp.stop)
