"""Normalized workload records, as admission produces them from Kubernetes/Volcano manifests.

They are the *result* of parsing (HAMi request rules applied), so the scheduler never re-reads
raw YAML. Raw manifests are kept alongside for explainability.
"""

from __future__ import annotations

from contracts.base import Record


class DeviceRequest(Record, frozen=True):
    """One container's ask for `count` cards of one vendor family, after HAMi normalization."""

    vendor: str
    type: str  # resource family / commonWord ("Ascend910B3", "NVIDIA", ...)
    count: int
    memory: int = 0  # MB per card; 0 with memory_pct = whole-card percentage
    memory_pct: int = 101  # HAMi's "unset" sentinel
    cores: int = 0
    template: str | None = None
    exclusive: bool = False
    allowed_types: tuple[str, ...] = ()  # alias expansion: any of these card types fits


class TaskSpec(Record, frozen=True):
    name: str
    replicas: int = 1
    cpu_milli: int = 0
    memory_mib: int = 0
    devices: tuple[DeviceRequest, ...] = ()
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    duration: float | None = None  # tessera.io/duration: seconds a task runs once started


class JobSpec(Record, frozen=True):
    namespace: str
    name: str
    queue: str = "default"
    kind: str = "Pod"  # Pod | Job | PodGroup
    min_available: int = 1
    priority: int = 0
    priority_class: str = ""
    tasks: tuple[TaskSpec, ...] = ()
    max_retry: int = 3
    policies: tuple[tuple[str, str], ...] = ()  # (event, action) pairs, Volcano lifecycle
    annotations: dict[str, str] = {}
    arrive_at: float = 0.0


class QueueSpec(Record, frozen=True):
    name: str
    weight: int = 1
    capability: dict[str, int] = {}
    deserved: dict[str, int] = {}
    guarantee: dict[str, int] = {}
    reclaimable: bool = True
    parent: str = ""
    state: str = "Open"
