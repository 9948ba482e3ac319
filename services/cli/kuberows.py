"""Kubernetes objects → the rows `tessera get` prints, field for field the records it prints
from the log (issue 14, item 5: the same tables and `-o json|yaml` with `--kubeconfig`).

Pure: objects in (as the API server returns them), rows out. Status is read as Volcano writes
it (volcano.md §1): Queue `status.state` and `status.allocated`, PodGroup `status.phase` and its
`Unschedulable` condition, Job `status.state.phase`; a pod's cards from HAMi's
`hami.io/*-devices-allocated` annotations and the node's register annotation. Amounts become the
core's units (`quantity.to_units`), so `tables.amounts` prints both sources alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts import hami
from services.core.scheduling.resources import is_plain_extended
from services.core.workload.quantity import QuantityError, to_units

Obj = Mapping[str, Any]
#: A pod of the default scheduler is not Tessera's (nor Volcano's) to list.
DEFAULT_SCHEDULER = "default-scheduler"
#: A device resource's companions name the card of their count resource.
COMPANION_SUFFIXES = ("-memory-percentage", "-memory", "-core")


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def units(resources: Mapping[str, Any] | None) -> dict[str, int]:
    """A ResourceList in the core's units; a value that is no quantity is left out (the API
    server's schema refuses those, so only a lenient server could hold one)."""
    out: dict[str, int] = {}
    for name, raw in sorted((resources or {}).items()):
        try:
            out[name] = to_units(name, raw)
        except QuantityError:
            continue
    return out


def unreported(capability: Iterable[str], allocatable: set[str]) -> list[str]:
    """Device resources of a capability that no node's allocatable names (issue 13, item 5). A
    family name (`huawei.com/Ascend910`) counts when a node reports one of its models
    (`huawei.com/Ascend910B3`); companions (`-memory`, `-core`) as their count resource."""
    out = []
    for name in sorted(capability):
        if "/" not in name or name.startswith("kubernetes.io/"):
            continue
        base = name
        for suffix in COMPANION_SUFFIXES:
            base = base.removesuffix(suffix)
        if name.startswith(("nvidia.com/", "volcano.sh/vgpu")) and not is_plain_extended(name):
            base = "nvidia.com/gpu" if name.startswith("nvidia.com/") else "volcano.sh/vgpu-number"
        if not any(r == base or r.startswith(base) for r in allocatable):
            out.append(name)
    return out


def allocatable_names(nodes: Iterable[Obj]) -> set[str]:
    return {name for n in nodes for name in ((n.get("status") or {}).get("allocatable") or {})}


def queue_row(queue: Obj, allocatable: set[str]) -> dict[str, Any]:
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    row: dict[str, Any] = {
        "name": _meta(queue).get("name", ""), "state": status.get("state") or "",
        "deserved": units(spec.get("deserved")), "allocated": units(status.get("allocated")),
        "reason": "", "weight": spec.get("weight", 1), "parent": spec.get("parent") or "root",
        "capability": units(spec.get("capability")),
        # the PodGroup counts Volcano's queue controller writes (`vcctl queue list`)
        **{k: int(status.get(k) or 0) for k in ("inqueue", "pending", "running", "unknown", "completed")},
    }  # fmt: skip
    missing = unreported(row["capability"], allocatable)
    if missing:
        row["warning"] = f"capability names {', '.join(missing)}, which no node reports"
    return row


def job_row(job: Obj) -> dict[str, Any]:
    meta, state = _meta(job), ((job.get("status") or {}).get("state") or {})
    return {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "kind": "Job",
            "queue": (job.get("spec") or {}).get("queue") or "default",
            "phase": state.get("phase") or "Pending",
            "reason": state.get("message") or state.get("reason") or ""}  # fmt: skip


def podgroup_row(pg: Obj) -> dict[str, Any]:
    """`kind` is what made the gang: the Volcano Job that owns it, else the PodGroup itself."""
    meta, status = _meta(pg), pg.get("status") or {}
    owners = [o.get("kind") for o in meta.get("ownerReferences") or [] if o.get("controller")]
    waiting = [c for c in status.get("conditions") or []
               if c.get("type") == "Unschedulable" and c.get("status") == "True"]  # fmt: skip
    return {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
            "kind": owners[0] if owners else "PodGroup",
            "queue": (pg.get("spec") or {}).get("queue") or "default",
            "phase": status.get("phase") or "Pending",
            "reason": waiting[-1].get("message", "") if waiting else ""}  # fmt: skip


def node_cards(nodes: Iterable[Obj]) -> dict[str, hami.RegisteredDevice]:
    """uuid → card, from every node's HAMi register annotations (unreadable ones skipped)."""
    out: dict[str, hami.RegisteredDevice] = {}
    for n in nodes:
        for key, value in (_meta(n).get("annotations") or {}).items():
            if key == hami.NVIDIA_REGISTER or key.startswith(hami.ASCEND_REGISTER_PREFIX):
                try:
                    out.update((d.uuid, d) for d in hami.decode_register(key, value))
                except hami.CodecError:
                    continue
    return out


def _device(d: hami.PodDevice, card: hami.RegisteredDevice | None, template: str | None) -> dict[str, Any]:
    if template:
        kind = "template"
    elif card is not None and d.memory >= card.devmem:
        kind = "whole"
    else:
        kind = "soft"
    return {"uuid": d.uuid, "type": d.type, "index": card.index if card else -1, "memory": d.memory,
            "cores": d.cores, "template": template, "kind": kind,
            "card_cores": card.devcore if card else 0}  # fmt: skip


def _reason(pod: Obj) -> str:
    status = pod.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    for cs in status.get("containerStatuses") or []:
        code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
        if code:
            return f"exit code {code}"
    return str(status.get("message") or status.get("reason") or "")


def _gated(pod: Obj) -> bool:
    """kubectl's STATUS for a pod kube-scheduler holds back (PodScheduled=False reason
    SchedulingGated, issue 22): `SchedulingGated`, not `Pending`, so a user sees at a glance
    that the pod waits for its gates, not for room."""
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "SchedulingGated"
               for c in (pod.get("status") or {}).get("conditions") or [])  # fmt: skip


def pod_rows(pods: Iterable[Obj], cards: Mapping[str, hami.RegisteredDevice]) -> list[dict[str, Any]]:
    """The batch pods (any scheduler but the default one), sorted as the log's report sorts."""
    rows = []
    for pod in pods:
        meta, spec = _meta(pod), pod.get("spec") or {}
        if spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER:
            continue
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        templates = hami.runtime_templates(annotations)
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        rows.append({
            "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
            "job": labels.get("volcano.sh/job-name") or annotations.get("scheduling.k8s.io/group-name") or "",
            "phase": "Terminating" if meta.get("deletionTimestamp") else "SchedulingGated" if _gated(pod) else phase,
            "node": spec.get("nodeName") or None,
            "devices": [_device(d, cards.get(d.uuid), templates.get(d.uuid))
                        for d in hami.allocated_devices(annotations)],
            "reason": _reason(pod),
        })  # fmt: skip
    return sorted(rows, key=lambda p: (p["namespace"], p["job"], p["name"]))
