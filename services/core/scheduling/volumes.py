"""PersistentVolumeClaims of a pod, as kube-scheduler's VolumeBinding plugin judges them (always
on, as kube-scheduler enables it whatever the profile; Volcano's predicates run it too).

Before any node (PreFilter), every claim the pod names must exist and not be being deleted, and
a claim not bound yet must wait for its first consumer: an unbound claim of an `Immediate` class
(or of none) is the PV controller's to bind, not the scheduler's — the pod waits, unresolvable
by any node, with kube-scheduler's words. Then per node (Filter): a bound claim's
PersistentVolume must exist and its node affinity (local volumes: the one node holding the
disk) match the node; an unbound `WaitForFirstConsumer` claim fits any node its class
provisions on (`allowedTopologies`), except that once one was selected for it
(`volume.kubernetes.io/selected-node`, written by the binder) only that node is: a provisioner
may be making the volume there, and the pod must never go elsewhere.

VolumeZone, as kube-scheduler runs it after VolumeBinding: a bound claim's PersistentVolume
labelled with a zone or region (`topology.kubernetes.io/zone|region`, or the beta
`failure-domain.beta.kubernetes.io/` ones; several zones joined by `__`) fits only a node whose
label says one of them — the beta key read on the node as its GA key when the node lacks it. A
node with none of those labels fits any (a single-zone cluster). In-tree and many static
volumes say where they are only by these labels, not by a nodeAffinity.

ReadWriteOncePod, as kube-scheduler's VolumeRestrictions judges it (a Filter running before
VolumeBinding's): a claim whose `spec.accessModes` has it may be used by one pod of the whole
cluster at a time. A pod naming such a claim while another pod holds it (bound, running, being
deleted, or placed earlier in this session — another pod of its own gang too) fits no node,
with kube-scheduler's words; the refusal is plain Unschedulable, so preemption may take the
holder: in the future view a pod being evicted, or a victim weighed, holds nothing. Its outcome
reads other pods, on every node alike, so such a task is never answered from the node caches
(`shares_claims`). Pods of other schedulers are not known to hold claims (NodeUsage does not
carry them).

A task's verdict is computed once per session from the snapshot's storage and becomes part of
its shape, so the node cache and the shape index stay exact; pods without claims pay nothing
(no verdict, no predicate tier). Not modelled: matching an unbound claim to an existing
Available PV (static binding of `kubernetes.io/no-provisioner` classes) and storage capacity —
such claims fit any node here, as if provisioned on demand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from contracts.workloads import LabelRequirement
from services.core.scheduling import snapshot as st
from services.core.scheduling.model import NodeInfo, TaskInfo, task_shape
from services.core.scheduling.nodelabels import requirement_matches
from services.core.scheduling.session import Session
from services.core.scheduling.status import Status, unresolvable, unschedulable
from services.core.scheduling.storage import (
    BETA_REGION,
    BETA_ZONE,
    REGION,
    SELECTED_NODE,
    TOPOLOGY_LABELS,
    WAIT_FOR_FIRST_CONSUMER,
    ZONE,
    Storage,
    claim_key,
)

PLUGIN = "VolumeBinding"
#: kube-scheduler's words (volume_binding.go, binder.go)
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_PLUGIN = "VolumeZone"
#: kube-scheduler's words (volume_zone.go)
ZONE_CONFLICT = "node(s) had no available volume zone"
#: a beta topology label of a volume is matched against the node's GA label when the node
#: has no beta one (VolumeZone's translateToGALabel)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
RESTRICTIONS = "VolumeRestrictions"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
#: kube-scheduler's words (volume_restrictions.go)
RWOP_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and "
                 "ReadWriteOncePod access mode")  # fmt: skip
#: task statuses in which a pod holds its claims: on a node, placed in this session (pipelined
#: too: it takes the claim once its victims are gone), or being deleted
HOLDS_CLAIMS = frozenset({st.ALLOCATED, st.PIPELINED, st.BINDING, st.BOUND, st.RUNNING,
                          st.RELEASING})  # fmt: skip

Terms = tuple[tuple[LabelRequirement, ...], ...]


def not_found(claim: str) -> str:
    return f'persistentvolumeclaim "{claim}" not found'


def being_deleted(claim: str) -> str:
    return f'persistentvolumeclaim "{claim}" is being deleted'


@dataclass(frozen=True, slots=True)
class BoundClaim:
    claim: str
    volume: str
    terms: Terms = ()  # the PV's required node affinity; () = any node
    missing: bool = False  # the PV it names is not in the cluster
    #: the PV's zone/region labels: (label key, the values a node's label may have), in
    #: VolumeZone's label order; () = any zone
    zones: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class VolumeFit:
    """One pod's claims judged against the storage of the snapshot."""

    held: Status | None = None  # PreFilter: no node is looked at
    held_claim: str = ""  # the claim `held` is about
    bound: tuple[BoundClaim, ...] = ()
    #: unbound WaitForFirstConsumer claims: (claim, the node already selected for it or "",
    #: where its class provisions: allowedTopologies, () = anywhere)
    delayed: tuple[tuple[str, str, Terms], ...] = ()
    #: its ReadWriteOncePod claims, as "<namespace>/<claim>" (VolumeRestrictions)
    once: tuple[str, ...] = ()

    @property
    def filters(self) -> bool:
        return any(c.terms or c.missing or c.zones for c in self.bound) or any(
            n or t for _, n, t in self.delayed
        )

    def key(self) -> tuple[object, ...]:
        """What `check` reads: a part of the task's shape."""
        return (
            tuple((c.terms, c.missing, c.zones) for c in self.bound),
            tuple((n, t) for _, n, t in self.delayed),
            self.once,
        )

    def check(self, node: NodeInfo) -> Status | None:
        """The Filter, in kube-scheduler's order: bound claims first, then the delayed ones."""
        for c in self.bound:
            if c.missing:
                return unresolvable(PLUGIN, PV_NOT_EXIST)
            if c.terms and not terms_match(c.terms, node.labels):
                return unresolvable(PLUGIN, NODE_CONFLICT)
        for _, selected, where in self.delayed:
            if (selected and selected != node.name) or (
                where and not terms_match(where, node.labels)
            ):
                return unresolvable(PLUGIN, BIND_CONFLICT)  # no eviction would make it fit
        if self._zone_conflict(node) is not None:
            return unresolvable(ZONE_PLUGIN, ZONE_CONFLICT)
        return None

    def _zone_conflict(self, node: NodeInfo) -> tuple[BoundClaim, str, tuple[str, ...]] | None:
        """VolumeZone's Filter: the first claim whose volume's zone/region label the node's does
        not match, with the label and the values it allows."""
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return None  # a node saying no zone fits any (a single-zone cluster)
        for c in self.bound:
            for key, values in c.zones:
                got = labels.get(key)
                if got is None:
                    got = labels.get(_GA.get(key, key))
                if got is None or got not in values:
                    return c, key, values
        return None

    def conflict(self, node: NodeInfo) -> tuple[str, str] | None:
        """(words, fix) for `node`, naming the claim and its volume (explain's detail)."""
        for c in self.bound:
            if c.missing:
                return (f"claim {c.claim} is bound to PersistentVolume {c.volume}, which does not "
                        f"exist ({PV_NOT_EXIST})", f"recreate PersistentVolume {c.volume}")  # fmt: skip
            if c.terms and not terms_match(c.terms, node.labels):
                return (f"claim {c.claim} is bound to PersistentVolume {c.volume}, whose node "
                        f"affinity {node.name} does not match ({NODE_CONFLICT})",
                        f"the pod runs only where PersistentVolume {c.volume} is "
                        f"({terms_words(c.terms)})")  # fmt: skip
        for claim, selected, where in self.delayed:
            if selected and selected != node.name:
                return (f"claim {claim} was selected for node {selected} ({SELECTED_NODE}): "
                        f"only that node may take the pod ({BIND_CONFLICT})",
                        f"free room on {selected}, or delete the claim's {SELECTED_NODE} "
                        "annotation")  # fmt: skip
            if where and not terms_match(where, node.labels):
                return (f"claim {claim}'s StorageClass provisions only where {terms_words(where)} "
                        f"(allowedTopologies), not on {node.name} ({BIND_CONFLICT})",
                        f"free room on a node where {terms_words(where)}")  # fmt: skip
        zone = self._zone_conflict(node)
        if zone is not None:
            c, key, values = zone
            on_node = node.labels.get(key, node.labels.get(_GA.get(key, key)))
            said = f"{key}={on_node}" if on_node is not None else f"no {key} label"
            allowed = " or ".join(values)
            return (f"claim {c.claim} is bound to PersistentVolume {c.volume}, labelled {key} "
                    f"{allowed}; node {node.name} has {said} ({ZONE_CONFLICT})",
                    f"the pod runs only where {key} is {allowed}")  # fmt: skip
        return None


def terms_match(terms: Terms, labels: dict[str, str]) -> bool:
    """ORed node selector terms; an empty term matches no node (the API's rule)."""
    return any(term and all(requirement_matches(r, labels) for r in term) for term in terms)


def terms_words(terms: Terms) -> str:
    def one(r: LabelRequirement) -> str:
        return (
            f"{r.key} {r.operator} [{' '.join(r.values)}]" if r.values else f"{r.key} {r.operator}"
        )

    return " or ".join(", ".join(one(r) for r in term) for term in terms)


def volume_fit(namespace: str, claims: Iterable[str], storage: Storage) -> VolumeFit:
    """PreFilter's classification of the pod's claims (each named once, in the pod's order)."""
    bound: list[BoundClaim] = []
    delayed: list[tuple[str, str, Terms]] = []
    names = tuple(dict.fromkeys(claims))
    # every ReadWriteOncePod claim, before any early answer: a running pod whose other claim is
    # gone still holds this one (it was left out of the claim's users, and a second pod placed)
    once = [claim_key(namespace, n) for n in names
            if (c := storage.claims.get(claim_key(namespace, n))) is not None and READ_WRITE_ONCE_POD in c.access_modes]  # fmt: skip
    immediate = ""
    for name in names:
        pvc = storage.claims.get(claim_key(namespace, name))
        if pvc is None:
            return VolumeFit(unresolvable(PLUGIN, not_found(name)), name, once=tuple(once))
        if pvc.deleting:
            return VolumeFit(unresolvable(PLUGIN, being_deleted(name)), name, once=tuple(once))
        if pvc.volume:
            pv = storage.volumes.get(pvc.volume)
            bound.append(BoundClaim(name, pvc.volume, pv.node_affinity if pv else (), pv is None,
                                    volume_zones(pv.topology) if pv else ()))  # fmt: skip
            continue
        sc = storage.classes.get(pvc.storage_class) if pvc.storage_class else None
        if sc is not None and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER:
            delayed.append((name, pvc.selected_node, sc.allowed_topologies))
        else:
            immediate = immediate or name
    if immediate:
        return VolumeFit(unresolvable(PLUGIN, UNBOUND_IMMEDIATE), immediate, once=tuple(once))
    return VolumeFit(None, "", tuple(bound), tuple(delayed), tuple(once))


def volume_zones(labels: Mapping[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A volume's zone/region labels as VolumeZone reads them: each value a set of zones joined
    by `__` (or `,`); a value with an empty member says nothing (kube-scheduler ignores it)."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.replace("__", ",").split(",")]
        if all(zones):
            out.append((key, tuple(sorted(set(zones)))))
    return tuple(out)


def held_words(task: TaskInfo) -> tuple[str, str]:
    """(why, unblock) for a task its claims hold before any node (explain's words)."""
    fit = task.volume
    assert fit is not None and fit.held is not None
    claim = f"{task.namespace}/{fit.held_claim}"
    said = fit.held.message()
    if said == UNBOUND_IMMEDIATE:
        return (f"{said}: pod {task.pod}'s claim {claim} is not bound and its StorageClass does "
                "not wait for a consumer (volumeBindingMode Immediate, or no class)",
                f"the PV controller (or a provisioner) binds {claim}; or give it a StorageClass "
                "with volumeBindingMode: WaitForFirstConsumer")  # fmt: skip
    if said == being_deleted(fit.held_claim):
        return (f"{said}: pod {task.pod} names PersistentVolumeClaim {claim}, which has a "
                "deletionTimestamp", f"create {claim} again once it is gone")  # fmt: skip
    return (f"{said}: pod {task.pod} names PersistentVolumeClaim {claim}, which does not exist",
            f"create PersistentVolumeClaim {claim}: the pod is scheduled once it exists")  # fmt: skip


def open_volumes(ssn: Session, claimants: list[TaskInfo]) -> None:
    """Judge every task with claims once, fold the verdict into its shape, and add the Filter
    as a last predicate tier (kube-scheduler runs VolumeBinding after the node and resource
    filters) when any verdict filters nodes."""
    storage = ssn.snapshot.storage
    seen: dict[tuple[str, tuple[str, ...]], VolumeFit] = {}
    for task in claimants:
        at = (task.namespace, task.spec.claims)
        fit = seen.get(at)
        if fit is None:
            fit = seen[at] = volume_fit(task.namespace, task.spec.claims, storage)
        task.volume = fit
        task.shape = (*task_shape(task.spec), fit.key())
    once = {c: [] for f in seen.values() for c in f.once}
    if once:  # kube-scheduler's VolumeRestrictions filters before VolumeBinding
        for task in claimants:
            for name in task.spec.claims:
                users = once.get(claim_key(task.namespace, name))
                if users is not None:
                    users.append(task)
        claims = ssn.__dict__["_claim_users"] = ClaimUsers(once)
        ssn.add_predicate(RESTRICTIONS, claims.filter, claims.filter_future)
    if any(f.filters for f in seen.values()):
        ssn.add_predicate(PLUGIN, volume_filter)


def volume_filter(task: TaskInfo, node: NodeInfo) -> Status | None:
    fit = task.volume
    return None if fit is None else fit.check(node)


class ClaimUsers:
    """The session's pods by the ReadWriteOncePod claims they name (their statuses change as
    the session places and evicts; the lists do not)."""

    __slots__ = ("users",)

    def __init__(self, users: dict[str, list[TaskInfo]]) -> None:
        self.users = users

    def holder(
        self, task: TaskInfo, future: bool = False, without: Sequence[TaskInfo] = ()
    ) -> tuple[str, TaskInfo] | None:
        """(claim, the pod holding it) for the first of the task's claims another pod holds;
        `future`: the session's evictions and `without` (victims weighed) hold nothing."""
        fit = task.volume
        if fit is None or not fit.once:
            return None
        gone = {t.uid for t in without} if future and without else ()
        for claim in fit.once:
            for t in self.users.get(claim, ()):
                if t is task or t.status not in HOLDS_CLAIMS:
                    continue
                if future and (t.status == st.RELEASING or t.uid in gone):
                    continue
                return claim, t
        return None

    def filter(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        return None if self.holder(task) is None else unschedulable(RESTRICTIONS, RWOP_CONFLICT)

    def filter_future(
        self, task: TaskInfo, node: NodeInfo, without: Sequence[TaskInfo] = ()
    ) -> Status | None:
        held = self.holder(task, True, without)
        return None if held is None else unschedulable(RESTRICTIONS, RWOP_CONFLICT)


def shares_claims(task: TaskInfo) -> bool:
    """Whether the task names a ReadWriteOncePod claim: its outcome on a node reads other pods
    (every node alike), so the node caches must leave it alone."""
    return task.volume is not None and bool(task.volume.once)


def restriction_words(ssn: Session, task: TaskInfo) -> tuple[str, str] | None:
    """(words, fix) naming the claim and the pod holding it (explain's detail); alike on every
    node, so the refusals group."""
    claims: ClaimUsers | None = ssn.__dict__.get("_claim_users")
    got = claims.holder(task) if claims is not None else None
    if got is None:
        return None
    claim, t = got
    where = f" on {t.node}" if t.node else ""
    return (f"claim {claim} is ReadWriteOncePod and pod {t.namespace}/{t.pod} uses it{where} "
            f"({RWOP_CONFLICT})",
            f"end {t.namespace}/{t.pod}: one pod at a time may use a ReadWriteOncePod claim; "
            "or give this pod a claim of its own")  # fmt: skip


def shared_within(job_tasks: Iterable[TaskInfo], min_available: int) -> tuple[str, list[str]] | None:
    """(claim, pods) when pods of one gang name one ReadWriteOncePod claim so that the gang can
    never have `min_available` pods at once (only one of them may use it)."""
    tasks = [t for t in job_tasks if t.status not in (st.SUCCEEDED, st.FAILED)]
    by_claim: dict[str, list[str]] = {}
    for t in tasks:
        for claim in t.volume.once if t.volume is not None else ():
            by_claim.setdefault(claim, []).append(t.pod)
    for claim, pods in sorted(by_claim.items()):
        if len(pods) > 1 and len(tasks) - (len(pods) - 1) < min_available:
            return claim, sorted(pods)
    return None
