"""`python -m services.nodeagent` as a real process on JetStream: registration, heartbeats, loss."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.events import NodeLost, NodeRegistered
from services.nodeagent.heartbeat import all_heartbeats, decode_beat
from services.nodeagent.monitor import NodeMonitor
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.allocator.scenario import decoded
from tests.processes import ServiceProcess, wait_until

INVENTORY = """
nodes:
  - name: npu
    count: 2
    cpu: "192"
    memory: 1536Gi
    devices: [{type: Ascend910B3, count: 8}]
"""


@pytest.fixture
def processes() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for p in started:
        p.stop()


async def test_agent_process_registers_its_nodes_heartbeats_and_is_lost_when_stopped(
    jetstream_log: JetStreamLog, nats_url: str, tmp_path: Path, processes: list[ServiceProcess]
) -> None:
    log, s = jetstream_log, jetstream_log.subjects
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text(INVENTORY)
    beats: asyncio.Queue[str] = asyncio.Queue()

    async def heard(msg) -> None:  # type: ignore[no-untyped-def]
        beat = decode_beat(msg.data)
        if beat is not None:
            beats.put_nowait(beat.node)

    sub = await log.nc.subscribe(all_heartbeats(s), cb=heard)
    args = ["--nats", nats_url, "--root", s.root, "--stream", log.stream, "--ack-wait", "2",
            "--inventory", str(inventory), "--heartbeat", "0.2"]  # fmt: skip
    agent = ServiceProcess("services.nodeagent", args)
    processes.append(agent.start("nodeagent ready"))
    nodes = decoded([m async for m in log.replay(1, s.all_nodes())])
    assert [n.node for n in nodes if isinstance(n, NodeRegistered)] == ["npu-0", "npu-1"]
    assert {len(n.cards) for n in nodes if isinstance(n, NodeRegistered)} == {8}
    async with asyncio.timeout(5):
        heard_from = {await beats.get(), await beats.get()}
    assert heard_from == {"npu-0", "npu-1"}
    await sub.unsubscribe()

    monitor = NodeMonitor(log, timeout=0.6, check_every=0.1)
    await monitor.recover()
    await monitor.start(log.nc)
    try:
        agent.stop()  # heartbeats stop; the monitor declares both nodes lost, once each

        async def both_lost() -> bool:
            events = decoded([m async for m in log.replay(1, s.all_nodes())])
            return sum(isinstance(e, NodeLost) for e in events) == 2

        await wait_until(both_lost, timeout=10, what="NodeLost for both nodes")
        assert await monitor.check() == []  # further checks do not repeat the loss
        events = decoded([m async for m in log.replay(1, s.all_nodes())])
        assert sorted(e.node for e in events if isinstance(e, NodeLost)) == ["npu-0", "npu-1"]
    finally:
        await monitor.aclose()
