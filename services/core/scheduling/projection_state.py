"""`ClusterProjection` as a value: what a snapshot of the queue's or the scheduler's projection
holds. Dicts keep their insertion order (sessions iterate them), so a restored projection goes
on exactly as the one that was stored."""

from __future__ import annotations

import msgspec

from contracts.events import (
    ClaimChanged,
    DisruptionBudgetChanged,
    HyperNodeChanged,
    NamespaceChanged,
    OtherPods,
    QuotaChanged,
    StorageClassChanged,
    VolumeChanged,
)
from services.core.scheduling.quotastate import QuotaState
from services.core.scheduling.snapshot import (
    CardSnap,
    ClusterProjection,
    JobSnap,
    NodeSnap,
    QueueSnap,
    TaskSnap,
    leaving_of,
)
from services.core.scheduling.storage import StorageState


class ProjectionState(msgspec.Struct, frozen=True, kw_only=True):
    seq: int = 0
    now: float = 0.0
    nodes: dict[str, NodeSnap] = {}
    cards: dict[str, CardSnap] = {}
    node_cards: dict[str, list[str]] = {}
    queues: dict[str, QueueSnap] = {}
    jobs: dict[str, JobSnap] = {}
    tasks: dict[str, dict[str, TaskSnap]] = {}
    held: dict[str, tuple[int, int, int]] = {}
    others: dict[str, tuple[OtherPods, ...]] = {}
    held_resources: dict[str, dict[str, int]] = {}
    held_devices: dict[str, dict[str, int]] = {}
    claims: dict[str, ClaimChanged] = {}
    volumes: dict[str, VolumeChanged] = {}
    classes: dict[str, StorageClassChanged] = {}
    quotas: dict[str, QuotaChanged] = {}
    hypernodes: dict[str, HyperNodeChanged] = {}
    started: dict[str, float] = {}
    budgets: dict[str, DisruptionBudgetChanged] = {}
    namespaces: dict[str, NamespaceChanged] = {}


def state_of(p: ClusterProjection) -> ProjectionState:
    """A view for encoding at once (shares the projection's dicts, copies nothing)."""
    return ProjectionState(seq=p.seq, now=p.now, nodes=p.nodes, cards=p.cards, node_cards=p.node_cards,
                           queues=p.queues, jobs=p.jobs, tasks=p.tasks, held=p.held,
                           others=p.others, held_resources=p.held_resources, held_devices=p.held_devices,
                           claims=p.storage.claims, volumes=p.storage.volumes,
                           classes=p.storage.classes, quotas=p.quotas.quotas,
                           hypernodes=p.hypernodes, started=p.started, budgets=p.budgets,
                           namespaces=p.namespaces)  # fmt: skip


def projection_of(s: ProjectionState) -> ClusterProjection:
    """A live projection from a decoded state (whose dicts are its own)."""
    p = ClusterProjection()
    p.seq, p.now = s.seq, s.now
    p.nodes, p.cards, p.node_cards = s.nodes, s.cards, s.node_cards
    p.queues, p.jobs, p.tasks = s.queues, s.jobs, s.tasks
    p.held = dict(s.held)
    p.others = dict(s.others)
    p.held_resources = dict(s.held_resources)
    p.held_devices = dict(s.held_devices)
    p.storage = StorageState(dict(s.claims), dict(s.volumes), dict(s.classes))
    p.quotas = QuotaState(dict(s.quotas))
    p.hypernodes = dict(s.hypernodes)
    p.started = dict(s.started)
    p.budgets = dict(s.budgets)
    p.namespaces = dict(s.namespaces)
    p._namespaces = None
    p._hypernodes = None
    p.leaving = leaving_of(p.jobs, p.tasks)  # derived, so not stored: the shape stays
    return p
