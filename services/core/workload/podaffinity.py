"""A pod's `affinity.podAffinity` / `podAntiAffinity` for kube-scheduler's InterPodAffinity.

The checks are the API server's (`validatePodAffinityTerm`, `validateWeightedPodAffinityTerms`,
`ValidateLabelSelector`), in its words, so a manifest Tessera accepts is one a cluster accepts
and a term that could never be satisfied the way it is written is refused before it waits.
What the API server does at creation is done here too: a term's `matchLabelKeys` become
`key In (the pod's value)` and its `mismatchLabelKeys` `key NotIn (the pod's value)` in its
selector, and a term naming no namespace and no namespaceSelector means the pod's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.workloads import LabelRequirement, PodAffinity, PodAffinityTerm
from services.core.workload import names
from services.core.workload.rejection import invalid, required

#: (field path, rule): what admission turns into rejections
Problem = tuple[str, str]

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def pod_affinity(
    affinity: Mapping[str, Any], path: str, namespace: str, labels: Mapping[str, str],
    per_pod: Mapping[str, str] | None = None,
) -> tuple[PodAffinity | None, list[Problem]]:
    """The pod's inter-pod affinity (None when it has none) and what is wrong with it; `path`
    is the `...spec.affinity` field's, `labels` those the pod carries once made (a Volcano Job's
    pods: its controller's too) and `per_pod` (merged_label_keys) keys that differ per pod."""
    problems: list[Problem] = []
    got: dict[str, tuple[PodAffinityTerm, ...]] = {}
    for field, required_key, preferred_key in (
        ("podAffinity", "affinity", "preferred"),
        ("podAntiAffinity", "anti_affinity", "preferred_anti"),
    ):
        raw = affinity.get(field)
        if not isinstance(raw, Mapping):
            continue
        base = f"{path}.{field}"
        hard = []
        for i, term in enumerate(_listed(raw.get(REQUIRED))):
            one = _term(term, f"{base}.{REQUIRED}[{i}]", namespace, labels, problems, per_pod)
            if one is not None:
                hard.append(one)
        soft = []
        for i, weighted in enumerate(_listed(raw.get(PREFERRED))):
            where = f"{base}.{PREFERRED}[{i}]"
            if not isinstance(weighted, Mapping):
                problems.append((where, invalid(weighted, "must be a weighted pod affinity term")))
                continue
            weight = weighted.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                problems.append((f"{where}.weight", invalid(weight, "must be in the range 1-100")))
                weight = 0
            one = _term(weighted.get("podAffinityTerm"), f"{where}.podAffinityTerm", namespace,
                        labels, problems, per_pod)  # fmt: skip
            if one is not None and weight:
                soft.append(PodAffinityTerm(**{**_fields(one), "weight": weight}))
        got[required_key], got[preferred_key] = tuple(hard), tuple(soft)
    if not any(got.values()):
        return None, problems
    return PodAffinity(**got), problems


def _fields(term: PodAffinityTerm) -> dict[str, Any]:
    return {f: getattr(term, f) for f in term.__struct_fields__}


def _listed(raw: object) -> Sequence[Any]:
    return raw if isinstance(raw, list) else []


def topology_key(raw: Mapping[str, Any], where: str, problems: list[Problem]) -> str:
    """A term's or constraint's `topologyKey`: required, and a qualified label name (the API
    server's rule for both affinity terms and spread constraints)."""
    key = str(raw.get("topologyKey") or "")
    if not key:
        problems.append((f"{where}.topologyKey", required("can not be empty")))
    else:
        for msg in names.qualified_name(key):
            problems.append((f"{where}.topologyKey", invalid(key, msg)))
    return key

def _term(
    raw: object, where: str, namespace: str, labels: Mapping[str, str], problems: list[Problem],
    per_pod: Mapping[str, str] | None = None,
) -> PodAffinityTerm | None:
    """One PodAffinityTerm; None when it is not a mapping (the rest is checked and kept: the
    pod is refused anyway when anything is wrong)."""
    if not isinstance(raw, Mapping):
        problems.append((where, required() if raw is None else invalid(raw, "must be an object")))
        return None
    key = topology_key(raw, where, problems)
    selector_raw = raw.get("labelSelector")
    selector = label_selector(selector_raw, f"{where}.labelSelector", problems)
    ns_selector = label_selector(
        raw.get("namespaceSelector"), f"{where}.namespaceSelector", problems
    )
    namespaces = tuple(str(n) for n in _listed(raw.get("namespaces")))
    for n in namespaces:
        for msg in names.dns1123_label(n):
            problems.append((f"{where}.namespace", invalid(n, msg)))
    if not namespaces and ns_selector is None:
        namespaces = (namespace,)
    selector = merged_label_keys(raw, where, selector_raw, selector, labels, problems, per_pod)
    return PodAffinityTerm(topology_key=key, selector=selector, namespaces=namespaces,
                           namespace_selector=ns_selector)  # fmt: skip


def label_selector(
    raw: object, where: str, problems: list[Problem]
) -> tuple[LabelRequirement, ...] | None:
    """A metav1.LabelSelector as requirements (matchLabels first, as `key In (value)`); None when
    unset — a pod term without one matches no pod, a namespaceSelector without one no namespace."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append((where, invalid(raw, "must be a label selector")))
        return None
    out: list[LabelRequirement] = []
    match_labels = raw.get("matchLabels") or {}
    if isinstance(match_labels, Mapping):
        for k, v in match_labels.items():
            for msg in names.qualified_name(str(k)):
                problems.append((f"{where}.matchLabels", invalid(str(k), msg)))
            out.append(LabelRequirement(key=str(k), operator="In", values=(str(v),)))
    for j, expr in enumerate(_listed(raw.get("matchExpressions"))):
        p = f"{where}.matchExpressions[{j}]"
        if not isinstance(expr, Mapping):
            problems.append((p, invalid(expr, "must be a label selector requirement")))
            continue
        op = str(expr.get("operator") or "")
        values = tuple(str(v) for v in _listed(expr.get("values")))
        if op in ("In", "NotIn") and not values:
            problems.append((f"{p}.values", required(
                "must be specified when `operator` is 'In' or 'NotIn'")))  # fmt: skip
        elif op in ("Exists", "DoesNotExist") and values:
            problems.append((f"{p}.values",
                             "Forbidden: may not be specified when `operator` is 'Exists' or "
                             "'DoesNotExist'"))  # fmt: skip
        elif op not in SELECTOR_OPERATORS:
            problems.append((f"{p}.operator", invalid(op, "not a valid selector operator")))
        key = str(expr.get("key") or "")
        for msg in names.qualified_name(key):
            problems.append((f"{p}.key", invalid(key, msg)))
        out.append(LabelRequirement(key=key, operator=op, values=values))
    return tuple(out)


def merged_label_keys(
    raw: Mapping[str, Any], where: str, selector_raw: object,
    selector: tuple[LabelRequirement, ...] | None, labels: Mapping[str, str],
    problems: list[Problem], per_pod: Mapping[str, str] | None = None,
) -> tuple[LabelRequirement, ...] | None:  # fmt: skip
    """matchLabelKeys / mismatchLabelKeys merged into the selector as the API server merges them
    at creation (`key In (the pod's value)`, `key NotIn (...)`, for the keys the pod has), and
    then checked as it checks the merged pod (validateMatchLabelKeysAndMismatchLabelKeys): a
    matchLabelKeys key is refused when the merged selector holds it twice — in matchLabels, or
    more than once in matchExpressions. A pod read back from the API server already holds what
    the merge made: a requirement equal to the merge's is the merge's, and is not made twice.
    `per_pod`: keys whose value differs from pod to pod of the task (the reason why), which one
    selector for all of the task's pods cannot carry."""
    match = [str(k) for k in _listed(raw.get("matchLabelKeys"))]
    mismatch = [str(k) for k in _listed(raw.get("mismatchLabelKeys"))]
    if not match and not mismatch:
        return selector
    for field, keys in (("matchLabelKeys", match), ("mismatchLabelKeys", mismatch)):
        if not keys:
            continue
        if selector is None:
            problems.append((f"{where}.{field}",
                             "Forbidden: must not be specified when labelSelector is not set"))  # fmt: skip
            continue
        for i, k in enumerate(keys):
            for msg in names.qualified_name(k):
                problems.append((f"{where}.{field}[{i}]", invalid(k, msg)))
            if per_pod and k in per_pod:
                problems.append((f"{where}.{field}[{i}]", invalid(k, per_pod[k])))
    if selector is None:
        for i, k in enumerate(match):
            if k in mismatch:
                problems.append((f"{where}.matchLabelKeys[{i}]",
                                 invalid(k, "exists in both matchLabelKeys and mismatchLabelKeys")))  # fmt: skip
        return None
    # label_selector lists matchLabels first, one requirement each, then the expressions
    match_labels = selector_raw.get("matchLabels") if isinstance(selector_raw, Mapping) else None
    seen = {str(k) for k in match_labels} if isinstance(match_labels, Mapping) else set()
    expressions = selector[len(seen):]
    merged = list(selector)
    for keys, op in ((match, "In"), (mismatch, "NotIn")):
        for k in keys:
            if k in labels:
                req = LabelRequirement(key=k, operator=op, values=(labels[k],))
                if req not in expressions:  # stored by the API server: merged already
                    merged.append(req)
    # the merged selector as the API server validates it: matchLabels, then the expressions
    position = {k: i for i, k in enumerate(match)}
    for req in merged[len(seen):]:
        if req.key in position and req.key in seen:
            problems.append((f"{where}.matchLabelKeys[{position[req.key]}]",
                             invalid(req.key, "exists in both matchLabelKeys and labelSelector")))  # fmt: skip
        seen.add(req.key)
    for i, k in enumerate(match):
        if k in mismatch:
            problems.append((f"{where}.matchLabelKeys[{i}]",
                             invalid(k, "exists in both matchLabelKeys and mismatchLabelKeys")))  # fmt: skip
    return tuple(merged)
