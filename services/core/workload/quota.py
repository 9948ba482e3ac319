"""A ResourceQuota (v1) → the `QuotaChanged` sessions read: one translation for the manifests of
`tessera apply` / `tessera simulate` and for the objects the API server lists
(services/kube/quotasource.py), so all three hold jobs on the same facts.

`spec.hard` is the limit; `status.used` is taken only from the API server (`with_status`):
kubectl apply never writes a status, and in a workload there is no API server to have counted
anything. A bad quantity is refused naming its key, as the API server's validation does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.events import QuotaChanged
from services.core.scheduling.quota import base_name
from services.core.workload.fields import FREE, METADATA, Schema
from services.core.workload.quantity import QuantityError, capacity_units, to_units
from services.core.workload.rejection import Rejection

QUOTA_KIND = ("v1", "ResourceQuota")
#: strict fields: a mistyped `spec.hrad` must be an error, not a quota silently without limits
QUOTA_KINDS: dict[tuple[str, str], Schema] = {
    QUOTA_KIND: {"apiVersion": FREE, "kind": FREE, "metadata": METADATA, "status": FREE,
                 "spec": {"hard": FREE, "scopes": FREE, "scopeSelector": FREE}},
}  # fmt: skip


def _amounts(
    raw: object, path: str, kind_name: tuple[str, str], errors: list[Rejection], limit: bool = False
) -> dict[str, int]:
    """`limit`: amounts that hold asks (`spec.hard`), byte amounts rounded down (`capacity_units`)."""
    ns, name = kind_name
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(Rejection("ResourceQuota", ns, name, path, repr(raw)[:64],
                                "must be a map of resource name to quantity"))  # fmt: skip
        return {}
    out: dict[str, int] = {}
    for key, value in raw.items():
        try:
            units = (capacity_units if limit else to_units)(base_name(str(key)), value)
        except QuantityError as exc:
            errors.append(
                Rejection("ResourceQuota", ns, name, f"{path}[{key}]", str(value)[:64], str(exc))
            )
            continue
        if units < 0:
            errors.append(
                Rejection("ResourceQuota", ns, name, f"{path}[{key}]", str(value), "must be >= 0")
            )
            continue
        out[str(key)] = units
    return out


def quota_event(
    obj: Mapping[str, Any], with_status: bool
) -> tuple[QuotaChanged | None, list[Rejection]]:
    """The event for one ResourceQuota, or the rules it breaks."""
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    errors: list[Rejection] = []
    if not isinstance(spec, Mapping):
        return None, [Rejection("ResourceQuota", ns, name, "spec", "", "must be a map")]
    hard = _amounts(spec.get("hard"), "spec.hard", (ns, name), errors, limit=True)
    status = obj.get("status") or {}
    used = _amounts(status.get("used"), "status.used", (ns, name), errors) if with_status else {}
    if errors:
        return None, errors
    scoped = bool(spec.get("scopes") or spec.get("scopeSelector"))
    return QuotaChanged(namespace=ns, name=name, hard=hard, used=used, scoped=scoped), []
