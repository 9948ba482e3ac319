"""Namespaces (`v1`) → `NamespaceChanged`: the one translation for `tessera apply`, `tessera
simulate` and the API server's objects (services/kube/podsource.py), so every path decides on
the same labels. The labels are read — what a pod affinity term's `namespaceSelector`
selects (services/core/scheduling/interpod.py) — and one annotation, `scheduling.volcano.sh/
queue-name`: the queue Volcano's PodGroup mutating webhook gives a PodGroup made there without
one. The API server gives every namespace the label `kubernetes.io/metadata.name` with its name
(over any other value given); so does this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.events import NamespaceChanged
from services.core.workload import names
from services.core.workload.fields import FREE, METADATA, Schema
from services.core.workload.podaffinity import Problem
from services.core.workload.rejection import invalid

#: the label every namespace carries, set by the API server to the namespace's name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: a namespace's default queue for the PodGroups made in it (admission's `QUEUE_NAME`)
NAMESPACE_QUEUE = "scheduling.volcano.sh/queue-name"

NAMESPACE: Schema = {"apiVersion": FREE, "kind": FREE, "metadata": METADATA, "spec": FREE,
                     "status": FREE}  # fmt: skip
NAMESPACE_KINDS: dict[tuple[str, str], Schema] = {("v1", "Namespace"): NAMESPACE}


def namespace_labels(name: str, labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """A namespace's labels as the API server holds them (its name label always there)."""
    return {**(labels or {}), NAMESPACE_NAME_LABEL: name}


def namespace_event(doc: Mapping[str, Any]) -> tuple[NamespaceChanged | None, list[Problem]]:
    """The Namespace's event, or the problems that refuse it (field path, rule): its name a
    DNS-1123 label, its labels qualified names with valid values, as the API server checks;
    the name label set to its name, as the API server sets it."""
    problems: list[Problem] = []
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    for err in names.dns1123_label(name):
        problems.append(("metadata.name", invalid(name, err)))
    raw = meta.get("labels") if isinstance(meta, Mapping) else None
    labels: dict[str, str] = {}
    if raw is not None and not isinstance(raw, Mapping):
        problems.append(("metadata.labels", invalid(raw, "must be a map of strings")))
        raw = {}
    for k, v in (raw or {}).items():
        key, value = str(k), "" if v is None else str(v)
        for err in names.qualified_name(key):
            problems.append(("metadata.labels", invalid(key, err)))
        for err in names.label_value(value):
            problems.append((f"metadata.labels[{key}]", invalid(value, err)))
        labels[key] = value
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    queue = annotations.get(NAMESPACE_QUEUE) if isinstance(annotations, Mapping) else None
    if problems:
        return None, problems
    return NamespaceChanged(
        name=name, labels=namespace_labels(name, labels), queue=str(queue or "")
    ), []
