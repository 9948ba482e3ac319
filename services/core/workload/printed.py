"""A printed object applied again: `tessera get -o yaml|json` prints each object with its
whole admitted spec, from the object text the log keeps beside the admitted spec
(`JobSubmitted.manifest`), and `tessera apply` of that output is the same object — `unchanged`,
as `kubectl get -o yaml | kubectl apply -f -` is.

What a printed pod carries beyond what its user applied, and what admission therefore reads
as not the user's: `tessera.io/devices` (the cards it holds, Tessera's own status), and the
`scheduling.k8s.io/group-name: podgroup-<uid>` Volcano's podgroup controller writes into a pod
it made a PodGroup for (the pod's implied group: no PodGroup object of that name is applied).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

#: the cards a pod holds, as `tessera get` writes them into its annotations
DEVICES = "tessera.io/devices"
#: the annotation that names a pod's PodGroup, and the prefix of an implied group's name
GROUP_NAME = "scheduling.k8s.io/group-name"
IMPLIED_GROUP = "podgroup-"


def manifest_text(docs: Sequence[Mapping[str, Any]]) -> str:
    """The objects as the log keeps them (compact JSON: one object, or a PodGroup and its pods
    as a list), without their status — the cluster's, not what the user wrote."""
    kept = [{k: v for k, v in doc.items() if k != "status"} for doc in docs]
    body: object = kept[0] if len(kept) == 1 else kept
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)


def manifest_docs(text: str) -> list[dict[str, Any]]:
    """`manifest_text`'s objects again (none for a log that kept no text, or an unreadable one)."""
    if not text:
        return []
    try:
        body = json.loads(text)
    except ValueError:
        import yaml  # a manifest written by hand (YAML) into an older log

        try:
            body = yaml.safe_load(text)
        except yaml.YAMLError:
            return []
    items = body if isinstance(body, list) else [body]
    return [d for d in items if isinstance(d, dict)]


def without_devices(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod without the `tessera.io/devices` annotation `get` wrote (the doc itself when it
    has none)."""
    return _without(doc, DEVICES) if DEVICES in _annotations(doc) else doc


def implied_group(doc: Mapping[str, Any]) -> str:
    """The `podgroup-…` name a pod's group annotation gives, else ""."""
    group = str(_annotations(doc).get(GROUP_NAME) or "")
    return group if group.startswith(IMPLIED_GROUP) else ""


def without_group(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod without its group annotation: a live pod's own implied group, printed by `get`
    as the podgroup controller writes it, is no PodGroup object the pod joins."""
    return _without(doc, GROUP_NAME)


def _annotations(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = doc.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def _without(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    out = dict(doc)
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {k: v for k, v in _annotations(doc).items() if k != key}
    if not meta["annotations"]:
        del meta["annotations"]
    out["metadata"] = meta
    return out


def spec_of(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of an object's `spec` mapping ({} when it has none)."""
    spec = doc.get("spec") if isinstance(doc, Mapping) else None
    return copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else {}
