"""What one scheduling session may hand to the next: work that is a pure function of inputs that
did not change, kept by the identity of those (frozen) inputs.

A session over the openb trace's 1,213 nodes spent most of its ~130 ms rebuilding every node's
working state (`NodeInfo`: resources, cards, taints, the held devices) although one or two pods
waited and one or two nodes had changed since the last session. `SessionMemo` keeps, per node,
the `NodeInfo` the last session built, with the frozen inputs it was built from: the node's
`NodeSnap` (the projection hands out the same object while nothing of the node changed,
`ClusterProjection.snapshot`), the snapshots of the tasks on it and the plugin bookings left on
cards no longer listed. The next session takes that `NodeInfo` as it is when all of these are
the very same (or equal) values and the last session did not change the node — every change to
a node in a session goes through `Session._touch`, which the session's `node_changes` records
and `after` reads. Otherwise the node is built afresh, as without a memo. A kept node's fit
outcomes (`NodeInfo.fit_cache`) are dropped: they may read the session's workload as well
(deviceshare's placement policies score against it). The memo also keeps the interning of the
nodes' static parts (`actions/nodes.py _state_key`), so a kept node's `state_key` stays valid.

So `decide(snapshot, conf, memo=m)` decides exactly what `decide(snapshot, conf)` does: the
memo only saves rebuilding what would be built equal (tests/core/scheduling/test_session_memo.py
holds the two to that over random sequences of node changes, placements, releases and
evictions). Nothing here reads a clock; a memo serves one configuration, and one session at a
time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.core.scheduling import snapshot as st
from services.core.scheduling.model import NodeInfo
from services.core.scheduling.resources import Resource

if TYPE_CHECKING:
    from services.core.scheduling.config import SchedulerConf
    from services.core.scheduling.session import Session

#: interned node classes kept before the memo starts over (a cluster whose labels churn)
MAX_CLASSES = 100_000


@dataclass(slots=True)
class KeptNode:
    """A node as the last session built it, and what it was built from."""

    snap: st.NodeSnap
    stranded: Mapping[str, int] | None  # plugin bookings on cards no longer listed (session.py)
    tasks: tuple[st.TaskSnap, ...]  # the snapshots of the tasks booked on it, in booking order
    node: NodeInfo
    total: Resource  # what it adds to the session's total (its allocatable before device counts)


@dataclass
class SessionMemo:
    """Handed to `decide` session after session (the simulator's, the scheduler service's)."""

    conf: SchedulerConf | None = None
    node_cache: bool = True
    nodes: dict[str, KeptNode] = field(default_factory=dict)
    #: actions/nodes.py `_state_key`'s interning of a node's static part (any numbering works:
    #: it is only compared for equality)
    node_classes: dict[tuple[object, ...], int] = field(default_factory=dict)
    #: record.input_digests' encodings of each node (its inputs, its cards') and each job, by
    #: name, with the frozen snapshot they encode
    node_bytes: dict[str, tuple[st.NodeSnap, bytes, bytes]] = field(default_factory=dict)
    job_bytes: dict[str, tuple[st.JobSnap, bytes]] = field(default_factory=dict)
    #: nodes taken over as they were / built afresh, over the memo's life (for measurements)
    kept: int = 0
    built: int = 0

    def serves(self, conf: SchedulerConf, node_cache: bool) -> None:
        """Start over for another configuration: what was kept was derived under this one."""
        if self.conf is not conf or self.node_cache != node_cache:
            self.conf, self.node_cache = conf, node_cache
            self.forget()

    def forget(self) -> None:
        self.nodes.clear()
        self.node_classes.clear()

    def take(
        self, n: st.NodeSnap, stranded: Mapping[str, int] | None, tasks: tuple[st.TaskSnap, ...]
    ) -> KeptNode | None:
        """The node kept from the last session, when it was built from these very inputs."""
        got = self.nodes.get(n.name)
        if got is None or got.snap is not n or got.stranded != stranded or got.tasks != tasks:
            self.built += 1
            return None
        self.kept += 1
        got.node.fit_cache.clear()
        return got

    def keep(self, kept: KeptNode) -> None:
        self.nodes[kept.snap.name] = kept

    def after(self, ssn: Session) -> None:
        """The session is over: the nodes it changed are built afresh next time, and nodes gone
        from the cluster are dropped."""
        nodes = ssn.node_list
        for pos in set(ssn.node_changes):
            self.nodes.pop(nodes[pos].name, None)
        if len(self.nodes) > len(ssn.nodes):
            for name in [k for k in self.nodes if k not in ssn.nodes]:
                del self.nodes[name]
        if len(self.node_classes) > MAX_CLASSES:
            self.forget()
