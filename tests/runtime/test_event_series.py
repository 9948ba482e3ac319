"""The events-handled counter and handling-time histogram are plain numbers written at scrape
time (services/runtime/metrics.py); a scrape must read exactly what prometheus_client's own
Counter and Histogram would for the same adds, which dashboards and alerts were built on."""

from __future__ import annotations

import asyncio
import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from contracts.events import PlacementProposed
from contracts.subjects import Subjects
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Followed, StoredMessage
from services.runtime.metrics import BOUNDS, ServiceMetrics
from services.runtime.service import EventService

#: observations on and around every bucket bound (a bound itself counts in its own bucket)
OBSERVED = [0.0, 0.004999, *BOUNDS[:-1], *(b * 1.0001 for b in BOUNDS[:-1]), 12.5, 3e-7]


def _without_created(text: bytes) -> list[str]:
    """The exposition's lines but the creation times (when each series was made)."""
    return [re.sub(r"(_created\{[^}]*\}) .*", r"\1 <time>", line) for line in text.decode().splitlines()]


def test_a_scrape_reads_what_prometheus_clients_own_series_would() -> None:
    ours = ServiceMetrics("svc", CollectorRegistry())
    theirs = CollectorRegistry()
    counter = Counter("tessera_events_processed_total", "Events handled, by type and outcome",
                      ["service", "type", "outcome"], registry=theirs)  # fmt: skip
    hist = Histogram("tessera_event_handle_seconds", "Time to handle one event, including appending its results",
                     ["service", "type"], buckets=BOUNDS, registry=theirs)  # fmt: skip
    for i, seconds in enumerate(OBSERVED):
        kind = ("JobSubmitted", "PlacementProposed")[i % 2]
        ours.events.labels("svc", kind, "handled").inc()
        counter.labels("svc", kind, "handled").inc()
        ours.handle_seconds.labels("svc", kind).observe(seconds)
        hist.labels("svc", kind).observe(seconds)
    ours.events.labels("svc", "JobSubmitted", "retried").inc(2)
    counter.labels("svc", "JobSubmitted", "retried").inc(2)

    ours_text = _without_created(generate_latest(ours.registry))
    theirs_text = _without_created(generate_latest(theirs))
    families = [line for line in theirs_text if "tessera_events_processed" in line or "tessera_event_handle" in line]
    assert families and [line for line in ours_text if line in families] == families
    # 0.0 and 0.0001 itself (every other observation is the other type's): a bound is its own bucket's
    assert 'tessera_event_handle_seconds_bucket{le="0.0001",service="svc",type="JobSubmitted"} 2.0' in families
    assert ours.count("handled") == len(OBSERVED) and ours.count("retried", "JobSubmitted") == 2


def test_every_handled_delivery_is_counted_and_timed_once() -> None:
    async def run() -> ServiceMetrics:
        log = MemoryLog(Subjects("t"))
        handled: list[int] = []

        async def handler(event: object, rx: object) -> None:
            handled.append(1)

        service = EventService(name="svc", log=log, filter_subjects=["t.ev.>"],
                               handlers={PlacementProposed: handler})  # fmt: skip
        registry = service.registry
        event = PlacementProposed(namespace="ns", name="j", placements=(), based_on=1)
        for seq in range(1, 4):
            headers = registry.envelope(event, msg_id=f"m{seq}").to_headers()
            await service.handle(Followed(StoredMessage(seq, "t.ev.job.ns.j", registry.encode(event), headers)))
        assert len(handled) == 3
        assert service.metrics is not None
        return service.metrics

    metrics = asyncio.run(run())
    text = generate_latest(metrics.registry).decode()
    assert 'tessera_events_processed_total{outcome="handled",service="svc",type="PlacementProposed"} 3.0' in text
    assert 'tessera_event_handle_seconds_count{service="svc",type="PlacementProposed"} 3.0' in text
    assert 'tessera_event_handle_seconds_bucket{le="+Inf",service="svc",type="PlacementProposed"} 3.0' in text


def test_a_series_with_the_wrong_number_of_labels_is_refused_when_made_not_at_each_scrape() -> None:
    """prometheus_client refuses it at `labels()`; a series made anyway broke every scrape."""
    import pytest

    metrics = ServiceMetrics("svc", CollectorRegistry())
    with pytest.raises(ValueError, match="label values"):
        metrics.events.labels("svc", "JobSubmitted")
    assert b"tessera_events_unknown_total" in generate_latest(metrics.registry)


def test_the_handling_times_a_delivery_takes_fall_in_buckets_of_their_own() -> None:
    """A delivery is handled in 0.05–2 ms: with prometheus_client's default buckets (5 ms and
    up) every one of them was in the first, and no quantile could tell 0.1 ms from 2 ms."""
    metrics = ServiceMetrics("svc", CollectorRegistry())
    times = [0.00005, 0.0002, 0.0004, 0.0008, 0.002]
    for seconds in times:
        metrics.handle_seconds.labels("svc", "JobSubmitted").observe(seconds)
    text = generate_latest(metrics.registry).decode()
    buckets = [float(v) for v in re.findall(r'tessera_event_handle_seconds_bucket\{le="[^"]+",service="svc",'
                                            r'type="JobSubmitted"\} (\S+)', text)]  # fmt: skip
    assert sorted(set(buckets)) == [float(n) for n in range(1, len(times) + 1)]  # each its own bucket
    assert BOUNDS[-1] == float("inf") and list(BOUNDS) == sorted(BOUNDS) and BOUNDS[-2] >= 10
