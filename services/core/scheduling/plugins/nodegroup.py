"""`nodegroup` (Volcano `plugins/nodegroup`): a queue's jobs run in the node groups its
`spec.affinity` names — nodes labelled `volcano.sh/nodegroup-name` — so teams sharing a cluster
each keep to their own nodes.

Predicate, as Volcano's: a node without the label fits only a queue without any affinity, and
only with `strict: false` (default true); a labelled node never fits such a queue; for a queue
with affinity the node's group must be required or preferred, and not anti-required — unless
anti-preferred, which lets it in (Volcano's order of checks). Score: 100 for a required group,
plus 50 for a preferred one (or, with `enablePreferredOrder`, 50 × (n − i)/n for the i-th of n),
and −1 for an anti-preferred one. With `enableHierarchy` a queue without affinity takes its
nearest ancestor's. Volcano's per-group resource limits (a Queue annotation) are not read.

The affinity a pod's queue runs under is put in the pod's shape, so the node cache
(actions/nodes.py) keeps its results per node and shape right and stays on.
"""

from __future__ import annotations

from contracts.workloads import NodeGroupAffinity
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import NodeInfo, TaskInfo, task_shape
from services.core.scheduling.session import Session
from services.core.scheduling.status import Status, unschedulable

GROUP_LABEL = "volcano.sh/nodegroup-name"
BASE_SCORE = 100.0


def _set(g: NodeGroupAffinity | None) -> bool:
    return g is not None and bool(g.required or g.preferred or g.anti_required or g.anti_preferred)


def admits(g: NodeGroupAffinity, group: str) -> bool:
    ok = group in g.required or group in g.preferred
    if group in g.anti_required:
        ok = False
    return ok or group in g.anti_preferred


class NodeGroupPlugin:
    name = "nodegroup"

    def __init__(self, conf: PluginConf) -> None:
        self.strict = conf.arguments.get("strict", True) is not False
        self.ordered = conf.arguments.get("enablePreferredOrder", False) is True
        self.hierarchy = conf.enabled("enableHierarchy")
        self.affinity: dict[str, NodeGroupAffinity | None] = {}  # queue → the affinity it runs under
        self.queue_of: dict[str, str] = {}  # job key → queue

    def on_session_open(self, ssn: Session) -> None:
        own = {name: q.spec.node_groups for name, q in ssn.queues.items()}
        self.affinity = dict(own)
        if self.hierarchy:
            for name in own:
                self.affinity[name] = self._inherited(ssn, name, own)
        self.queue_of = {key: job.queue for key, job in ssn.jobs.items()}
        for job in ssn.jobs.values():  # what the queue allows is part of each pod's shape, so
            g = ("nodegroup", self.affinity.get(job.queue))  # results cached per node and shape
            for t in job.pending_tasks():  # (actions/nodes.py) stay right per queue
                t.shape = (*(t.shape or task_shape(t.spec)), g)

    def _inherited(self, ssn: Session, name: str, own: dict[str, NodeGroupAffinity | None]) -> NodeGroupAffinity | None:
        seen: set[str] = set()
        while name and name not in seen:
            if own.get(name) is not None:
                return own[name]
            seen.add(name)
            q = ssn.queues.get(name)
            if q is None or name == "root":
                return None
            name = q.spec.parent or "root"
        return None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        queue = self.queue_of.get(task.job, "")
        g = self.affinity.get(queue)
        group = node.labels.get(GROUP_LABEL)
        if group is None:
            if not self.strict and not _set(g):
                return None
            return unschedulable(self.name, f"node has no {GROUP_LABEL} label (queue {queue})")
        if g is None or not _set(g):
            return unschedulable(self.name, f"node group {group}: queue {queue} names no node groups")
        if not admits(g, group):
            return unschedulable(self.name, f"node group {group} is not one queue {queue} may use")
        return None

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        group = node.labels.get(GROUP_LABEL)
        g = self.affinity.get(self.queue_of.get(task.job, ""))
        if group is None or g is None:
            return 0.0
        score = BASE_SCORE if group in g.required else 0.0
        if group in g.preferred:
            if self.ordered:
                n = len(g.preferred)
                score += 0.5 * BASE_SCORE * (n - g.preferred.index(group)) / n
            else:
                score += 0.5 * BASE_SCORE
        if group in g.anti_preferred:
            score = -1.0
        return score
