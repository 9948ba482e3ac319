"""The rare counters the dashboard plots exist at 0 from a service's first scrape (issue 26,
item 12): a series Prometheus never saw reads "No data" in Grafana, indistinguishable from a
service that is not scraped at all, where a healthy one should say 0.

Every service runs as its own process on the session's real nats-server, as `tessera up` and
the chart run it, and is scraped over HTTP before anything was applied."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsserver import free_port
from tests.processes import ROOT, ServiceProcess, wait_until

DASHBOARD = ROOT / "charts" / "tessera" / "dashboards" / "tessera.json"
COUNTERS = ("tessera_dead_letters_total", "tessera_events_unknown_total")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_the_dashboard_queries_these_counters() -> None:
    """What this file guards is what the dashboard reads: a renamed counter shows here first."""
    text = DASHBOARD.read_text()
    assert all(name in text for name in COUNTERS)


@pytest.mark.parametrize("name", ["admission", "queue", "scheduler", "allocator", "nodeagent"])
async def test_a_fresh_service_exports_the_dashboards_counters_at_zero(
    name: str, jetstream_log: JetStreamLog, nats_url: str
) -> None:
    log = jetstream_log
    port = free_port()
    args = ["--nats", nats_url, "--root", log.subjects.root, "--stream", log.stream,
            "--metrics-port", str(port), "--metrics-addr", "127.0.0.1"]  # fmt: skip
    if name == "nodeagent":
        args += ["--inventory", str(ROOT / "examples" / "inventory.yaml")]
    proc = ServiceProcess(f"services.{name}", args)
    try:
        await asyncio.to_thread(proc.start, f"{name} ready")

        async def ready() -> bool:
            return await asyncio.to_thread(_ready, port)

        await wait_until(ready, 15, f"{name} /readyz answers 200")
        body = await asyncio.to_thread(_scrape, port)
    finally:
        proc.stop()
    samples = [s for f in text_string_to_metric_families(body) for s in f.samples]
    for counter in COUNTERS:
        mine = [s for s in samples if s.name == counter]
        assert mine, f"{name}: no {counter} series before any event"
        assert {s.labels["service"] for s in mine} == {name}
        assert all(s.value == 0 for s in mine), mine
