"""A pod's `spec.topologySpreadConstraints` for kube-scheduler's PodTopologySpread.

The checks are the API server's (`validateTopologySpreadConstraints`), in its words; its
defaults are applied (nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore) and a constraint's
`matchLabelKeys` become `key In (the pod's value)` in its selector, as the API server merges them
at creation (1.34+; kube-scheduler did before), checked by the same rule as affinity terms'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.workloads import SpreadConstraint
from services.core.workload.podaffinity import (
    Problem,
    label_selector,
    merged_label_keys,
    topology_key,
)
from services.core.workload.rejection import invalid, quoted, required

ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
POLICIES = ("Honor", "Ignore")
NOT_POSITIVE = "must be greater than zero"


def _unsupported(value: str, supported: tuple[str, ...]) -> str:
    shown = ", ".join(quoted(x) for x in supported)
    return f"Unsupported value: {quoted(value)}: supported values: {shown}"


def _int(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def spread_constraints(
    spec: Mapping[str, Any], path: str, labels: Mapping[str, str],
    per_pod: Mapping[str, str] | None = None,
) -> tuple[tuple[SpreadConstraint, ...], list[Problem]]:
    """The constraints in order and what is wrong with them (`path` is the pod's; `labels` and
    `per_pod` as podaffinity.pod_affinity's)."""
    raw = spec.get("topologySpreadConstraints")
    out: list[SpreadConstraint] = []
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(raw if isinstance(raw, list) else []):
        where = f"{path}.spec.topologySpreadConstraints[{i}]"
        if not isinstance(c, Mapping):
            problems.append((where, invalid(c, "must be a topology spread constraint")))
            continue
        skew = _int(c.get("maxSkew"))
        if skew is None or skew <= 0:
            problems.append((f"{where}.maxSkew", invalid(c.get("maxSkew"), NOT_POSITIVE)))
        key = topology_key(c, where, problems)
        action = str(c.get("whenUnsatisfiable") or "")
        if not action:
            problems.append((f"{where}.whenUnsatisfiable", required()))
        elif action not in ACTIONS:
            problems.append((f"{where}.whenUnsatisfiable", _unsupported(action, ACTIONS)))
        min_domains = 0
        if c.get("minDomains") is not None:
            got = _int(c.get("minDomains"))
            if got is None or got <= 0:
                problems.append((f"{where}.minDomains", invalid(c.get("minDomains"), NOT_POSITIVE)))
            elif action != "DoNotSchedule":
                problems.append((f"{where}.minDomains", invalid(got,
                                 "can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                                 f"not {action}")))  # fmt: skip
            else:
                min_domains = got
        if key and action and (key, action) in seen:
            problems.append((f"{where}.{{topologyKey, whenUnsatisfiable}}",
                             f"Duplicate value: {quoted(f'{{{key}, {action}}}')}"))  # fmt: skip
        seen.add((key, action))
        policies = {}
        for field, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            policy = str(c.get(field) or default)
            if policy not in POLICIES:
                problems.append((f"{where}.{field}", _unsupported(policy, POLICIES)))
            policies[field] = policy
        selector_raw = c.get("labelSelector")
        selector = label_selector(selector_raw, f"{where}.labelSelector", problems)
        selector = merged_label_keys(c, where, selector_raw, selector, labels, problems, per_pod)
        out.append(SpreadConstraint(
            max_skew=skew or 1, topology_key=key, when_unsatisfiable=action or "DoNotSchedule",
            selector=selector, min_domains=min_domains,
            node_affinity_policy=policies["nodeAffinityPolicy"],
            node_taints_policy=policies["nodeTaintsPolicy"],
        ))  # fmt: skip
    return tuple(out), problems
