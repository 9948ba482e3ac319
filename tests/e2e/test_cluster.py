"""Clustered JetStream (issue 15 item 3): three nats-servers routed on loopback ports, R3
streams, the services knowing every URL. The stream's leader is killed with -9 mid-wave: every
event acknowledged before is still in the log, in place, the wave completes, and the whole log
audits clean (`services.core.audit`: nothing doubled, no card over capacity)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.events import PlacementCommitted
from contracts.registry import default_registry
from services.cli.connection import Unreachable
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.core.audit import audit
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.e2e.test_system import EXAMPLES, WAVE, apply, wave
from tests.processes import wait_until


@pytest.fixture
def cluster_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path / "state", inventory=str(EXAMPLES / "inventory.yaml"), nats_cluster=3)
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


async def test_killing_the_stream_leader_mid_wave_loses_nothing(cluster_plane: ControlPlane) -> None:
    plane = cluster_plane
    assert len(plane.url.split(",")) == 3
    log = await JetStreamLog.connect(plane.url)
    try:
        info = await log.js.stream_info(log.stream)
        assert info.config.num_replicas == 3
        reply = await apply(plane.url, wave())
        assert {r.outcome for r in reply.results} == {"accepted"}  # JobSubmitted acknowledged
        registry = default_registry()

        async def some_committed() -> bool:
            types = [m.headers.get("Tessera-Type") async for m in log.replay()]
            return types.count(PlacementCommitted.type_name()) >= 4

        await wait_until(some_committed, timeout=60, what="the wave to be under way")
        acknowledged = [(m.seq, m.subject, m.data) async for m in log.replay()]
        leader = (await log.js.stream_info(log.stream)).cluster.leader
        victim = next(s for s in plane.servers if s.name == leader)
        os.kill(victim.pid or 0, signal.SIGKILL)

        report: dict = {}

        async def wave_done() -> bool:
            nonlocal report
            try:
                report = await fetch_report(plane.url, "tessera")
            except Unreachable:  # the few seconds the servers left elect the stream's leader
                return False
            done = [p for p in report["pods"] if p["namespace"] == "serve" and p["phase"] == "Succeeded"]
            return len(done) == WAVE

        await wait_until(wave_done, timeout=120, what="the wave to complete on two servers")
        after = [(m.seq, m.subject, m.data) async for m in log.replay()]
        assert after[: len(acknowledged)] == acknowledged  # every acknowledged event, in place
        assert (await log.js.stream_info(log.stream)).cluster.leader != leader

        last: list[str] = []

        async def settled() -> bool:
            # a service that ended on the failover (a fetch answered 503 once did) is the cause
            assert not plane.exited(), {k: plane._why(k, rc) for k, rc in plane.exited().items()}
            events = [(m.seq, registry.decode(m.headers["Tessera-Type"], m.data))
                      async for m in log.replay()]  # fmt: skip
            findings = audit(events, report["pods"])
            assert not findings.broken, findings.broken
            last[:] = findings.unsettled
            return not findings.unsettled

        try:
            await wait_until(settled, timeout=60, what="the log to settle (ledgers = running pods)")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {last[:8]}") from None
        assert not plane.exited(), "every service rode out the failover"
    finally:
        await log.close()
