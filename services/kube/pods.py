"""A Kubernetes Pod ↔ the log: which job and task it is, the manifest admission reads, the task
events its phase means, and the binding (with HAMi's annotations) that places it. Pure.

A pod belongs to the PodGroup its `scheduling.k8s.io/group-name` (or Volcano's) annotation names;
a pod the job controller created belongs to its Volcano Job; without either it is its own
implied one-pod group named after the pod (volcano.md §1.4), and its
task is the pod itself, so the pod name is the task name in every event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contracts import hami
from contracts.devices import CardSpec, MigInstance
from contracts.events import OtherPods, SliceAssignment, TaskFinished, TaskPlacement, TaskStarted
from contracts.workloads import DeviceRequest, HostPort, TaskSpec
from services.core.devices import mig, registration
from services.core.scheduling import gates
from services.core.scheduling.resources import pod_request, sidecar
from services.core.workload import fields, quantity
from services.core.workload.admission import GROUP_NAME, GROUP_NAME_VOLCANO
from services.core.workload.hostports import host_ports
from services.core.workload.initdevices import covers
from services.core.workload.podaffinity import pod_affinity
from services.core.workload.podgroups import (
    POD_UID,  # task annotation: the pod a task was admitted from
)
from services.kube import volcano

#: the kubelet's reason for a pod whose device plugin refused Allocate
ALLOCATE_FAILED = "UnexpectedAdmissionError"
#: a `BindingFailed.reason` when the API server had no pod of that name (404): admission reads
#: the pod again and ends a standalone pod's job whose pod is gone (podsource `_pod_gone`)
POD_NOT_FOUND = "pod not found"
#: a `BindingFailed.reason` when the API server had another pod of that name (409, the binding's
#: uid precondition failed: deleted and made again): read again as for `POD_NOT_FOUND`
POD_REPLACED = "another pod under its name (uid precondition failed)"


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    job: str  # the PodGroup, or the pod's own name for an implied group
    grouped: bool  # True when an explicit PodGroup annotation names the job


def ref(obj: Mapping[str, Any], jobs: bool = True) -> PodRef:
    """A pod the job controller created for a Volcano Job belongs to that Job (its job in the
    log), not to the PodGroup `<job>-<uid>` its annotation names. With `jobs` False (beside a
    Volcano that stays: `volcano.replaces_volcano`) Volcano's controller made it and the Job is
    not in the log: the pod is its PodGroup's, as an operator's pod is."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    owner = volcano.owner_job(obj) if jobs else None
    group = owner[0] if owner else annotations.get(GROUP_NAME) or annotations.get(GROUP_NAME_VOLCANO) or ""
    name = str(meta.get("name") or "")
    return PodRef(str(meta.get("namespace") or "default"), name, str(meta.get("uid") or ""),
                  str(group) or name, bool(group))  # fmt: skip


def scheduler_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("schedulerName") or "default-scheduler")


def node_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


def phase(obj: Mapping[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or "Pending")


def seq_annotation(obj: Mapping[str, Any], key: str) -> int | None:
    """A log sequence Tessera stamped on the pod (`volcano.PLACEMENT`, `volcano.MADE_AFTER`)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def stop_concerns(obj: Mapping[str, Any], seq: int) -> bool:
    """Whether a stop the log asked for at `seq` is about this pod, and not a later one under
    the same name: a pod bound for a later commit, or made by the job controller after reading
    the stop, is the task's next run (a restarted gang's pod must survive the restart's
    eviction handled late)."""
    bound = seq_annotation(obj, volcano.PLACEMENT)
    made = seq_annotation(obj, volcano.MADE_AFTER)
    return not ((bound is not None and bound > seq) or (made is not None and made >= seq))


def _quantities(raw: object) -> dict[str, int]:
    out: dict[str, int] = {}
    if not isinstance(raw, Mapping):
        return out
    for name, value in raw.items():
        try:
            out[str(name)] = quantity.to_units(str(name), value)
        except (ValueError, ArithmeticError):
            continue  # the API server validated it; a form we cannot read counts as 0
    return out


def requests_of(obj: Mapping[str, Any]) -> dict[str, int]:
    """What a bound pod holds of its node, as kube-scheduler's NodeInfo counts it
    (`pod_request`: containers — a missing request defaults to its limit — sidecars, init
    containers, pod-level resources, overhead); `pods` 1. Units: cpu milli, memory MiB, other
    resources milli."""
    spec = obj.get("spec") or {}

    def asks(c: Mapping[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        return {**_quantities(res.get("limits")), **_quantities(res.get("requests"))}

    inits = spec.get("initContainers") or []
    pod = spec.get("resources") or {}
    total = pod_request(map(asks, spec.get("containers") or []), map(asks, inits),
                        _quantities(spec.get("overhead")), sidecars=[sidecar(c) for c in inits],
                        pod_requests=_quantities(pod.get("requests")), pod_limits=_quantities(pod.get("limits")))  # fmt: skip
    total["pods"] = 1
    return total


def other_pods(obj: Mapping[str, Any]) -> OtherPods:
    """What inter-pod affinity, topology spread and NodePorts read of another scheduler's pod:
    namespace, labels, its own affinity terms (read as admission reads Tessera's; a term the
    API server would refuse is left out) and the host ports it holds on its node."""
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    spec = obj.get("spec") or {}
    affinity = spec.get("affinity")
    terms, _ = pod_affinity(affinity if isinstance(affinity, Mapping) else {}, "spec.affinity", ns, labels)
    return OtherPods(namespace=ns, labels=labels, pod_affinity=terms, host_ports=used_host_ports(spec))


def used_host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a bound pod holds on its node, as kube-scheduler's NodeInfo counts them
    (`GetHostPorts`: app containers and the init containers that run as long as the pod,
    `restartPolicy: Always` sidecars; a plain init container has ended before the pod runs),
    with the API server's defaults (TCP, hostIP 0.0.0.0). Sorted, so that equal pods group."""
    inits = [c for c in spec.get("initContainers") or []
             if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"]  # fmt: skip
    ports, _ = host_ports({**spec, "initContainers": inits}, "spec")
    return tuple(sorted(set(ports), key=lambda p: (p.protocol, p.ip, p.port)))


def holds_node(obj: Mapping[str, Any]) -> bool:
    """Bound and not terminal: its requests count on its node (a terminating pod's too, until
    it is gone)."""
    return bool(node_name(obj)) and phase(obj) not in ("Succeeded", "Failed")


def terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


#: kube-scheduler's words for a pod held back by `spec.schedulingGates` (PodScheduled=False)
GATED_REASON, GATED_MESSAGE = gates.GATED_REASON, gates.GATED_MESSAGE


def gated(obj: Mapping[str, Any]) -> bool:
    """Unbound with scheduling gates left: kube-scheduler does not try it, and the API server
    refuses its binding (409) until whoever owns the gates has removed every one. Gates can
    only be removed after creation, so a pod once seen ungated never becomes gated again."""
    return not node_name(obj) and bool((obj.get("spec") or {}).get("schedulingGates"))


def _prune(obj: object, schema: object) -> object:
    """Keep only what the schema knows: the API server adds fields admission has no rule for
    (managedFields, status details, newer API fields) and strict validation must not see them."""
    if schema == fields.FREE or obj is None:
        return obj
    if isinstance(schema, list):
        return [_prune(x, schema[0]) for x in obj] if isinstance(obj, list) else obj
    if isinstance(schema, dict) and isinstance(obj, dict):
        return {k: _prune(v, schema[k]) for k, v in obj.items() if k in schema}
    return obj


def manifest(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Pod as `tessera apply` would read it from a file: what admission judges."""
    doc: dict[str, Any] = _prune(dict(obj), fields.POD)  # type: ignore[assignment]
    doc["apiVersion"], doc["kind"] = "v1", "Pod"
    meta = dict(doc.get("metadata") or {})
    for noise in ("managedFields", "resourceVersion", "generation", "selfLink", "creationTimestamp"):
        meta.pop(noise, None)
    if meta.get("uid"):
        meta["annotations"] = {**(meta.get("annotations") or {}), POD_UID: str(meta["uid"])}
    if not ref(obj).grouped:  # a pod of its own is its job: it arrived when it was made
        meta["annotations"] = volcano.with_arrival(meta.get("annotations") or {}, obj)
    doc["metadata"] = meta
    st = obj.get("status") or {}
    # a bound pod's phase says whether it holds its node (Running, or Pending while its images
    # are pulled — minutes for an NPU training image) or held it (Succeeded, Failed): without
    # one admission reads a pod that claims a node it was never given, and refuses it
    doc["status"] = {"phase": st["phase"]} if st.get("phase") and node_name(obj) else {}
    if not node_name(obj):
        (doc.get("spec") or {}).pop("nodeName", None)
    return doc


def exit_code(obj: Mapping[str, Any]) -> tuple[int, str]:
    """The first non-zero container exit code and its reason (kubelet's terminated state)."""
    for cs in (obj.get("status") or {}).get("containerStatuses") or []:
        term = ((cs.get("state") or {}).get("terminated")) or {}
        if term and int(term.get("exitCode") or 0) != 0:
            return int(term["exitCode"]), str(term.get("reason") or "Error")
    st = obj.get("status") or {}
    return (0, "") if phase(obj) == "Succeeded" else (1, str(st.get("reason") or "Failed"))


def task_event(obj: Mapping[str, Any], now: float) -> TaskStarted | TaskFinished | None:
    """What the pod's phase says about its task (None while Pending/Unknown or unbound).

    A Pending pod whose device plugin refused Allocate (`hami.io/bind-phase: failed`) has
    failed already: the kubelet rejects its admission (`UnexpectedAdmissionError`), and its
    slices are freed without waiting for that status write."""
    r, node, ph = ref(obj), node_name(obj), phase(obj)
    if not node:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if ph == "Pending" and annotations.get(hami.BIND_PHASE) == "failed":
        return TaskFinished(namespace=r.namespace, name=r.job, task=r.name, node=node, exit_code=1,
                            reason=ALLOCATE_FAILED, at=now)  # fmt: skip
    if ph == "Running":
        return TaskStarted(namespace=r.namespace, name=r.job, task=r.name, node=node, at=now)
    if ph in ("Succeeded", "Failed"):
        code, reason = exit_code(obj)
        return TaskFinished(namespace=r.namespace, name=r.job, task=r.name, node=node,
                            exit_code=code, reason=reason if code else "", at=now)  # fmt: skip
    return None


# --- binding ---------------------------------------------------------------------------------


def _container_devices(placement: TaskPlacement, task: TaskSpec | None,
                       cards: Mapping[str, CardSpec],
                       mig_out: list[tuple[int, int, str, MigInstance]] | None = None,
                       ) -> dict[str, list[list[hami.PodDevice]]]:  # fmt: skip
    """Slices → per vendor, one device list per container slot (init containers first, empty).

    The scheduler's fit returns slices in request order, `count` per request; each request
    knows its container. A MIG slice's instance goes to `mig_out` as (container slot, device
    index in it, card, instance): HAMi's `EncodeMigAllocations` indexes the same lists."""
    containers = task.containers if task else 1
    inits = task.init_containers if task else 0
    requests = task.devices if task else ()
    request_of_slice: list[DeviceRequest] = []
    for req in requests:
        request_of_slice.extend([req] * max(1, req.count))
    out: dict[str, list[list[hami.PodDevice]]] = {}

    def put(a: SliceAssignment, slot_of: Callable[[int], int], memory: int, cores: int) -> None:
        spec = cards.get(a.card)
        if spec is not None and registration.is_plugin(spec):
            return  # the vendor's own plugin serves it: no HAMi plugin reads annotations for it
        word = spec.type if spec else ""
        vendor = spec.vendor if spec else "huawei"
        key = hami.NVIDIA_TO_ALLOCATE if vendor == "nvidia" else hami.ascend_to_allocate_key(word)
        slots = out.setdefault(key, [[] for _ in range(inits + max(containers, 1))])
        dev_type = "NVIDIA" if vendor == "nvidia" else word
        at = min(slot_of(len(slots)), len(slots) - 1)
        slot = slots[at]
        if mig_out is not None and a.slice.mig and vendor == "nvidia":
            mig_out.append((at, len(slot), a.card, a.slice.mig[0]))
        slot.append(hami.PodDevice(a.card, dev_type, memory, cores))

    for i, a in enumerate(placement.slices):
        container = request_of_slice[i].container if i < len(request_of_slice) else 0
        put(a, lambda _n, c=container: inits + c, a.slice.memory, a.slice.cores)
    # an init container the app containers' slices hold booked nothing of its own, but the
    # kubelet calls Allocate for it, and HAMi's plugin takes the first slot with devices: left
    # empty, it took the app container's, whose own Allocate then found none ("no devices left")
    for init in task.init_devices if task else ():
        held = [a for i, a in enumerate(placement.slices)
                if i < len(request_of_slice) and request_of_slice[i].container >= 0
                and covers(request_of_slice[i], init)]  # fmt: skip
        for a in held[:init.count]:
            put(a, lambda _n, c=init.container: c, init.memory or a.slice.memory, init.cores or a.slice.cores)
    return out


def hami_slices(placement: TaskPlacement, cards: Mapping[str, CardSpec]) -> bool:
    """The placement books a card HAMi's device plugin serves (registered), so the binding
    carries HAMi's annotations and takes its node lock; whole cards of the vendor's own plugin
    alone need neither (nothing would release the lock or flip the bind phase)."""
    return any(not ((spec := cards.get(a.card)) is not None and registration.is_plugin(spec))
               for a in placement.slices)  # fmt: skip


def binding_annotations(placement: TaskPlacement, task: TaskSpec | None,
                        cards: Mapping[str, CardSpec], now: float) -> dict[str, str]:  # fmt: skip
    """HAMi's pod annotations for a placement (hami.md §2.5, §3.2), so its device plugins find
    the pod in `Allocate` and serve exactly these cards: node, times, bind phase, the devices to
    allocate / allocated per vendor, and Ascend's RuntimeInfo. Cards of the vendor's own plugin
    (`mode: plugin`) get none: the kubelet and that plugin choose the device, and no HAMi plugin
    would answer the bind phase (`hami_slices`)."""
    if not hami_slices(placement, cards):
        return {}
    ts = str(int(now))
    out = {hami.VGPU_NODE: placement.node, hami.VGPU_TIME: ts, hami.BIND_PHASE: "allocating",
           hami.BIND_TIME: ts}  # fmt: skip
    ascend = False
    mig_entries: list[tuple[int, int, str, MigInstance]] = []
    for key, slots in _container_devices(placement, task, cards, mig_entries).items():
        value = hami.encode_pod_devices(slots)
        out[key] = value
        allocated = key.replace("-to-allocate", "-allocated")
        out[allocated] = value
        if key != hami.NVIDIA_TO_ALLOCATE:
            ascend = True
            word = key[len("hami.io/"):-len("-devices-to-allocate")]
            devices = [d for slot in slots for d in slot]
            templates = {a.card: a.slice.template or "" for a in placement.slices}
            out[f"huawei.com/{word}"] = hami.encode_runtime_info(devices, templates)
    if ascend:
        out[hami.PREDICATE_TIME] = ts
    if mig_entries:  # HAMi's plugin carves exactly these instances (PatchAnnotations)
        out[mig.MIG_ALLOCATIONS] = mig.allocations_annotation(mig_entries)
    return out


def binding(namespace: str, pod: str, uid: str, node: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    """A `pods/binding` body; the uid makes the API server refuse a pod recreated under the
    same name since the decision was made."""
    meta: dict[str, Any] = {"name": pod, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
