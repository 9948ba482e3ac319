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
from tests.processes import wait_until

SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
                  "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
QUALIFIED_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                  "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


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


async def all_running(cluster: Cluster, names: tuple[str, ...] | list[str]) -> bool:
    got = [await cluster.pod("default", p) for p in names]
    return all(p is not None and (p.get("status") or {}).get("phase") == "Running" for p in got)


async def all_gone(cluster: Cluster, *paths: str) -> bool:
    return all([await cluster.present(p) is None for p in paths])


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


def test_an_mpi_jobs_master_gets_the_workers_and_every_pod_the_ssh_port_keys_and_hosts() -> None:
    """Volcano's MPI example names only `mpi`: its webhook adds `svc` and `ssh`, which the
    master's `mpiexec --host ${MPI_HOST}` needs (names that resolve, and a key every worker's
    sshd accepts); Tessera's controller runs them as if named."""
    job = training_job({"mpi": ["--master=master", "--worker=worker", "--port=22"]}, masters=1, workers=2)
    master, worker = made_pod(job, "master", 0), made_pod(job, "worker", 1)
    for pod in (master, worker):
        spec = pod["spec"]
        assert spec["subdomain"] == "ddp"  # svc, implied
        for c in (*spec["containers"], *spec["initContainers"]):
            assert {"name": "mpijob-port", "containerPort": 22} in c["ports"]
            assert {"name": "ddp-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"} in c["volumeMounts"]
        [ssh] = [v for v in spec["volumes"] if v["name"] == "ddp-ssh"]
        assert ssh["secret"]["secretName"] == "ddp-ssh" and ssh["secret"]["defaultMode"] == 0o600
        assert [i["path"] for i in ssh["secret"]["items"]] == [".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/authorized_keys", ".ssh/config"]
    assert env_of(master["spec"]["containers"][0])["MPI_HOST"] == "ddp-worker-0.ddp,ddp-worker-1.ddp"
    assert env_of(master["spec"]["initContainers"][0])["MPI_HOST"] == "ddp-worker-0.ddp,ddp-worker-1.ddp"
    assert "MPI_HOST" not in env_of(worker["spec"]["containers"][0])
    # a port the template opens already is not opened twice
    job["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["ports"] = [{"name": "sshd", "containerPort": 22}]
    assert made_pod(job, "worker", 0)["spec"]["containers"][0]["ports"] == [{"name": "sshd", "containerPort": 22}]
    # beside the pods: svc's objects and the Secret, its pair left to the controller
    kinds = [k for k, _ in volcano.plugin_objects(job)]
    assert kinds == ["ConfigMap", "Service", "NetworkPolicy", "Secret"]
    # a plain job is untouched by any of it
    plain = made_pod(training_job({}), "worker", 0)["spec"]
    assert "volumes" not in plain and "ports" not in plain["containers"][0] and "subdomain" not in plain


def test_the_ssh_secret_lists_every_host_and_takes_a_given_pair_or_a_new_one() -> None:
    import base64

    from cryptography.hazmat.primitives import serialization

    from services.kube.sshkeys import new_key_pair

    job = training_job({"ssh": ["--ssh-key-file-path", "/home/mpi/.ssh"]}, masters=1, workers=2)
    job["spec"]["tasks"][0]["template"]["spec"]["hostname"] = "launcher"  # one host, whatever the replicas
    owner = {"kind": "Job", "name": "ddp", "uid": "u-9"}
    [(kind, body)] = jobplugins.ssh_objects(job, owner)
    assert kind == "Secret" and body["metadata"] == {"name": "ddp-ssh", "namespace": "default", "ownerReferences": [owner]}
    assert list(body["data"]) == ["config"]  # the pair is made when the Secret is
    assert base64.b64decode(body["data"]["config"]).decode() == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host launcher\n  HostName launcher.ddp\n"
        "Host ddp-worker-0\n  HostName ddp-worker-0.ddp\nHost ddp-worker-1\n  HostName ddp-worker-1.ddp\n")
    mount = made_pod(job, "worker", 0)["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "ddp-ssh", "mountPath": "/home/mpi/.ssh", "subPath": ".ssh"} in mount

    private, public = new_key_pair()
    assert private.startswith("-----BEGIN RSA PRIVATE KEY-----") and public.startswith("ssh-rsa ") and public.endswith("\n")
    key = serialization.load_pem_private_key(private.encode(), password=None)
    derived = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert derived.decode() + "\n" == public  # the pair is a pair
    full = jobplugins.with_key_pair(body, private, public)
    decoded = {k: base64.b64decode(v).decode() for k, v in full["data"].items()}
    assert decoded["id_rsa"] == private and decoded["id_rsa.pub"] == decoded["authorized_keys"] == public
    assert jobplugins.with_key_pair(full, "other", "other")["data"] == full["data"]  # a pair is never replaced
    assert new_key_pair()[0] != private

    given = training_job({"ssh": ["--ssh-private-key=PRIVATE", "--ssh-public-key=ssh-rsa AAAA"]})
    [(_, body)] = jobplugins.ssh_objects(given, owner)
    assert {k: base64.b64decode(v).decode() for k, v in body["data"].items() if k != "config"} == {
        "authorized_keys": "ssh-rsa AAAA", "id_rsa": "PRIVATE", "id_rsa.pub": "ssh-rsa AAAA"}


def test_tensorflow_config_names_the_cluster_and_the_pods_role() -> None:
    import json

    job = training_job({"tensorflow": ["--ps=master", "--port=2223"]}, masters=1, workers=2)
    config = json.loads(env_of(made_pod(job, "worker", 1)["spec"]["containers"][0])["TF_CONFIG"])
    assert config == {"cluster": {"ps": ["ddp-master-0.ddp:2223"], "worker": ["ddp-worker-0.ddp:2223", "ddp-worker-1.ddp:2223"]},
                      "task": {"type": "worker", "index": 1}}  # fmt: skip
    ps = json.loads(env_of(made_pod(job, "master", 0)["spec"]["containers"][0])["TF_CONFIG"])
    assert ps["task"] == {"type": "ps", "index": 0}
    assert "TF_CONFIG" not in env_of(made_pod(job, "worker", 0)["spec"]["initContainers"][0])
    alone = training_job({"tensorflow": []}, masters=1, workers=0)
    del alone["spec"]["tasks"][1]
    assert "TF_CONFIG" not in env_of(made_pod(alone, "master", 0)["spec"]["containers"][0])  # one pod: no cluster


def test_rings_configmap_is_volcanos_defaults_plus_the_flags_and_mounted_once() -> None:
    """What Ascend's MindCluster expects of a 910 training job: `rings-config-<job>` labelled
    `ring-controller.atlas: ascend-910b` with hccl.json "initializing", at
    /user/serverid/devindex/config. The flags' JSON maps add to the defaults (Volcano decodes
    them into its default maps)."""
    owner = {"kind": "Job", "name": "ddp", "uid": "u-9"}
    [(kind, body)] = jobplugins.rings_objects(training_job({"ringsconfigmap": []}), owner)
    assert kind == "ConfigMap" and body["metadata"]["name"] == "rings-config-ddp"
    assert body["metadata"]["labels"] == {"ring-controller.atlas": "ascend-910b"} and "annotations" not in body["metadata"]
    assert body["data"] == {"hccl.json": '{\n        "status":"initializing"\n    }'}
    flagged = training_job({"ringsconfigmap": ["-configmap-name-template", "hccl-{{ .Namespace }}-{{.Name}}",
                                               "-configmap-labels", '{"team":"ai"}', "-configmap-data", '{"extra.json":"{}"}',
                                               "-configmap-annotations", '{"by":"ops"}', "-volume-name", "ranks",
                                               "-mount-path", "/etc/ranks"]})  # fmt: skip
    [(_, body)] = jobplugins.rings_objects(flagged, owner)
    assert body["metadata"]["name"] == "hccl-default-ddp"
    assert body["metadata"]["labels"] == {"ring-controller.atlas": "ascend-910b", "team": "ai"}
    assert body["metadata"]["annotations"] == {"by": "ops"}
    assert sorted(body["data"]) == ["extra.json", "hccl.json"]
    spec = made_pod(flagged, "worker", 0)["spec"]
    assert spec["volumes"] == [{"name": "ranks", "configMap": {"name": "hccl-default-ddp"}}]
    for c in (*spec["containers"], *spec["initContainers"]):
        assert {"name": "ranks", "mountPath": "/etc/ranks"} in c["volumeMounts"]
    # a template that brings its own volume of that name keeps it
    own = training_job({"ringsconfigmap": []})
    own["spec"]["tasks"][1]["template"]["spec"]["volumes"] = [{"name": "ascend-910-config", "configMap": {"name": "mine"}}]
    assert made_pod(own, "worker", 0)["spec"]["volumes"] == [{"name": "ascend-910-config", "configMap": {"name": "mine"}}]


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
        ({"ray": []}, [], ["spec.plugins.ray: Tessera's job controller does not run the ray plugin: its pods will lack the Ray head's address and ports"]),
        ({"mpi": [], "ssh": [], "tensorflow": []}, [], []),
        ({"mpi": ["--master=mpimaster"]}, [], ["spec.plugins.mpi: the job has no task mpimaster: its pods will lack MPI_HOST"]),
        ({"mpi": ["--worker=mpiworker"]}, [], ["spec.plugins.mpi: the job has no task mpiworker: its pods will lack MPI_HOST's workers (it will be empty)"]),
        ({"mpi": ["--port=twenty-two"]}, ["spec.plugins.mpi[0]: --port is a number"], []),
        ({"ssh": ["--ssh-key-file-path=.ssh"]}, ["spec.plugins.ssh: --ssh-key-file-path must be an absolute path: every container mounts the keys there"], []),
        ({"ssh": ["--ssh-private-key=KEY"]}, ["spec.plugins.ssh: --ssh-private-key needs --ssh-public-key too: authorized_keys is made from it, and would be empty"], []),
        ({"ssh": ["--ssh-public-key=PUB"]}, [], ["spec.plugins.ssh: --ssh-public-key is ignored without --ssh-private-key: a new key pair is made for the job"]),
        ({"ssh": ["--no-root"]}, ["spec.plugins.ssh[0]: unknown flag --no-root (ssh's flags: --ssh-key-file-path, --ssh-private-key, --ssh-public-key)"], []),
        ({"tensorflow": ["--chief=master", "--port=2223"]}, [], []),
        ({"ringsconfigmap": []}, [], []),
        ({"ringsconfigmap": ["-configmap-name-template", "cfg-{{.Spec.Queue}}"]}, ["spec.plugins.ringsconfigmap: -configmap-name-template may use only {{.Name}}, {{.Namespace}}, {{.UID}}"], []),
        ({"ringsconfigmap": ["-configmap-name-template=Rings_{{.Name}}"]}, ["spec.plugins.ringsconfigmap: -configmap-name-template must make a ConfigMap name: " + SUBDOMAIN_RULE], []),
        ({"ringsconfigmap": ["-configmap-name-template=r-{{.Name}}-{{.Namespace}}-{{.UID}}-" + "x" * 100]}, ["spec.plugins.ringsconfigmap: -configmap-name-template must make a ConfigMap name: must be no more than 253 characters"], []),
        ({"ringsconfigmap": ["-configmap-data", "[1]", "-mount-path="]}, ["spec.plugins.ringsconfigmap: -mount-path cannot be empty", "spec.plugins.ringsconfigmap: -configmap-data must be a JSON object of strings"], []),
        ({"ringsconfigmap": ["-configmap-labels", '{"team": "a i"}', "-configmap-data", '{"a/b": "x"}']}, ["spec.plugins.ringsconfigmap: -configmap-labels 'team': a valid label " + QUALIFIED_RULE.replace("'MyName',  or 'my.name',  or '123-abc'", "'MyValue',  or 'my_value',  or '12345'"),
                                                                                                        "spec.plugins.ringsconfigmap: -configmap-data 'a/b': a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"], []),
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

            await wait_until(lambda: all_running(cluster, pods), 60, "the job's three pods Running")
            worker = await cluster.pod("default", "ddp-worker-1") or {}
            env = env_of(worker["spec"]["containers"][0])
            assert (env["MASTER_ADDR"], env["WORLD_SIZE"], env["RANK"]) == ("ddp-master-0.ddp", "3", "2")
            assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("ddp-worker-1", "ddp")
            paths = (configmaps_path("default", "ddp-svc"), services_path("default", "ddp"),
                     networkpolicies_path("default", "ddp"))  # fmt: skip
            for path in paths:
                obj = await cluster.present(path)
                assert obj is not None, path
                assert volcano.owner_job(obj) == ("ddp", created["metadata"]["uid"]), path
            cm = await cluster.present(paths[0]) or {}
            assert cm["data"]["VC_WORKER_HOSTS"] == "ddp-worker-0.ddp,ddp-worker-1.ddp"

            await cluster.kube.delete(volcano.jobs_path("default", "ddp"))

            await wait_until(lambda: all_gone(cluster, *paths), 60, "the ConfigMap, Service and NetworkPolicy gone with the Job")
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
                return await cluster.present(path) is not None

            await wait_until(made, 60, f"the claim {name} made")
            claim = await cluster.present(path) or {}
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

            await wait_until(lambda: all_running(cluster, ("ddp-master-0", "ddp-worker-0")), 60, "the job's pods Running on the bound claim")
            worker = await cluster.pod("default", "ddp-worker-0") or {}
            vol = next(v for v in worker["spec"]["volumes"] if "persistentVolumeClaim" in v)
            assert vol["persistentVolumeClaim"] == {"claimName": name}
            assert {"name": vol["name"], "mountPath": "/ckpt"} in worker["spec"]["containers"][0]["volumeMounts"]

            await cluster.kube.delete(volcano.jobs_path("default", "ddp"))

            await wait_until(lambda: all_gone(cluster, path), 60, "the claim gone with the Job")
        finally:
            await asyncio.to_thread(cp.stop)


def mpi_example() -> dict[str, Any]:
    """Volcano's MPI example as users apply it: only `mpi` named, the launcher runs sshd and
    `mpiexec --host ${MPI_HOST}`, the workers `sshd -D`."""
    def task(name: str, replicas: int, command: str) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "containers": [{"name": name, "image": "volcanosh/example-mpi:0.0.3", "workingDir": "/home",
                            "command": ["/bin/sh", "-c", command], "resources": {"requests": {"cpu": "1"}}}],
            "restartPolicy": "OnFailure"}}}  # fmt: skip

    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "lm-mpi-job", "namespace": "default"},
            "spec": {"minAvailable": 3, "schedulerName": "volcano",
                     "plugins": {"mpi": ["--master=mpimaster", "--worker=mpiworker", "--port=22"]},
                     "tasks": [task("mpimaster", 1, "mkdir -p /var/run/sshd; /usr/sbin/sshd; "
                                    "mpiexec --allow-run-as-root --host ${MPI_HOST} -np 2 mpi_hello_world"),
                               task("mpiworker", 2, "mkdir -p /var/run/sshd; /usr/sbin/sshd -D")]}}  # fmt: skip


async def test_an_mpi_job_runs_with_one_key_pair_kept_over_a_restart_and_gone_with_the_job(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Refused before ("does not run the mpi plugin"): the launcher had no MPI_HOST and no key
    the workers' sshd accepts. Now the Secret `<job>-ssh` holds one pair, made once and owned
    by the Job; the queue service restarted keeps it (a new pair would lock running pods out
    of each other); it goes with the Job."""
    import base64

    from cryptography.hazmat.primitives import serialization

    from services.kube.client import secret_path

    await cluster.volcano_crds()
    for node in ("n1", "n2"):
        await cluster.create_node(node)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pods = ("lm-mpi-job-mpimaster-0", "lm-mpi-job-mpiworker-0", "lm-mpi-job-mpiworker-1")
    path = secret_path("default", "lm-mpi-job-ssh")
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            created = await cluster.kube.create(volcano.jobs_path("default"), mpi_example())

            await wait_until(lambda: all_running(cluster, pods), 60, "the MPI job's three pods Running")
            secret = await cluster.present(path)
            assert secret is not None and volcano.owner_job(secret) == ("lm-mpi-job", created["metadata"]["uid"])
            data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
            assert sorted(data) == ["authorized_keys", "config", "id_rsa", "id_rsa.pub"]
            key = serialization.load_pem_private_key(data["id_rsa"].encode(), password=None)
            public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            assert data["authorized_keys"] == data["id_rsa.pub"] == public.decode() + "\n"
            assert "Host lm-mpi-job-mpiworker-1\n  HostName lm-mpi-job-mpiworker-1.lm-mpi-job\n" in data["config"]
            launcher = await cluster.pod("default", pods[0]) or {}
            assert env_of(launcher["spec"]["containers"][0])["MPI_HOST"] == \
                "lm-mpi-job-mpiworker-0.lm-mpi-job,lm-mpi-job-mpiworker-1.lm-mpi-job"  # fmt: skip
            assert {"name": "lm-mpi-job-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"} in \
                launcher["spec"]["containers"][0]["volumeMounts"]  # fmt: skip
            assert await cluster.present(services_path("default", "lm-mpi-job")) is not None  # svc, implied

            cp.kill("queue")  # the job controller's process
            await asyncio.to_thread(cp.restart, "queue")
            # a fourth worker: the restarted controller writes the job's new host into the
            # Secret's config — and nothing else of it
            await cluster.kube.patch(volcano.jobs_path("default", "lm-mpi-job"),
                                     {"spec": {"tasks": [created["spec"]["tasks"][0],
                                                         {**created["spec"]["tasks"][1], "replicas": 3}]}})  # fmt: skip

            async def config_follows() -> bool:
                now = await cluster.present(path) or {}
                return "lm-mpi-job-mpiworker-2" in base64.b64decode((now.get("data") or {}).get("config", "")).decode()

            await wait_until(config_follows, 60, "the Secret's config listing the third worker")
            after = await cluster.present(path) or {}
            assert after["metadata"]["uid"] == secret["metadata"]["uid"]
            assert {k: v for k, v in after["data"].items() if k != "config"} == \
                {k: v for k, v in secret["data"].items() if k != "config"}  # fmt: skip

            await cluster.kube.delete(volcano.jobs_path("default", "lm-mpi-job"))

            await wait_until(lambda: all_gone(cluster, path), 60, "the ssh Secret gone with the Job")
        finally:
            await asyncio.to_thread(cp.stop)


async def test_the_rings_configmap_is_made_once_and_what_mindcluster_writes_stays(cluster: Cluster, tmp_path: Path) -> None:
    """A 910B job naming `ringsconfigmap` (refused before: "unable to find job plugin"): its
    ConfigMap is made owned by the Job before its pods and mounted in them; once Ascend's
    controller has written the rank table, a change of the Job (more workers) leaves it as
    written, also by a restarted controller; it goes with the Job."""
    await cluster.volcano_crds()
    for node in ("n1", "n2"):
        await cluster.create_node(node)
    job = training_job({"ringsconfigmap": [], "hcclrank": []})
    del job["metadata"]["uid"]
    path = configmaps_path("default", "rings-config-ddp")
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            created = await cluster.kube.create(volcano.jobs_path("default"), job)
            await wait_until(lambda: all_running(cluster, ("ddp-master-0", "ddp-worker-0", "ddp-worker-1")), 60,
                             "the job's pods Running")  # fmt: skip
            cm = await cluster.present(path)
            assert cm is not None and volcano.owner_job(cm) == ("ddp", created["metadata"]["uid"])
            assert cm["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910b"
            pod = await cluster.pod("default", "ddp-worker-1") or {}
            assert {"name": "ascend-910-config", "configMap": {"name": "rings-config-ddp"}} in pod["spec"]["volumes"]
            ranks = '{"status":"completed","server_count":"2"}'
            await cluster.kube.patch(path, {"data": {"hccl.json": ranks}})  # MindCluster's rank table
            cp.kill("queue")  # a restarted job controller knows nothing it made: it finds them
            await asyncio.to_thread(cp.restart, "queue")
            tasks = created["spec"]["tasks"]
            await cluster.kube.patch(volcano.jobs_path("default", "ddp"),
                                     {"spec": {"minAvailable": 4, "tasks": [tasks[0], {**tasks[1], "replicas": 3}]}})  # fmt: skip
            await wait_until(lambda: all_running(cluster, ("ddp-worker-2",)), 60, "the third worker Running")
            after = await cluster.present(path) or {}
            assert after["data"] == {"hccl.json": ranks}

            await cluster.kube.delete(volcano.jobs_path("default", "ddp"))

            await wait_until(lambda: all_gone(cluster, path), 60, "the rings ConfigMap gone with the Job")
        finally:
            await asyncio.to_thread(cp.stop)


def test_a_private_key_in_the_ssh_flags_reaches_the_secret_and_not_the_logs_copy() -> None:
    """The log keeps every admitted manifest (readable by the cli user, replays, reports); the
    job controller makes the Secret from the Job object, so the log's copy goes without it."""
    import base64

    for flags in (["--ssh-private-key", "PRIVATE", "--ssh-public-key=ssh-rsa AAAA"],
                  ["-ssh-private-key=PRIVATE", "--ssh-public-key", "ssh-rsa AAAA"]):  # fmt: skip
        job = training_job({"ssh": flags, "svc": []})
        logged = volcano.manifest(job)
        assert "PRIVATE" not in str(logged) and "ssh-rsa AAAA" in str(logged)
        assert logged["spec"]["plugins"]["svc"] == [] and job["spec"]["plugins"]["ssh"] == flags  # the object untouched
        [(_, secret)] = jobplugins.ssh_objects(job, {"kind": "Job", "name": "ddp", "uid": "u-9"})
        assert base64.b64decode(secret["data"]["id_rsa"]).decode() == "PRIVATE"
        assert check_plugins(logged["spec"]["plugins"], ["master", "worker"]) == ([], [])  # still admitted


async def test_the_mpi_example_completes_when_its_launcher_does(cluster: Cluster, tmp_path: Path) -> None:
    """Volcano's MPI example ends itself: its launcher's task has `TaskCompleted → CompleteJob`,
    as the workers' `sshd -D` never exits. Tessera raised no TaskCompleted, so the job ran on
    (Running, two workers holding their nodes) for ever after its launcher succeeded. Now the
    launcher's success completes the task, the policy ends the job: Completing while its
    workers are stopped, then Completed; the launcher's pod is kept as it ended."""
    await cluster.volcano_crds()
    for node in ("n1", "n2"):
        await cluster.create_node(node)
    body = mpi_example()
    body["spec"]["tasks"][0]["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    pods = ("lm-mpi-job-mpimaster-0", "lm-mpi-job-mpiworker-0", "lm-mpi-job-mpiworker-1")
    async with Kubelet(cluster) as kubelet:
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.jobs_path("default"), body)
            await wait_until(lambda: all_running(cluster, pods), 60, "the MPI job's three pods Running")
            await kubelet.finish("default", pods[0], 0)

            async def completed() -> bool:
                job = await cluster.present(volcano.jobs_path("default", "lm-mpi-job")) or {}
                return ((job.get("status") or {}).get("state") or {}).get("phase") == "Completed"

            await wait_until(completed, 60, "the job Completed once its launcher succeeded")
            await wait_until(lambda: all_gone(cluster, *(f"/api/v1/namespaces/default/pods/{p}" for p in pods[1:])),
                             60, "the workers stopped")  # fmt: skip
            launcher = await cluster.pod("default", pods[0]) or {}
            assert launcher.get("status", {}).get("phase") == "Succeeded", launcher.get("status")
        finally:
            await asyncio.to_thread(cp.stop)
