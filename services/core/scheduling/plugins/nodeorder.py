"""`nodeorder` (Volcano wraps kube-scheduler scores, MaxNodeScore 100): least requested
(weight `leastrequested.weight`, default 1), most requested (`mostrequested.weight`, 0) and
balanced allocation (`balancedresource.weight`, 1) over cpu and memory, after adding the task;
preferred node affinity (`nodeaffinity.weight`, 2: the matched terms' weights, unnormalized as
Volcano adds them); PreferNoSchedule taints (`tainttoleration.weight`, 3: fewer untolerated
ones score higher, normalised 0..100);
inter-pod affinity (`podaffinity.weight`, 2: kube-scheduler's InterPodAffinity score, interpod.py)
and topology spread (`podtopologyspread.weight`, 2: PodTopologySpread's, topologyspread.py)."""

from __future__ import annotations

from contracts.workloads import Toleration
from services.core.scheduling.config import PluginConf
from services.core.scheduling.interpod import PodIndex, index_of
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.nodelabels import intolerable_preferences, preferred_score
from services.core.scheduling.session import Session
from services.core.scheduling.topologyspread import spread_of


def _weight(conf: PluginConf, key: str, default: int) -> int:
    v = conf.arguments.get(key)
    return default if v is None else int(v)


class NodeOrderPlugin:
    name = "nodeorder"

    def __init__(self, conf: PluginConf) -> None:
        self.least = _weight(conf, "leastrequested.weight", 1)
        self.most = _weight(conf, "mostrequested.weight", 0)
        self.balanced = _weight(conf, "balancedresource.weight", 1)
        self.node_affinity = _weight(conf, "nodeaffinity.weight", 2)
        self.taint_toleration = _weight(conf, "tainttoleration.weight", 3)
        self.nodes: tuple[NodeInfo, ...] = ()
        #: tolerations → the most PreferNoSchedule taints they leave on any node (the scale)
        self._most_intolerable: dict[tuple[Toleration, ...], int] = {}
        self.pod_affinity = _weight(conf, "podaffinity.weight", 2)
        self.spread = _weight(conf, "podtopologyspread.weight", 2)
        self.pods: PodIndex | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.nodes = tuple(ssn.node_list) if self.taint_toleration and any(
            effect == "PreferNoSchedule" for n in ssn.node_list for _, _, effect in n.taints) else ()
        self._most_intolerable = {}
        if self.pod_affinity or self.spread:
            pods = index_of(ssn)
            self.pods = pods if pods.active else None  # no pod has a term: nothing to score

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        alloc = node.allocatable
        req = task.resreq
        cpu_used = node.used.cpu + req.cpu
        mem_used = node.used.memory + req.memory
        fc = cpu_used / alloc.cpu if alloc.cpu else 1.0
        fm = mem_used / alloc.memory if alloc.memory else 1.0
        score = 0.0
        if self.least:
            least = (max(0.0, 1 - fc) * 100 + max(0.0, 1 - fm) * 100) / 2
            score += self.least * int(least)
        if self.most:
            most = (min(1.0, fc) * 100 + min(1.0, fm) * 100) / 2
            score += self.most * int(most)
        if self.balanced:
            if fc > 1 or fm > 1:
                bal = 0.0
            else:
                bal = (1 - abs(fc - fm) / 2) * 100
            score += self.balanced * int(bal)
        if self.nodes:
            score += self.taint_toleration * self._taint_score(task, node)
        if self.node_affinity and task.spec.preferred_affinity:
            score += self.node_affinity * preferred_score(task.spec, node.labels, node.name)
        pods = self.pods
        if pods is not None:
            if self.pod_affinity and pods.affinity_aware(task):
                score += self.pod_affinity * pods.score(task, node.pos)
            if self.spread and task.spec.spread:
                score += self.spread * spread_of(pods, task).score(node.pos)
        return score

    def _taint_score(self, task: TaskInfo, node: NodeInfo) -> int:
        """kube-scheduler's TaintToleration score, normalised as it is (reversed, 0..100): fewer
        intolerable PreferNoSchedule taints score higher; the scale is the most any node has for
        these tolerations (over the session's nodes, where kube-scheduler takes the feasible ones)."""
        key = task.spec.tolerations
        most = self._most_intolerable.get(key)
        if most is None:
            most = self._most_intolerable[key] = max(
                intolerable_preferences(task.spec, n.taints) for n in self.nodes)
        if not most:
            return 0
        return 100 - intolerable_preferences(task.spec, node.taints) * 100 // most
