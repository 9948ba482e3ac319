"""`predicates` (Volcano wraps kube-scheduler filters): node selector and required node
affinity (`predicate.NodeAffinityEnable`), taints/tolerations (`predicate.TaintTolerationEnable`).
Resource fit runs first in the actions, on FutureIdle, as Volcano's allocate does."""

from __future__ import annotations

from contracts.workloads import LabelRequirement, Toleration
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import Status, unresolvable

NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


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


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, conf: PluginConf) -> None:
        args = conf.arguments
        self.affinity = _truthy(args.get("predicate.NodeAffinityEnable"))
        self.taints = _truthy(args.get("predicate.TaintTolerationEnable"))

    def on_session_open(self, ssn: Session) -> None:
        pass

    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
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
        return None
