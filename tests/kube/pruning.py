"""What a real API server keeps of a custom object: fields its CRD's structural schema does not
declare are dropped on every write ("field pruning"), unless the node says
`x-kubernetes-preserve-unknown-fields`. kmock keeps everything, so a status field Volcano's CRD
lacks would look written in tests and vanish on a cluster (and a writer comparing what it wants
with what it reads would write it again for ever). The harness prunes as the server does, with
the chart's CRDs (written from Volcano's field tables)."""

from __future__ import annotations

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
