"""`predicates` (Volcano wraps kube-scheduler filters): node selector and required node
affinity (`predicate.NodeAffinityEnable`), taints/tolerations (`predicate.TaintTolerationEnable`),
host ports (`predicate.NodePortsEnable`, kube-scheduler's NodePorts), inter-pod affinity
(`predicate.PodAffinityEnable`, kube-scheduler's InterPodAffinity filter: interpod.py). Resource
fit runs first in the actions, on FutureIdle, as Volcano's allocate does."""

from __future__ import annotations

from collections.abc import Sequence

from contracts.workloads import HostPort, LabelRequirement, Toleration
from services.core.scheduling.config import PluginConf
from services.core.scheduling.interpod import AFFINITY, PodIndex, index_of
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.snapshot import RELEASING
from services.core.scheduling.status import Status, unresolvable, unschedulable

NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def _truthy(v: object, default: bool = True) -> bool:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    return str(v).lower() == "true"


def requirement_matches(req: LabelRequirement, labels: dict[str, str]) -> bool:
    has = req.key in labels
    value = labels.get(req.key, "")
    if req.operator == "In":
        return has and value in req.values
    if req.operator == "NotIn":
        return not has or value not in req.values
    if req.operator == "Exists":
        return has
    if req.operator == "DoesNotExist":
        return not has
    if req.operator in ("Gt", "Lt") and has and req.values:
        try:
            left, right = int(value), int(req.values[0])
        except ValueError:
            return False
        return left > right if req.operator == "Gt" else left < right
    return False


def tolerates(tol: Toleration, key: str, value: str, effect: str) -> bool:
    if tol.effect and tol.effect != effect:
        return False
    if not tol.key:
        return tol.operator == "Exists"
    if tol.key != key:
        return False
    return tol.operator == "Exists" or tol.value == value


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


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, conf: PluginConf) -> None:
        args = conf.arguments
        self.affinity = _truthy(args.get("predicate.NodeAffinityEnable"))
        self.taints = _truthy(args.get("predicate.TaintTolerationEnable"))
        self.ports = _truthy(args.get("predicate.NodePortsEnable"))
        self.pod_affinity = _truthy(args.get("predicate.PodAffinityEnable"))
        self.pods: PodIndex | None = None

    def on_session_open(self, ssn: Session) -> None:
        if self.pod_affinity:
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
        if self.affinity:
            labels = node.labels
            for k, v in spec.node_selector.items():
                if labels.get(k) != v:
                    return unresolvable(self.name, NODE_AFFINITY)
            if spec.affinity and not any(
                all(requirement_matches(r, labels) for r in term) for term in spec.affinity
            ):
                return unresolvable(self.name, NODE_AFFINITY)
        if self.taints:
            for key, value, effect in node.taints:
                if effect not in ("NoSchedule", "NoExecute"):
                    continue
                if not any(tolerates(t, key, value, effect) for t in spec.tolerations):
                    shown = f"{key}: {value}" if value else key
                    return unresolvable(self.name, f"node(s) had untolerated taint {{{shown}}}")
        if self.ports and spec.host_ports and port_holder(task, node, future, without):
            # Unschedulable, not unresolvable: preempting the holder frees the port.
            return unschedulable(self.name, NODE_PORTS)
        pods = self.pods
        if pods is not None and pods.reads_pods(task):
            why = pods.refusal(task, node.labels, future, without)
            if why:
                # kube: required affinity unmet is unresolvable (no eviction creates a pod);
                # an anti-affinity is resolved by evicting the pods it is against
                return (unresolvable if why == AFFINITY else unschedulable)(self.name, why)
        return None
