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
    affinity: Mapping[str, Any], path: str, namespace: str, labels: Mapping[str, str]
) -> tuple[PodAffinity | None, list[Problem]]:
    """The pod's inter-pod affinity (None when it has none) and what is wrong with it; `path`
    is the `...spec.affinity` field's."""
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
            one = _term(term, f"{base}.{REQUIRED}[{i}]", namespace, labels, problems)
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
                        labels, problems)  # fmt: skip
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
    raw: object, where: str, namespace: str, labels: Mapping[str, str], problems: list[Problem]
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
    selector = merged_label_keys(raw, where, selector_raw, selector, labels, problems)
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
    problems: list[Problem],
) -> tuple[LabelRequirement, ...] | None:  # fmt: skip
    """matchLabelKeys / mismatchLabelKeys checked (validateMatchLabelKeysAndMismatchLabelKeys)
    and merged into the selector for the keys the pod has, as the API server does."""
    match = [str(k) for k in _listed(raw.get("matchLabelKeys"))]
    mismatch = [str(k) for k in _listed(raw.get("mismatchLabelKeys"))]
    if not match and not mismatch:
        return selector
    in_selector: set[str] = set()
    if isinstance(selector_raw, Mapping):
        in_selector = {str(k) for k in (selector_raw.get("matchLabels") or {})}
        in_selector |= {str(e.get("key")) for e in _listed(selector_raw.get("matchExpressions"))
                        if isinstance(e, Mapping)}  # fmt: skip
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
            if k in in_selector:
                problems.append((f"{where}.{field}[{i}]",
                                 invalid(k, f"exists in both {field} and labelSelector")))  # fmt: skip
    for i, k in enumerate(match):
        if k in mismatch:
            problems.append((f"{where}.matchLabelKeys[{i}]",
                             invalid(k, "exists in both matchLabelKeys and mismatchLabelKeys")))  # fmt: skip
    if selector is None:
        return None
    merged = list(selector)
    merged += [
        LabelRequirement(key=k, operator="In", values=(labels[k],)) for k in match if k in labels
    ]
    merged += [LabelRequirement(key=k, operator="NotIn", values=(labels[k],))
               for k in mismatch if k in labels]  # fmt: skip
    return tuple(merged)
