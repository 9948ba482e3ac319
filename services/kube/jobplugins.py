"""What Volcano's job-controller plugins put into a Job's pods and beside them, as Tessera's
job controller runs them (the flags and which plugins: `services.core.workload.jobplugins`).
Pure: the Job object in, pod changes and objects out.

* `env`: every container and init container gets `VK_TASK_INDEX` and `VC_TASK_INDEX`, the
  pod's index in its task.
* `svc`: the pod gets `hostname` (its name) and `subdomain` (the job's name) unless its template
  sets them; every container and init container gets `VC_<TASK>_HOSTS` and `VC_<TASK>_NUM` of
  every task, from the ConfigMap `<job>-svc`, which is also mounted at `/etc/volcano` (a file
  `<task>.host` per task). Beside the pods: that ConfigMap, the headless Service `<job>`
  selecting the job's pods (so `<pod>.<job>` resolves), and the NetworkPolicy `<job>` letting
  only the job's pods in (unless `--disable-network-policy`). All owned by the Job.
* `pytorch`: the app containers get `MASTER_ADDR` (the master task's first pod, by its svc
  name), `MASTER_PORT`, `WORLD_SIZE` (master and worker replicas) and `RANK` (master 0, worker
  index + 1), and the port.
* `hcclrank`: the pod gets `hccl/rankIndex` (master: its index; worker: master replicas + index;
  a literal `RANK` in the template wins).
* `mpi`: the master task's containers and init containers get `MPI_HOST` (the worker task's
  hosts, comma-separated); every container of the job opens the ssh port (`mpijob-port`, 22).
* `ssh`: the Secret `<job>-ssh` (`id_rsa`, `id_rsa.pub`, `authorized_keys`: one RSA key pair
  per Job, made by the controller unless the flags give one; `config`: every host of the job,
  strict host checking off) is mounted at `/root/.ssh` (or `--ssh-key-file-path`) in every
  container and init container, mode 0600. The pair is not part of what `objects` returns (it
  is new each time it is made): the controller adds it when it creates the Secret, and keeps
  the one it finds.
* `ringsconfigmap`: the ConfigMap `rings-config-<job>` (`-configmap-name-template`; labelled
  `ring-controller.atlas: ascend-910b`, `hccl.json` "initializing": what Ascend's MindCluster
  fills with the job's rank table; the flags' labels and data are added to these, as Volcano's
  JSON decoding into its defaults adds them) is made once and never written again — another
  controller owns its data — and mounted as `ascend-910-config` at
  `/user/serverid/devindex/config` in every container and init container, unless the pod has
  a volume or mount of that name already.
* `tensorflow`: the app containers get `TF_CONFIG` (the cluster's ps, worker, chief and
  evaluator addresses with the port, and this pod's role and index), unless the job is one
  pod.

What the plugins build on runs with them, as Volcano's webhook adds it (`implied`: `svc` for
`mpi`, `pytorch` and `tensorflow`; `ssh` for `mpi`).

Volcano iterates a map, so its plugins run in no fixed order; here they run in name order, so
the same Job always gives the same pods (hcclrank thus reads the template's `RANK`, never
pytorch's: with one master the two formulas agree).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from services.core.workload.jobplugins import (
    FLAGS,
    RINGS_DATA,
    RINGS_LABELS,
    implied,
    json_map,
    parse_flags,
    render_name,
)

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
RANK_ANNOTATION = "hccl/rankIndex"
HOSTS_MOUNT = "/etc/volcano"
PYTORCH_PORT_NAME = "pytorchjob-port"
MPI_PORT_NAME = "mpijob-port"
#: the ssh Secret's keys, each mounted as `.ssh/<key>` under the key path
SSH_PRIVATE, SSH_PUBLIC, SSH_AUTHORIZED, SSH_CONFIG = "id_rsa", "id_rsa.pub", "authorized_keys", "config"
SSH_KEYS = (SSH_PRIVATE, SSH_PUBLIC, SSH_AUTHORIZED, SSH_CONFIG)
SSH_MODE = 0o600


def plugins_of(job: Mapping[str, Any]) -> dict[str, dict[str, str | int | bool]]:
    """The plugins Tessera runs for this Job, with their flags (defaults where admission let a
    problem through: it refuses them, so none reaches here from the log)."""
    raw = (job.get("spec") or {}).get("plugins") or {}
    if not isinstance(raw, Mapping):
        return {}
    named = {str(name): args for name, args in raw.items()}
    return {name: parse_flags(name, named[name] if isinstance(named.get(name), list) else [])[0]
            for name in implied(list(named)) if name in FLAGS}  # fmt: skip


def _name(job: Mapping[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("name") or "")


def _tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((job.get("spec") or {}).get("tasks") or [])


def _key(task: str) -> str:
    return task.replace("-", "_")


def _env_name(task: str, what: str) -> str:
    return f"VC_{_key(task).upper()}_{what}"


def _host_names(job: Mapping[str, Any], task: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(host, subdomain) per replica, one only when the template names its host (every pod
    would have that name): Volcano's GenerateHosts and the ssh config's hosts."""
    spec = (task.get("template") or {}).get("spec") or {}
    name, tname = _name(job), str(task.get("name") or "")
    domain = str(spec.get("subdomain") or name)
    if spec.get("hostname"):
        return [(str(spec["hostname"]), domain)]
    return [(f"{name}-{tname}-{i}", domain) for i in range(int(task.get("replicas") or 0))]


def _hosts(job: Mapping[str, Any], task: Mapping[str, Any]) -> list[str]:
    """`<hostname or job-task-i>.<subdomain or job>` per replica."""
    return [f"{host}.{domain}" for host, domain in _host_names(job, task)]


def configmap_name(job: Mapping[str, Any]) -> str:
    return f"{_name(job)}-svc"


def hosts_data(job: Mapping[str, Any]) -> dict[str, str]:
    """The `<job>-svc` ConfigMap's data: per task `<task>.host` (a line per pod),
    `VC_<TASK>_HOSTS` (comma-separated) and `VC_<TASK>_NUM`."""
    data: dict[str, str] = {}
    for task in _tasks(job):
        tname = str(task.get("name") or "")
        hosts = _hosts(job, task)
        data[f"{_key(tname)}.host"] = "\n".join(hosts)
        data[_env_name(tname, "HOSTS")] = ",".join(hosts)
        data[_env_name(tname, "NUM")] = str(len(hosts))
    return data


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def objects(job: Mapping[str, Any], owner: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, body) of what the job's plugins put beside its pods: svc's, ssh's Secret, ringsconfigmap's."""
    return [*svc_objects(job, owner), *ssh_objects(job, owner), *rings_objects(job, owner)]


def rings_name(job: Mapping[str, Any], flags: Mapping[str, str | int | bool]) -> str:
    m = job.get("metadata") or {}
    return render_name(str(flags["configmap-name-template"]), str(m.get("name") or ""),
                       str(m.get("namespace") or "default"), str(m.get("uid") or ""))  # fmt: skip


def rings_objects(job: Mapping[str, Any], owner: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ringsconfigmap plugin's ConfigMap. Empty without the plugin."""
    flags = plugins_of(job).get("ringsconfigmap")
    if flags is None:
        return []
    ns = str((job.get("metadata") or {}).get("namespace") or "default")
    meta: dict[str, Any] = {"name": rings_name(job, flags), "namespace": ns,
                            "labels": {**RINGS_LABELS, **(json_map(flags["configmap-labels"]) or {})},
                            "ownerReferences": [dict(owner)]}  # fmt: skip
    if annotations := json_map(flags["configmap-annotations"]):
        meta["annotations"] = annotations
    return [("ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                           "data": {**RINGS_DATA, **(json_map(flags["configmap-data"]) or {})}})]  # fmt: skip


def ssh_secret_name(job: Mapping[str, Any]) -> str:
    return f"{_name(job)}-ssh"


def ssh_config(job: Mapping[str, Any]) -> str:
    """The ssh client's config every pod gets: each host of the job by its short name, reached
    at its svc name, with host keys not checked (every pod's sshd makes its own)."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in _tasks(job):
        for host, domain in _host_names(job, task):
            lines += [f"Host {host}", f"  HostName {host}.{domain}"]
    return "\n".join(lines) + "\n"


def ssh_objects(job: Mapping[str, Any], owner: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ssh plugin's Secret without its key pair (added when it is made), unless the flags
    give the pair. Empty without the plugin."""
    flags = plugins_of(job).get("ssh")
    if flags is None:
        return []
    data = {SSH_CONFIG: _b64(ssh_config(job))}
    if flags["ssh-private-key"] and flags["ssh-public-key"]:
        public = str(flags["ssh-public-key"])
        data |= {SSH_PRIVATE: _b64(str(flags["ssh-private-key"])), SSH_PUBLIC: _b64(public),
                 SSH_AUTHORIZED: _b64(public)}  # fmt: skip
    ns = str((job.get("metadata") or {}).get("namespace") or "default")
    return [("Secret", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": ssh_secret_name(job), "namespace": ns, "ownerReferences": [dict(owner)]},
                        "data": dict(sorted(data.items()))})]  # fmt: skip


def with_key_pair(body: Mapping[str, Any], private_pem: str, public_line: str) -> dict[str, Any]:
    """The ssh Secret's body with a key pair added (where `ssh_objects` left it out)."""
    data = dict(body.get("data") or {})
    if SSH_PRIVATE not in data:
        data |= {SSH_PRIVATE: _b64(private_pem), SSH_PUBLIC: _b64(public_line), SSH_AUTHORIZED: _b64(public_line)}
    return {**body, "data": dict(sorted(data.items()))}


def svc_objects(job: Mapping[str, Any], owner: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(kind, body) of what the svc plugin puts beside the pods: ConfigMap, Service, and the
    NetworkPolicy unless disabled. Empty without the plugin."""
    flags = plugins_of(job).get("svc")
    if flags is None:
        return []
    name = _name(job)
    ns = str((job.get("metadata") or {}).get("namespace") or "default")
    selector = {JOB_NAME: name, JOB_NAMESPACE: ns}

    def meta(obj_name: str) -> dict[str, Any]:
        return {"name": obj_name, "namespace": ns, "ownerReferences": [dict(owner)]}

    out: list[tuple[str, dict[str, Any]]] = [
        ("ConfigMap", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(configmap_name(job)),
                       "data": hosts_data(job)}),
        ("Service", {"apiVersion": "v1", "kind": "Service", "metadata": meta(name),
                     "spec": {"clusterIP": "None", "selector": selector,
                              "publishNotReadyAddresses": bool(flags["publish-not-ready-addresses"]),
                              "ports": [{"name": "placeholder-volcano", "port": 1, "protocol": "TCP",
                                         "targetPort": 1}]}}),
    ]  # fmt: skip
    if not flags["disable-network-policy"]:
        out.append(("NetworkPolicy", {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(name),
            "spec": {"podSelector": {"matchLabels": selector},
                     "ingress": [{"from": [{"podSelector": {"matchLabels": selector}}]}],
                     "policyTypes": ["Ingress"]}}))  # fmt: skip
    return out


def _containers(spec: dict[str, Any], inits: bool = True) -> list[dict[str, Any]]:
    return [*(spec.get("containers") or []), *((spec.get("initContainers") or []) if inits else [])]


def _add_env(container: dict[str, Any], *entries: dict[str, Any]) -> None:
    container["env"] = [*(container.get("env") or []), *entries]


def apply_to_pod(pod: dict[str, Any], job: Mapping[str, Any], task: str, index: int) -> None:
    """The plugins' changes to one pod `pod_for` made (in place)."""
    plugins = plugins_of(job)
    spec = pod.setdefault("spec", {})
    for name, flags in plugins.items():  # name order
        if name == "env":
            for c in _containers(spec):
                _add_env(c, {"name": "VK_TASK_INDEX", "value": str(index)},
                         {"name": "VC_TASK_INDEX", "value": str(index)})  # fmt: skip
        elif name == "hcclrank":
            _hccl_rank(pod, job, task, index, flags)
        elif name == "mpi":
            _mpi(spec, job, task, flags)
        elif name == "pytorch":
            _pytorch(spec, job, task, index, flags)
        elif name == "ringsconfigmap":
            _rings(spec, job, flags)
        elif name == "ssh":
            _ssh(spec, job, flags)
        elif name == "svc":
            _svc(pod, job)
        elif name == "tensorflow":
            _tensorflow(spec, job, task, index, flags)


def _open_port(container: dict[str, Any], name: str, port: int) -> None:
    ports = container.get("ports") or []
    if not any(p.get("containerPort") == port for p in ports):
        container["ports"] = [*ports, {"name": name, "containerPort": port}]


def _mpi(spec: dict[str, Any], job: Mapping[str, Any], task: str, flags: Mapping[str, str | int | bool]) -> None:
    master, port = str(flags["master"]), int(flags["port"])
    workers = task_named(job, str(flags["worker"]))
    for c in _containers(spec):
        _open_port(c, MPI_PORT_NAME, port)
        if task == master:
            _add_env(c, {"name": "MPI_HOST", "value": ",".join(_hosts(job, workers) if workers else [])})


def _rings(spec: dict[str, Any], job: Mapping[str, Any], flags: Mapping[str, str | int | bool]) -> None:
    volume = str(flags["volume-name"])
    volumes = spec.get("volumes") or []
    if not any(v.get("name") == volume for v in volumes):
        spec["volumes"] = [*volumes, {"name": volume, "configMap": {"name": rings_name(job, flags)}}]
    for c in _containers(spec):
        mounts = c.get("volumeMounts") or []
        if not any(m.get("name") == volume for m in mounts):
            c["volumeMounts"] = [*mounts, {"name": volume, "mountPath": str(flags["mount-path"])}]


def _ssh(spec: dict[str, Any], job: Mapping[str, Any], flags: Mapping[str, str | int | bool]) -> None:
    secret = ssh_secret_name(job)
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": secret, "secret": {
        "secretName": secret, "defaultMode": SSH_MODE,
        "items": [{"key": k, "path": f".ssh/{k}"} for k in SSH_KEYS]}}]  # fmt: skip
    for c in _containers(spec):
        c["volumeMounts"] = [*(c.get("volumeMounts") or []),
                             {"name": secret, "mountPath": str(flags["ssh-key-file-path"]), "subPath": ".ssh"}]  # fmt: skip


def _tensorflow(spec: dict[str, Any], job: Mapping[str, Any], task: str, index: int,
                flags: Mapping[str, str | int | bool]) -> None:  # fmt: skip
    tasks = _tasks(job)
    if len(tasks) == 1 and int(tasks[0].get("replicas") or 0) == 1:
        return  # one pod: a stand-alone TensorFlow needs no cluster
    port = int(flags["port"])
    roles = {str(flags[r]): r for r in ("ps", "worker", "chief", "evaluator")}
    cluster: dict[str, list[str]] = {}
    for t in tasks:
        role = roles.get(str(t.get("name") or ""))
        if role is not None:
            names = _host_names(job, t)
            count = int(t.get("replicas") or 0)
            # every replica by its address (a template naming its host gives them all that one)
            cluster[role] = [f"{names[min(i, len(names) - 1)][0]}.{names[0][1]}:{port}" for i in range(count)] if names else []
    ordered = {r: cluster[r] for r in ("ps", "worker", "chief", "evaluator") if cluster.get(r)}
    value = json.dumps({"cluster": ordered, "task": {"type": roles.get(task, task), "index": index}},
                       separators=(",", ":"))  # fmt: skip
    for c in _containers(spec, inits=False):
        _add_env(c, {"name": "TF_CONFIG", "value": value})


def _svc(pod: dict[str, Any], job: Mapping[str, Any]) -> None:
    spec = pod["spec"]
    spec["hostname"] = spec.get("hostname") or pod["metadata"]["name"]
    spec["subdomain"] = spec.get("subdomain") or _name(job)
    cm = configmap_name(job)
    for c in _containers(spec):
        for task in _tasks(job):
            tname = str(task.get("name") or "")
            _add_env(c, *({"name": _env_name(tname, what),
                           "valueFrom": {"configMapKeyRef": {"name": cm, "key": _env_name(tname, what)}}}
                          for what in ("HOSTS", "NUM")))  # fmt: skip
        c["volumeMounts"] = [*(c.get("volumeMounts") or []), {"name": cm, "mountPath": HOSTS_MOUNT}]
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": cm, "configMap": {"name": cm}}]


def task_named(job: Mapping[str, Any], task: str) -> Mapping[str, Any] | None:
    """The Job object's task of that name (its raw spec: template, replicas, dependsOn)."""
    return next((t for t in _tasks(job) if str(t.get("name") or "") == task), None)


def _replicas(job: Mapping[str, Any], task: str) -> int | None:
    found = task_named(job, task)
    return None if found is None else int(found.get("replicas") or 0)


def _pytorch(spec: dict[str, Any], job: Mapping[str, Any], task: str, index: int,
             flags: Mapping[str, str | int | bool]) -> None:  # fmt: skip
    master, worker, port = str(flags["master"]), str(flags["worker"]), int(flags["port"])
    found = task_named(job, master)
    if found is None:
        return  # no master task: nothing to rendezvous at (admission warned)
    masters = int(found.get("replicas") or 0)
    tspec = (found.get("template") or {}).get("spec") or {}
    address = f"{tspec.get('hostname') or f'{_name(job)}-{master}-0'}.{tspec.get('subdomain') or _name(job)}"
    world = masters + (_replicas(job, worker) or 0)
    env: list[dict[str, Any]] = [{"name": "MASTER_ADDR", "value": address},
                                 {"name": "MASTER_PORT", "value": str(port)},
                                 {"name": "WORLD_SIZE", "value": str(world)}]  # fmt: skip
    if task == master:
        env.append({"name": "RANK", "value": "0"})
    elif task == worker:
        env.append({"name": "RANK", "value": str(index + 1)})
    for c in _containers(spec, inits=False):
        _add_env(c, *env)
        _open_port(c, PYTORCH_PORT_NAME, port)


def _hccl_rank(pod: dict[str, Any], job: Mapping[str, Any], task: str, index: int,
               flags: Mapping[str, str | int | bool]) -> None:  # fmt: skip
    annotations = pod["metadata"].setdefault("annotations", {})
    if annotations.get(RANK_ANNOTATION):
        return
    for c in _containers(pod["spec"], inits=False):
        literal = next((e.get("value") for e in c.get("env") or [] if e.get("name") == "RANK" and e.get("value")), None)
        if literal is not None:
            annotations[RANK_ANNOTATION] = str(literal)
            return
    if task == flags["master"]:
        annotations[RANK_ANNOTATION] = str(index)
    elif task == flags["worker"]:
        annotations[RANK_ANNOTATION] = str((_replicas(job, str(flags["master"])) or 0) + index)
