"""What a node's labels and taints admit of a pod: node selector and required node affinity
(kube-scheduler's NodeAffinity; its preferred terms' score), taints and tolerations (TaintToleration). The predicates plugin
filters with them, and PodTopologySpread asks the same questions of every node to know which
domains count (its nodeAffinityPolicy and nodeTaintsPolicy)."""

from __future__ import annotations

import re

from contracts.workloads import LabelRequirement, TaskSpec, Toleration


def requirement_matches(req: LabelRequirement, labels: dict[str, str]) -> bool:
    has = req.key in labels
    value = labels.get(req.key, "")
    if req.operator == "In":
        return has and value in req.values
    if req.operator == "NotIn":
        return not has or value not in req.values
    if req.operator == "Exists":
        return has
    if req.operator == "DoesNotExist":
        return not has
    if req.operator in ("Gt", "Lt") and has and len(req.values) == 1:
        left, right = go_int(value), go_int(req.values[0])
        if left is None or right is None:
            return False
        return left > right if req.operator == "Gt" else left < right
    return False


_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 2**63


def go_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), which kube's Gt / Lt read both sides with: ASCII
    digits after an optional sign, within int64 — not Python's `int` ("5_0", " 5", "٥")."""
    if not _GO_INT.fullmatch(text):
        return None
    n = int(text)
    return n if -_INT64 <= n < _INT64 else None


def tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    if tol.effect and tol.effect != effect:
        return False
    if not tol.key:
        return tol.operator == "Exists"
    if tol.key != key:
        return False
    return tol.operator == "Exists" or tol.value == value


def node_affine(spec: TaskSpec, labels: dict[str, str], name: str) -> bool:
    """The pod's nodeSelector and required node affinity (terms ORed) admit this node: its
    labels, and its name for `matchFields` entries. A term naming nothing matches no node."""
    for k, v in spec.node_selector.items():
        if labels.get(k) != v:
            return False
    if not spec.affinity:
        return True
    fields = {"metadata.name": name}
    return any(
        term and all(requirement_matches(r, fields if r.field else labels) for r in term)
        for term in spec.affinity
    )


def preferred_score(spec: TaskSpec, labels: dict[str, str], name: str) -> int:
    """kube-scheduler's NodeAffinity score: the weights of the preferred terms this node
    matches, summed (Volcano's nodeorder multiplies it by `nodeaffinity.weight`, unnormalized)."""
    fields = {"metadata.name": name}
    return sum(
        t.weight for t in spec.preferred_affinity
        if t.requirements and all(requirement_matches(r, fields if r.field else labels) for r in t.requirements)
    )  # fmt: skip


def intolerable_preferences(spec: TaskSpec, taints: tuple[tuple[str, str, str], ...]) -> int:
    """How many of the node's PreferNoSchedule taints the pod does not tolerate (kube-scheduler's
    TaintToleration score counts them; a cluster autoscaler marks nodes it wants to remove so)."""
    return sum(
        1 for key, value, effect in taints
        if effect == "PreferNoSchedule" and not any(tolerates(t, key, value, effect) for t in spec.tolerations)
    )  # fmt: skip


def untolerated(spec: TaskSpec, taints: tuple[tuple[str, str, str], ...]) -> tuple[str, str] | None:
    """The first NoSchedule/NoExecute taint (key, value) the pod does not tolerate."""
    for key, value, effect in taints:
        if effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, key, value, effect) for t in spec.tolerations):
            return key, value
    return None
