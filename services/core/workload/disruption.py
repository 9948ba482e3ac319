"""A PodDisruptionBudget (policy/v1) → the `DisruptionBudgetChanged` the `pdb` plugin reads.

The selector as policy/v1 reads it: none selects no pod, an empty one every pod of the
namespace (policy/v1beta1 read an empty one as none; Volcano's plugin still does). The budget
is the disruption controller's `status.disruptionsAllowed`, as read by the API server's eviction
subresource, and `status.disruptedPods` the pods an eviction already counted against it. A
selector the API server would not have stored is reported, not half-applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.events import DisruptionBudgetChanged
from services.core.workload.podaffinity import Problem, label_selector


def budget_event(obj: Mapping[str, Any]) -> tuple[DisruptionBudgetChanged | None, list[Problem]]:
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    problems: list[Problem] = []
    selector = label_selector(spec.get("selector"), "spec.selector", problems)
    if problems:
        return None, problems
    try:
        allowed = int(status.get("disruptionsAllowed") or 0)
    except (TypeError, ValueError):
        return None, [("status.disruptionsAllowed", f"Invalid value: {status.get('disruptionsAllowed')!r}")]
    disrupted = tuple(sorted(str(p) for p in (status.get("disruptedPods") or {})))
    return DisruptionBudgetChanged(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                                   selector=selector, allowed=allowed, disrupted=disrupted), []  # fmt: skip
