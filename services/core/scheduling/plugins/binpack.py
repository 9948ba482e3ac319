"""`binpack` (Volcano `plugins/binpack/binpack.go`): score = Σ_r w_r·(used_r+req_r)/alloc_r
÷ Σ w_r × 10 × `binpack.weight`, over the resources the task requests that have a weight; a
resource whose used + request exceeds allocatable makes the whole score 0."""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import Session

MAX_NODE_SCORE = 10


class BinpackPlugin:
    name = "binpack"

    def __init__(self, conf: PluginConf) -> None:
        args = conf.arguments
        self.weight = int(args.get("binpack.weight", 1))
        self.weights: dict[str, int] = {
            "cpu": int(args.get("binpack.cpu", 1)),
            "memory": int(args.get("binpack.memory", 1)),
        }
        for name in str(args.get("binpack.resources", "")).split(","):
            name = name.strip()
            if name:
                self.weights[name] = int(args.get(f"binpack.resources.{name}", 1))

    def on_session_open(self, ssn: Session) -> None:
        pass

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        if self.weight == 0:
            return 0.0
        total = 0.0
        weights = 0
        for name in task.resreq.names():
            w = self.weights.get(name, 0)
            if w == 0:
                continue
            alloc = node.allocatable.get(name)
            used = node.used.get(name) + task.resreq.get(name)
            if alloc == 0 or used > alloc:
                return 0.0
            total += w * used / alloc
            weights += w
        if weights == 0:
            return 0.0
        return total / weights * MAX_NODE_SCORE * self.weight
