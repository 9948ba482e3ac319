"""What a real API server keeps of a custom object: fields its CRD's structural schema does not
declare are dropped on every write ("field pruning"), unless the node says
`x-kubernetes-preserve-unknown-fields`. kmock keeps everything, so a status field Volcano's CRD
lacks would look written in tests and vanish on a cluster (and a writer comparing what it wants
with what it reads would write it again for ever). The harness prunes as the server does, with
the chart's CRDs (written from Volcano's field tables).

It defaults as the server does too: a field the schema gives a `default` is set to it wherever the
object lacks it (or holds null) once the object is decoded — a create's body, an update's or a
patch's result — so what is stored, listed and watched holds it. kmock stored the object as
sent, so code reading "no `spec.queue`" as "not set" passed here and never saw that case on a
cluster, where the PodGroup CRD's `queue: default` fills it before any webhook or reader does."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "tessera" / "files" / "crds"
#: kept whatever the schema says: the API server handles them itself
TOP_LEVEL = ("apiVersion", "kind", "metadata")


@cache
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, plural) → the served version's openAPIV3Schema."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v.get("served", True)]
        out[(crd["spec"]["group"], crd["spec"]["names"]["plural"])] = version["schema"]["openAPIV3Schema"]
    return out


def prune(value: Any, schema: dict[str, Any], top: bool = False) -> Any:
    """`value` as the API server stores it under `schema`."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, sub in value.items():
            if top and key in TOP_LEVEL:
                out[key] = sub
            elif props is not None and key in props:
                out[key] = prune(sub, props[key])
            elif isinstance(extra, dict):
                out[key] = prune(sub, extra)
            elif extra is True:
                out[key] = sub
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"]) for v in value]
    return value


def pruned_object(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A new object (the same when the kind is not a custom one of the chart)."""
    schema = schemas().get((group, plural))
    return dict(obj) if schema is None else prune(obj, schema, top=True)


def pruned_status(group: str, plural: str, status: dict[str, Any]) -> dict[str, Any]:
    """A status as the object would keep it."""
    return pruned_object(group, plural, {"status": status}).get("status", {})


def default(value: Any, schema: dict[str, Any]) -> None:
    """`schema`'s defaults set in `value`, in place, as apiextensions' structural defaulting does:
    an object's absent (or null) property with a `default` takes a copy of it, then every
    property it holds — those just set included — is defaulted by its own schema, as are a
    list's items and a map's values."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if "default" in sub and value.get(key) is None:
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                default(sub, props[key])
            elif isinstance(extra, dict):
                default(sub, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])


def defaulted_object(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of `obj` with its CRD's defaults (the same when the kind is not a custom one of the
    chart): the object as the API server stores it."""
    schema = schemas().get((group, plural))
    out = copy.deepcopy(obj)
    if schema is not None:
        default(out, schema)
    return out


def additions(before: Any, after: Any) -> Any:
    """What `after` (the defaulted object) adds to `before`, as a merge patch: keys it lacks, or
    holds null; a list changed within, whole (a merge patch replaces a list)."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return after if before != after else None
    out = {}
    for key, value in after.items():
        if before.get(key) is None:
            out[key] = value
        elif isinstance(value, dict) and isinstance(before[key], dict):
            if (sub := additions(before[key], value)):
                out[key] = sub
        elif value != before[key]:
            out[key] = value
    return out
