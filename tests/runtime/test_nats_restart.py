"""Durability: stopping nats-server mid-run and restarting it on the same data dir loses no acked event."""

from __future__ import annotations

from pathlib import Path

from contracts.events import NodeLost
from contracts.registry import default_registry
from services.runtime.eventlog import Appended, Entry
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsserver import NatsServer


def entry(log: JetStreamLog, i: int) -> Entry:
    reg = default_registry()
    event = NodeLost(node=f"n{i}")
    return Entry(
        log.subjects.node(f"n{i % 5}"),
        reg.encode(event),
        reg.envelope(event, msg_id=f"r{i}").to_headers(),
    )


async def test_acknowledged_events_survive_a_server_restart(tmp_path: Path) -> None:
    server = NatsServer(data_dir=tmp_path / "js").start()
    try:
        log = await JetStreamLog.connect(server.url)
        acked = [r for r in await log.append_pipelined([entry(log, i) for i in range(200)])]
        assert all(isinstance(r, Appended) for r in acked)
        server.stop()  # SIGTERM while the client is connected
        server.start()  # same port, same store dir; the client reconnects by itself
        await log.wait_ready()
        more = await log.append_pipelined([entry(log, i) for i in range(200, 250)])
        assert all(isinstance(r, Appended) and not r.duplicate for r in more)
        replayed = [m async for m in log.replay()]
        nodes = [default_registry().decode("NodeLost", m.data).node for m in replayed]  # type: ignore[attr-defined]
        assert nodes == [f"n{i}" for i in range(250)]
        # De-duplication state survives too: re-sending an acked id is still a duplicate.
        again = await log.append(entry(log, 3))
        assert isinstance(again, Appended) and again.duplicate
        await log.close()
    finally:
        server.stop()
    assert server.process is None
