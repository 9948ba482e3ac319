"""PersistentVolumeClaims, PersistentVolumes and StorageClasses → the events sessions read
(`ClaimChanged`, `VolumeChanged`, `StorageClassChanged`): one translation for the manifests of
`tessera simulate` and for the objects the API server lists (services/kube/volumesource.py), so
both decide on the same facts. A pod's own claims are `pod_claims` (`spec.volumes[]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.events import ClaimChanged, StorageClassChanged, VolumeChanged
from contracts.workloads import LabelRequirement
from services.core.scheduling.storage import SELECTED_NODE, TOPOLOGY_LABELS
from services.core.workload.fields import FREE, METADATA, Schema

#: (apiVersion, kind) → strict field schema (spec and status are the API server's to check)
STORAGE_KINDS: dict[tuple[str, str], Schema] = {
    ("v1", "PersistentVolumeClaim"): {"apiVersion": FREE, "kind": FREE, "metadata": METADATA,
                                      "spec": FREE, "status": FREE},
    ("v1", "PersistentVolume"): {"apiVersion": FREE, "kind": FREE, "metadata": METADATA,
                                 "spec": FREE, "status": FREE},
    ("storage.k8s.io/v1", "StorageClass"): {**{k: FREE for k in (
        "apiVersion", "kind", "provisioner", "parameters", "reclaimPolicy", "mountOptions",
        "allowVolumeExpansion", "volumeBindingMode", "allowedTopologies")}, "metadata": METADATA},
}  # fmt: skip

Storage = ClaimChanged | VolumeChanged | StorageClassChanged


def pod_claims(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The claims a pod spec names (`volumes[].persistentVolumeClaim.claimName`), each once."""
    names: dict[str, None] = {}
    for v in spec.get("volumes") or []:
        pvc = v.get("persistentVolumeClaim") if isinstance(v, Mapping) else None
        name = str((pvc or {}).get("claimName") or "") if isinstance(pvc, Mapping) else ""
        if name:
            names[name] = None
    return tuple(names)


def _node_terms(spec: Mapping[str, Any]) -> tuple[tuple[LabelRequirement, ...], ...]:
    required = (spec.get("nodeAffinity") or {}).get("required") or {}
    return tuple(
        tuple(LabelRequirement(key=str(e.get("key") or ""), operator=str(e.get("operator") or ""),
                               values=tuple(str(v) for v in e.get("values") or []))
              for e in term.get("matchExpressions") or [])
        for term in required.get("nodeSelectorTerms") or []
    )  # fmt: skip


def storage_event(obj: Mapping[str, Any]) -> Storage | None:
    """The event for one storage object (None: not a storage kind)."""
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "PersistentVolumeClaim":
        annotations = meta.get("annotations") or {}
        return ClaimChanged(
            namespace=str(meta.get("namespace") or "default"), name=name,
            storage_class=str(spec.get("storageClassName") or ""), volume=str(spec.get("volumeName") or ""),
            phase=str(status.get("phase") or "Pending"), selected_node=str(annotations.get(SELECTED_NODE) or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            access_modes=tuple(str(m) for m in spec.get("accessModes") or [] if isinstance(m, str)),
        )  # fmt: skip
    if kind == "PersistentVolume":
        labels = meta.get("labels") or {}
        return VolumeChanged(name=name, node_affinity=_node_terms(spec),
                             storage_class=str(spec.get("storageClassName") or ""),
                             phase=str(status.get("phase") or ""),
                             topology={k: str(labels[k]) for k in TOPOLOGY_LABELS if k in labels})  # fmt: skip
    if kind == "StorageClass":
        topologies = tuple(
            tuple(LabelRequirement(key=str(e.get("key") or ""), operator="In",
                                   values=tuple(str(v) for v in e.get("values") or []))
                  for e in term.get("matchLabelExpressions") or [])
            for term in obj.get("allowedTopologies") or [] if isinstance(term, Mapping)
        )  # fmt: skip
        return StorageClassChanged(name=name, binding_mode=str(obj.get("volumeBindingMode") or "Immediate"),
                                   provisioner=str(obj.get("provisioner") or ""),
                                   allowed_topologies=topologies)  # fmt: skip
    return None
