"""Scheduling gates (`spec.schedulingGates`, kube-scheduler's SchedulingGates plugin): a gated
pod is never tried — no node is filtered for it, nothing is preempted for it — until whoever
owns the gates removes them. On a cluster admission holds such pods out of the log
(services/kube/podsource.py); in `tessera simulate` they are in it and this rule holds them,
whatever plugins the configuration turns on (kube-scheduler enables the plugin always)."""

from __future__ import annotations

from collections.abc import Iterable

from services.core.scheduling.model import TaskInfo
from services.core.scheduling.status import Status, unresolvable

#: kube-scheduler's PodScheduled=False condition for a gated pod: reason and message
GATED_REASON = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
PLUGIN = "SchedulingGates"


def gate_words(gates: Iterable[str]) -> str:
    """The plugin's PreEnqueue status, `waiting for scheduling gates: [a b]` (Go's %v)."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


def gated(task: TaskInfo) -> Status | None:
    """Unresolvable while any gate is left: no session can change it, only an update can."""
    gates = task.spec.scheduling_gates
    return unresolvable(PLUGIN, gate_words(gates)) if gates else None


def gated_reason(tasks: Iterable[TaskInfo]) -> str:
    """A job whose every waiting pod is gated: kube-scheduler's condition, and each pod's gates."""
    each = "; ".join(f"{t.pod}: {gate_words(t.spec.scheduling_gates)}" for t in tasks)
    return f"{GATED_REASON}: {GATED_MESSAGE} ({each})"
