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

Volcano iterates a map, so its plugins run in no fixed order; here they run in name order, so
the same Job always gives the same pods (hcclrank thus reads the template's `RANK`, never
pytorch's: with one master the two formulas agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.workload.jobplugins import FLAGS, parse_flags

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
RANK_ANNOTATION = "hccl/rankIndex"
HOSTS_MOUNT = "/etc/volcano"
PYTORCH_PORT_NAME = "pytorchjob-port"


def plugins_of(job: Mapping[str, Any]) -> dict[str, dict[str, str | int | bool]]:
    """The plugins Tessera runs for this Job, with their flags (defaults where admission let a
    problem through: it refuses them, so none reaches here from the log)."""
    raw = (job.get("spec") or {}).get("plugins") or {}
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): parse_flags(str(name), args if isinstance(args, list) else [])[0]
            for name, args in sorted(raw.items()) if str(name) in FLAGS}  # fmt: skip


def _name(job: Mapping[str, Any]) -> str:
    return str((job.get("metadata") or {}).get("name") or "")


def _tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((job.get("spec") or {}).get("tasks") or [])


def _key(task: str) -> str:
    return task.replace("-", "_")


def _env_name(task: str, what: str) -> str:
    return f"VC_{_key(task).upper()}_{what}"


def _hosts(job: Mapping[str, Any], task: Mapping[str, Any]) -> list[str]:
    """Volcano's GenerateHosts: `<hostname or job-task-i>.<subdomain or job>` per replica."""
    spec = (task.get("template") or {}).get("spec") or {}
    name, tname = _name(job), str(task.get("name") or "")
    domain = str(spec.get("subdomain") or name)
    if spec.get("hostname"):
        return [f"{spec['hostname']}.{domain}"]
    return [f"{name}-{tname}-{i}.{domain}" for i in range(int(task.get("replicas") or 0))]


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
        elif name == "pytorch":
            _pytorch(spec, job, task, index, flags)
        elif name == "svc":
            _svc(pod, job)


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
        ports = c.get("ports") or []
        if not any(p.get("containerPort") == port for p in ports):
            c["ports"] = [*ports, {"name": PYTORCH_PORT_NAME, "containerPort": port}]


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
