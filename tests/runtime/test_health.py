"""The probes the chart points the kubelet at: `/healthz` (the loop turns), `/readyz` (recovered
and connected), `/metrics` beside them on the same port, over real HTTP."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry

from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.health import Health
from services.runtime.metrics import ServiceMetrics
from services.runtime.natsserver import free_port
from tests.processes import ServiceProcess, wait_until


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


async def test_a_service_process_serves_the_probes_the_chart_uses(jetstream_log: JetStreamLog, nats_url: str) -> None:
    """The scheduler as the chart runs it (`--metrics-port`, `--metrics-addr`): ready once it
    printed `ready`, and /metrics beside the probes; the stream gets the replicas asked for."""
    port = free_port()
    log = jetstream_log
    proc = ServiceProcess("services.scheduler", [
        "--nats", nats_url, "--root", log.subjects.root, "--stream", log.stream,
        "--metrics-port", str(port), "--metrics-addr", "127.0.0.1", "--stream-replicas", "1"])  # fmt: skip
    try:
        await asyncio.to_thread(proc.start, "scheduler ready")
        assert await asyncio.to_thread(_get, port, "/healthz") == (200, "ok\n")

        async def ready() -> bool:
            return (await asyncio.to_thread(_get, port, "/readyz"))[0] == 200

        await wait_until(ready, 10, "/readyz answers 200")
        status, body = await asyncio.to_thread(_get, port, "/metrics")
        assert status == 200 and "tessera_event_handle_seconds" in body
        info = await log.js.stream_info(log.stream)
        assert info.config.num_replicas == 1
    finally:
        proc.stop()
