"""The node monitor across a frozen nats-server (SIGSTOP/SIGCONT of the test's own server)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import nats
import pytest

from contracts.events import NodeLost, NodeRegistered, TaskFinished, TaskStarted
from services.nodeagent.heartbeat import encode_beat, heartbeat_subject
from services.nodeagent.monitor import NodeMonitor
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsserver import NatsServer
from tests.allocator.scenario import decoded, put
from tests.processes import wait_until

TIMEOUT = 2.0  # a loaded machine delays a beat by a second now and then
OUTAGE = 3 * TIMEOUT  # the scenario: the broker frozen for several node timeouts


@pytest.mark.parametrize("frozen", ["while watching", "before the first round trip"])
async def test_a_frozen_broker_loses_no_node_and_fails_no_pod(tmp_path: Path, frozen: str) -> None:
    """`kill -STOP` of nats-server for longer than the node timeout: the monitor declared every
    node lost and failed every running pod (its writes landing once the server woke), though
    the nodes beat throughout. It hears nothing while frozen, so it decides nothing, and
    counts silence from when it hears again; a node that really stops is still lost. Frozen
    right after the monitor starts (a queue service restarting into an outage) is the same."""
    server = NatsServer(data_dir=tmp_path / "js").start()
    try:  # a failed connect below must not leave this nats-server running
        assert server.process is not None
        log = await JetStreamLog.connect(server.url)
        beater = await nats.connect(server.url)
        monitor = NodeMonitor(log, timeout=TIMEOUT, check_every=0.1)
        s = log.subjects
        beating = asyncio.Event()
        beating.set()

        async def beat() -> None:  # the node agent: one beat every 0.1 s, whatever the server does
            while True:
                await beating.wait()
                with contextlib.suppress(Exception):
                    await beater.publish(heartbeat_subject(s, "a"), encode_beat("a", 0.0))
                await asyncio.sleep(0.1)

        beats = asyncio.create_task(beat())
        stopped = False
        try:
            await put(log, s.node("a"), NodeRegistered(node="a", cpu_milli=1, memory_mib=1))
            await put(log, s.job("ns", "j"), TaskStarted(namespace="ns", name="j", task="t0", node="a"))
            await monitor.recover()
            registered = monitor.state.nodes["a"].last_seen

            async def heard_a() -> bool:
                return monitor.state.nodes["a"].last_seen > registered

            if frozen == "before the first round trip":
                os.kill(server.process.pid, signal.SIGSTOP)
                stopped = True
                await monitor.start(log.nc)
            else:
                await monitor.start(log.nc)
                await wait_until(heard_a, timeout=10, what="the monitor hearing node a")
                os.kill(server.process.pid, signal.SIGSTOP)
                stopped = True
            await asyncio.sleep(OUTAGE)  # the outage itself, not a wait for anything
            os.kill(server.process.pid, signal.SIGCONT)
            stopped = False
            woke = monitor.clock()

            async def judged_after_the_outage() -> bool:  # beats heard for two timeouts since
                return monitor.state.nodes["a"].last_seen > woke + 2 * TIMEOUT

            await wait_until(judged_after_the_outage, timeout=20, what="the monitor hearing the bus again")
            events = decoded([m async for m in log.replay()])
            assert not [e for e in events if isinstance(e, NodeLost | TaskFinished)], events
            assert not monitor.state.nodes["a"].lost

            beating.clear()  # now the node really stops: lost, its task ended, once

            async def lost() -> bool:
                return any(isinstance(e, TaskFinished) for e in decoded([m async for m in log.replay()]))

            await wait_until(lost, timeout=20, what="node a lost once it stopped beating")
            events = decoded([m async for m in log.replay()])
            assert [(type(e).__name__, getattr(e, "exit_code", None)) for e in events[2:]] == [
                ("NodeLost", None), ("TaskFinished", -1)]  # fmt: skip
        finally:
            if stopped:
                os.kill(server.process.pid, signal.SIGCONT)
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats
            await monitor.aclose()
            with contextlib.suppress(Exception):
                await beater.close()
            with contextlib.suppress(Exception):
                await log.close()
    finally:
        server.stop()


async def test_a_frozen_broker_is_noticed_by_its_clients_within_seconds(tmp_path: Path) -> None:
    """/readyz is `nc.is_connected`: with nats-py's default 120 s ping interval it stayed 200
    for the whole 68 s a nats-server was frozen. A service's connection now counts as stale
    after a few unanswered pings (about 15 s), and comes back once the server answers."""
    server = NatsServer(data_dir=tmp_path / "js").start()
    try:  # a failed connect below must not leave this nats-server running
        assert server.process is not None
        log = await JetStreamLog.connect(server.url)
        stopped = False
        try:
            assert log.nc.is_connected
            os.kill(server.process.pid, signal.SIGSTOP)
            stopped = True

            async def noticed() -> bool:
                return not log.nc.is_connected

            await wait_until(noticed, timeout=30, what="the client noticing its frozen server")
            os.kill(server.process.pid, signal.SIGCONT)
            stopped = False

            async def back() -> bool:
                return log.nc.is_connected

            await wait_until(back, timeout=30, what="the client reconnected")
        finally:
            if stopped:
                os.kill(server.process.pid, signal.SIGCONT)
            with contextlib.suppress(Exception):
                await log.close()
    finally:
        server.stop()
