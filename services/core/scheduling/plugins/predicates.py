"""`predicates` (Volcano wraps kube-scheduler filters): node selector and required node
affinity (`predicate.NodeAffinityEnable`), taints/tolerations (`predicate.TaintTolerationEnable`),
host ports (`predicate.NodePortsEnable`, kube-scheduler's NodePorts), inter-pod affinity
(`predicate.PodAffinityEnable`, kube-scheduler's InterPodAffinity filter: interpod.py) and
topology spread (`predicate.PodTopologySpreadEnable`, PodTopologySpread: topologyspread.py).
Resource fit runs first in the actions, on FutureIdle, as Volcano's allocate does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contracts.workloads import HostPort
from services.core.scheduling.config import RULES, PluginConf
from services.core.scheduling.interpod import AFFINITY, PodIndex, index_of
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.nodelabels import node_affine, tolerates, untolerated
from services.core.scheduling.session import Session
from services.core.scheduling.snapshot import RELEASING
from services.core.scheduling.status import Status, unresolvable, unschedulable
from services.core.scheduling.topologyspread import MISSING_LABEL, Spread, spread_of

NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
#: kube-scheduler's TaintToleration words, before the taint itself (`{key: value}`)
UNTOLERATED = "node(s) had untolerated taint"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def _truthy(v: object, default: bool = True) -> bool:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    return str(v).lower() == "true"


def ports_conflict(a: HostPort, b: HostPort) -> bool:
    """kube-scheduler's HostPortInfo.CheckConflict: same protocol and port, and the addresses
    overlap (0.0.0.0 binds every address of the node, so it overlaps every one)."""
    return (
        a.port == b.port and a.protocol == b.protocol
        and (a.ip == b.ip or a.ip == ANY_IP or b.ip == ANY_IP)
    )  # fmt: skip


def port_holder(
    task: TaskInfo, node: NodeInfo, future: bool = False, without: Sequence[TaskInfo] = ()
) -> tuple[HostPort, TaskInfo] | None:
    """The first of the task's host ports already taken on the node, and the pod holding it.
    Every pod the session has on the node counts: running, releasing (its port is not free
    until it ends), and those placed earlier in this session (a gang's own earlier members).
    `future`: the node once its Releasing pods and `without` (victims weighed) are gone, which
    is what preempting a port's holder frees."""
    gone = {t.uid for t in without}
    for other in node.tasks.values():
        if other is task or not other.spec.host_ports:
            continue
        if future and (other.status == RELEASING or other.uid in gone):
            continue
        for want in task.spec.host_ports:
            for held in other.spec.host_ports:
                if ports_conflict(want, held):
                    return want, other
    return None


def foreign_port(task: TaskInfo, node: NodeInfo) -> tuple[HostPort, str] | None:
    """The first of the task's host ports a pod of another scheduler holds on the node (a
    DaemonSet's, a static pod's: NodeUsage.others), and that pod's namespace. kube-scheduler's
    NodeInfo counts every pod bound to the node whoever placed it, and the kubelet refuses a
    second pod binding a taken port."""
    for held, namespace in node.held_ports:
        for want in task.spec.host_ports:
            if ports_conflict(want, held):
                return want, namespace
    return None


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, conf: PluginConf) -> None:
        args = conf.arguments
        self.affinity = _truthy(args.get("predicate.NodeAffinityEnable"))
        self.taints = _truthy(args.get("predicate.TaintTolerationEnable"))
        self.ports = _truthy(args.get("predicate.NodePortsEnable"))
        self.pod_affinity = _truthy(args.get("predicate.PodAffinityEnable"))
        self.spread = _truthy(args.get("predicate.PodTopologySpreadEnable"))
        self.pods: PodIndex | None = None
        self.rules = RULES  # the generation the session decides by (its conf's, once open)

    def on_session_open(self, ssn: Session) -> None:
        self.rules = ssn.conf.rules
        if self.pod_affinity or self.spread:
            pods = index_of(ssn)
            self.pods = pods if pods.active else None  # no pod has a term: nothing to check

    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        return self._check(task, node, False, ())

    def predicate_future(
        self, task: TaskInfo, node: NodeInfo, without: Sequence[TaskInfo] = ()
    ) -> Status | None:
        """The ports and the inter-pod rules read what pods hold: in the future view a Releasing
        pod's (or a victim's) port is free and the pod no longer counts in its domain, so
        preempt and reclaim may evict a port's holder, or an anti-affinity's, for it."""
        return self._check(task, node, True, without)

    def _check(
        self, task: TaskInfo, node: NodeInfo, future: bool, without: Sequence[TaskInfo]
    ) -> Status | None:
        spec = task.spec
        if self.taints and _cordoned(spec.tolerations, node.taints):
            # kube-scheduler's NodeUnschedulable, which Volcano's predicates run first
            return unresolvable(self.name, UNSCHEDULABLE)
        if self.affinity and not node_affine(spec, node.labels, node.name):
            return unresolvable(self.name, NODE_AFFINITY)
        if self.taints:
            taint = untolerated(spec, node.taints)
            if taint is not None:
                key, value = taint  # kube's words even for an empty value: "{key: }"
                shown = f"{key}: {value}" if value or self.rules >= 2 else key  # (before 2: "{key}")
                return unresolvable(self.name, f"{UNTOLERATED} {{{shown}}}")
        if self.ports and spec.host_ports:
            if node.held_ports and foreign_port(task, node):
                # unresolvable: Tessera evicts none of another scheduler's pods
                return unresolvable(self.name, NODE_PORTS)
            if port_holder(task, node, future, without):
                # Unschedulable, not unresolvable: preempting the holder frees the port.
                return unschedulable(self.name, NODE_PORTS)
        pods = self.pods
        if pods is None:
            return None
        if self.pod_affinity and pods.affinity_aware(task):
            why = pods.refusal(task, node.labels, future, without)
            if why:
                # kube: required affinity unmet is unresolvable (no eviction creates a pod);
                # an anti-affinity is resolved by evicting the pods it is against
                return (unresolvable if why == AFFINITY else unschedulable)(self.name, why)
        if self.spread and spec.spread:
            counts = Spread(pods, task, without) if future and without else spread_of(pods, task)
            why, _, _ = counts.refusal(node.labels)
            if why:  # a missing topology label no eviction adds; a skew evicting may mend
                return (unresolvable if why == MISSING_LABEL else unschedulable)(self.name, why)
        return None


#: kube-scheduler's NodeUnschedulable words for a cordoned node (`spec.unschedulable`, which
#: Tessera holds as the taint the node lifecycle controller puts on it)
UNSCHEDULABLE = "node(s) were unschedulable"
CORDON_TAINT = "node.kubernetes.io/unschedulable"


def _cordoned(tolerations: Sequence[Any], taints: Sequence[tuple[str, str, str]]) -> bool:
    return any(key == CORDON_TAINT and effect == "NoSchedule"
               and not any(tolerates(t, key, value, effect) for t in tolerations)
               for key, value, effect in taints)  # fmt: skip
