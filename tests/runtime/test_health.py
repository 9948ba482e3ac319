"""The probes the chart points the kubelet at: `/healthz` (the loop turns), `/readyz` (recovered
and connected), `/metrics` beside them on the same port, over real HTTP."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry

from services.runtime.health import Health
from services.runtime.metrics import ServiceMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_liveness_fails_only_when_the_loop_stalls_past_the_limit() -> None:
    clock = Clock()
    health = Health(stall=30, clock=clock)
    clock.now += 29
    assert health.live() == (True, "ok")
    clock.now += 2
    ok, why = health.live()
    assert not ok and "31s" in why and "30s" in why
    health.tick()
    assert health.live()[0]


def test_readiness_needs_recovery_then_every_check() -> None:
    health = Health()
    connected = [True]
    health.checks["nats connected"] = lambda: connected[0]
    assert health.readiness() == (False, "recovering from the log")
    health.ready = True
    assert health.readiness() == (True, "ok")
    connected[0] = False
    assert health.readiness() == (False, "not ready: nats connected")


def test_probes_and_metrics_share_one_http_server() -> None:
    clock = Clock()
    health = Health(stall=10, clock=clock)
    metrics = ServiceMetrics("probe-test", CollectorRegistry())
    metrics.events.labels("probe-test", "JobSubmitted", "handled").inc()
    server = metrics.serve(0, health=health)
    try:
        port = server.server_port
        assert _get(port, "/healthz") == (200, "ok\n")
        assert _get(port, "/readyz") == (503, "recovering from the log\n")
        health.ready = True
        assert _get(port, "/readyz") == (200, "ok\n")
        clock.now += 11
        status, body = _get(port, "/healthz")
        assert status == 503 and "stalled" in body
        status, body = _get(port, "/metrics")
        assert status == 200
        assert 'tessera_events_processed_total{outcome="handled",service="probe-test",type="JobSubmitted"} 1.0' in body
    finally:
        server.shutdown()
        server.server_close()


async def test_the_beat_stamps_from_the_loop_until_stopped() -> None:
    clock = Clock()
    health = Health(stall=5, clock=clock)
    stopping = asyncio.Event()
    clock.now += 100
    assert not health.live()[0]
    task = asyncio.create_task(health.beat(stopping, every=0.01))
    await asyncio.sleep(0)  # one turn of the loop: the first stamp
    assert health.live()[0]
    stopping.set()
    await asyncio.wait_for(task, 5)
