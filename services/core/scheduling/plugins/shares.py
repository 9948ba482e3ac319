"""Queue resource vectors shared by `proportion` and `capacity`: float dimensions keyed by name,
with Volcano's 0.1 epsilon (`minResource`) for emptiness and the Zero/Infinity conventions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.core.scheduling.model import NodeInfo
from services.core.scheduling.resources import Resource

EPS = 0.1
Vec = dict[str, float]
INF = float("inf")


def vec(r: Resource | Mapping[str, int]) -> Vec:
    items = r.to_map().items() if isinstance(r, Resource) else r.items()
    return {k: float(v) for k, v in items if k != "pods"}


def add(a: Vec, b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def sub(a: Vec, b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) - v
    return out


def le(a: Mapping[str, float], b: Mapping[str, float], dims: Iterable[str] | None = None,
       missing: float = 0.0) -> bool:  # fmt: skip
    """a ≤ b on `dims` (default: a's non-zero dims); a dim missing in b counts as `missing`."""
    keys = dims if dims is not None else [k for k, v in a.items() if v > 0]
    return all(a.get(k, 0.0) <= b.get(k, missing) + EPS for k in keys)


def empty(a: Mapping[str, float]) -> bool:
    return all(v < EPS for v in a.values())


def device_totals(nodes: Iterable[NodeInfo]) -> Vec:
    """Cluster device counts under their Kubernetes resource names (milli), for queue shares."""
    out: Vec = {}
    for n in nodes:
        for c in n.cards:
            name = card_resource(c.spec.type)
            out[name] = out.get(name, 0.0) + 1000.0
    return out


def card_resource(card_type: str) -> str:
    if card_type.startswith("NVIDIA"):
        return "nvidia.com/gpu"
    if card_type.startswith("Ascend"):
        return f"huawei.com/{card_type}"
    return card_type
