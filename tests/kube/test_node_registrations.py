"""The node agent writes a node's registration expecting the node subject's last message as it
knows it (its recovery, its own writes), without reading the subject per node (issue 29: 5,000
round trips at start on a 5,000-node cluster). Another writer's message there is a conflict:
read, decided again, and the registration still lands — once."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest

from contracts import hami
from contracts.events import NodeLost, NodeRegistered, NodesListed
from contracts.registry import default_registry
from services.kube.client import nodes_path
from services.kube.nodesource import KubeNodeAgent
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.memory import MemoryLog
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


async def _types(log: JetStreamLog) -> AsyncIterator[str]:
    async for m in log.replay(1):
        yield m.headers["Tessera-Type"]


async def _untainted(cluster: Cluster, names: list[str]) -> None:
    """Until the node lifecycle controller has lifted the not-ready taint of these Ready nodes
    (asynchronous on a real server): a node that changes mid-test is registered again."""

    async def loop() -> None:
        while True:
            got = [await cluster.kube.get(nodes_path(n)) for n in names]
            if not any((o.get("spec") or {}).get("taints") for o in got):
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(loop(), 20)


async def _listed(log: JetStreamLog, count: int) -> list[tuple[int, str]]:
    """The log's (sequence, type) once it holds `count` NodesListed (the agent's own signal)."""

    async def loop() -> list[tuple[int, str]]:
        while True:
            got = [(m.seq, m.headers["Tessera-Type"]) async for m in log.replay(1)]
            if sum(t == "NodesListed" for _, t in got) >= count:
                return got
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(loop(), 20)


async def test_the_agent_says_when_its_listing_is_registered(cluster: Cluster, jetstream_log: JetStreamLog) -> None:
    """`NodesListed` comes after every node of the first listing (the scheduler's first session
    waits for it); a restart that finds every node as it was writes nothing, one that
    registers a new node says so again."""
    log = jetstream_log
    for name in ("n1", "n2", "n3"):
        await cluster.create_node(name)
    await cluster.create_node("down", ready=False)  # listed, but not a place to schedule
    for start, new in ((1, ""), (1, ""), (2, "n4")):
        if new:
            await cluster.create_node(new)
        await _untainted(cluster, ["n1", "n2", "n3", new] if new else ["n1", "n2", "n3"])
        agent = KubeNodeAgent(log, cluster.kube)
        await agent.recover()
        stopping = asyncio.Event()
        task = asyncio.create_task(agent.background(stopping))
        try:
            got = await _listed(log, start)
            await asyncio.wait_for(agent.listing_done.wait(), 20)
        finally:
            stopping.set()
            await task  # it stops its own loops (cancelling it first would leave them running)
        marks = [seq for seq, t in got if t == "NodesListed"]
        assert len(marks) == start
        registered = [seq for seq, t in got if t == "NodeRegistered"]
        assert len(registered) == 2 + start and max(registered) < marks[-1]
        last = await log.last(log.subjects.inventory("nodeagent"))
        assert last is not None
        said = default_registry().decode("NodesListed", last.data)
        assert isinstance(said, NodesListed) and said.nodes == 2 + start
    assert [t async for t in _types(log)].count("NodesListed") == 2  # the quiet restart wrote none


async def test_a_listing_registers_in_one_pipeline_usage_first_and_conflicts_again(
    cluster: Cluster, jetstream_log: JetStreamLog
) -> None:
    """The first listing's nodes go in pipelined appends: a node's NodeUsage (another
    scheduler's pod there) lands right before its registration, and a node whose subject
    another writer moved meanwhile is read and registered after that writer's message."""
    from tests.kube.test_shared_cluster import cpu_pod

    log = jetstream_log
    for name in ("n1", "n2", "n3"):
        await cluster.create_node(name)
    await cluster.create_pod(cpu_pod("theirs", "10", scheduler="default-scheduler", node="n2"))
    await _untainted(cluster, ["n1", "n2", "n3"])
    agent = KubeNodeAgent(log, cluster.kube)
    await agent.recover()  # the log is empty: it expects every node subject to be empty too
    outsider = EventService("outsider", log, [], {})
    await outsider.publish(Outgoing(log.subjects.node("n3"), NodeLost(node="n3", reason="elsewhere"), 0))
    stopping = asyncio.Event()
    task = asyncio.create_task(agent.background(stopping))
    try:
        await asyncio.wait_for(agent.listing_done.wait(), 20)
    finally:
        stopping.set()
        await task
    got = [(m.subject.rsplit(".", 2)[-2:], m.headers["Tessera-Type"]) async for m in log.replay(1)]
    order = [(kind, subject[-1]) for subject, kind in got]
    assert order.count(("NodeRegistered", "n1")) == 1 and order.count(("NodeRegistered", "n2")) == 1
    assert order.index(("NodeUsage", "n2")) == order.index(("NodeRegistered", "n2")) - 1
    assert order.index(("NodeLost", "n3")) < order.index(("NodeRegistered", "n3"))  # read, then written
    assert order.count(("NodeRegistered", "n3")) == 1
    assert order[-1] == ("NodesListed", "nodeagent")


async def test_a_card_kept_off_is_logged_once_not_at_every_node_event(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A MIG card with no geometry for its model is kept off, and the node agent says so: it
    said so at every Node watch event — HAMi's handshake changes the Node every 30 s, so a
    warning per such card per node every 30 s for as long as it ran. Now once when it appears
    (and again for a card newly kept off)."""
    def mig_card(i: int) -> dict[str, object]:
        return {"id": f"GPU-{i}", "index": i, "count": 7, "devmem": 81920, "devcore": 100,
                "type": "NVIDIA-A100-SXM4-80GB", "mode": "mig", "health": True}  # fmt: skip

    def node(cards: int, seen: str) -> dict[str, object]:
        return {"metadata": {"name": "g1", "annotations": {
                    hami.NVIDIA_REGISTER: json.dumps([mig_card(i) for i in range(cards)]), "seen": seen}},
                "spec": {}, "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "14"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip

    agent = KubeNodeAgent(MemoryLog(), cluster.kube)

    def warned() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "GPU-" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="services.kube.nodesource"):
        for seen in ("1", "2", "3"):  # three Node events, the card unchanged
            await agent._node_event("g1", node(1, seen))
        assert len(warned()) == 1, warned()
        await agent._node_event("g1", node(2, "4"))  # a second card kept off: said once too
        assert [w.split("card ")[1].split()[0] for w in warned()] == ["GPU-0", "GPU-1"], warned()
