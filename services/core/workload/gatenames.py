"""A pod's `spec.schedulingGates` as the API server admits them (ValidateSchedulingGates): each
gate needs a name and a name appears once — a pod the server would refuse must not be held here
as gated forever, waiting for a gate nobody can name or remove once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.core.workload.rejection import quoted, required


def scheduling_gates(spec: Mapping[str, Any], path: str) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """The gate names in order, and (field path, rule) for each one the API server refuses."""
    names: list[str] = []
    problems: list[tuple[str, str]] = []
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        where = f"{path}.spec.schedulingGates[{i}].name"
        name = str(gate.get("name") or "") if isinstance(gate, Mapping) else ""
        if not name:
            problems.append((where, required()))
        elif name in names:
            problems.append((where, f"Duplicate value: {quoted(name)}"))
        else:
            names.append(name)
    return tuple(names), problems
