"""`network-topology-aware` (Volcano `plugins/network-topology-aware`): accepted in a
configuration as Volcano writes it. The placement it steers is allocate's HyperNode search
(actions/topology.py), which reads its `weight` argument (default 1): how much a HyperNode's
fullness counts when the gang fits in several of one tier. It adds no node-order hook, so the
node caches stay on for every job.
"""

from __future__ import annotations

from services.core.scheduling.config import PluginConf
from services.core.scheduling.session import Session


class NetworkTopologyAwarePlugin:
    name = "network-topology-aware"

    def __init__(self, conf: PluginConf) -> None:
        self.weight = int(conf.arguments.get("weight", 1))

    def on_session_open(self, ssn: Session) -> None:
        pass
