"""The node agent writes a node's registration expecting the node subject's last message as it
knows it (its recovery, its own writes), without reading the subject per node (issue 29: 5,000
round trips at start on a 5,000-node cluster). Another writer's message there is a conflict:
read, decided again, and the registration still lands — once."""

from __future__ import annotations

from contracts.events import NodeLost, NodeRegistered
from contracts.registry import default_registry
from services.kube.client import nodes_path
from services.kube.nodesource import KubeNodeAgent
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import EventService, Outgoing
from tests.kube.cluster import Cluster


async def _node_events(log: JetStreamLog, node: str) -> list[str]:
    return [m.headers["Tessera-Type"] async for m in log.replay(1, log.subjects.node(node))]


async def test_a_registration_lands_over_another_writers_message(cluster: Cluster, jetstream_log: JetStreamLog) -> None:
    log = jetstream_log
    await cluster.create_node("n1")
    obj = await cluster.kube.get(nodes_path("n1"))
    agent = KubeNodeAgent(log, cluster.kube)
    await agent.recover()
    await agent.on_node("upsert", obj)
    await agent.on_node("upsert", obj)  # unchanged: nothing more
    assert await _node_events(log, "n1") == ["NodeRegistered"]

    # another writer (an agent replica, an operator's tool) says the node is lost meanwhile
    first = await log.last(log.subjects.node("n1"))
    assert first is not None
    outsider = EventService("outsider", log, [], {})
    await outsider.publish(Outgoing(log.subjects.node("n1"), NodeLost(node="n1", reason="elsewhere"), first.seq))
    await cluster.kube.patch(nodes_path("n1"), {"metadata": {"labels": {"zone": "b"}}})
    obj = await cluster.kube.get(nodes_path("n1"))
    await agent.on_node("upsert", obj)  # its cache says registered at `first`: a conflict
    assert await _node_events(log, "n1") == ["NodeRegistered", "NodeLost", "NodeRegistered"]

    restarted = KubeNodeAgent(log, cluster.kube)  # recovery learns the subject's last message
    await restarted.recover()
    await restarted.on_node("upsert", obj)
    assert await _node_events(log, "n1") == ["NodeRegistered", "NodeLost", "NodeRegistered"]
    last = await log.last(log.subjects.node("n1"))
    assert last is not None and isinstance(default_registry().decode("NodeRegistered", last.data), NodeRegistered)
