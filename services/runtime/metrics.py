"""Prometheus metrics of one service, on a registry of its own (tests run several in-process).

Every service counts the events it handled and parked (`ServiceMetrics`); a service whose state
other projects export too adds gauges computed from that state at scrape time with `export`
(the allocator's cards as HAMi names them, the scheduler's queues as Volcano does), written by
`services.runtime.exposition` after the registry's own metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from services.core.observe import MetricSpec, Series
from services.runtime.exposition import GaugeText
from services.runtime.health import Health, serve_probes


class ServiceMetrics:
    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.service = service
        self.registry = registry or CollectorRegistry()
        self.texts: list[Callable[[], str]] = []  # gauges written at scrape time (`export`)
        self.events = Counter(
            "tessera_events_processed_total",
            "Events handled, by type and outcome",
            ["service", "type", "outcome"],
            registry=self.registry,
        )
        self.unknown = Counter(
            "tessera_events_unknown_total",
            "Events skipped because their type is not known to this service",
            ["service", "type"],
            registry=self.registry,
        )
        self.dead_letters = Counter(
            "tessera_dead_letters_total",
            "Messages parked on the dead-letter subject",
            ["service"],
            registry=self.registry,
        )
        # Prometheus has no series for a label set never incremented, so a dashboard panel on
        # these rare counters reads "No data" (not 0) on a healthy system, and `increase()`
        # misses the first increment of a series born at 1. Their label sets are known here
        # (the service; an unknown event's type is not, and an empty label is no label to
        # PromQL), so every such series exists at 0 from the first scrape.
        self.dead_letters.labels(service)
        self.unknown.labels(service, "")
        self.handle_seconds = Histogram(
            "tessera_event_handle_seconds",
            "Time to handle one event, including appending its results",
            ["service", "type"],
            registry=self.registry,
        )

    def export(self, specs: Sequence[MetricSpec], source: Callable[[], Iterable[Series]],
               const: Sequence[tuple[str, str]] = ()) -> None:  # fmt: skip
        """Serve the gauges `source` computes at each scrape, beside the event counters.

        The scrape runs on the probe server's thread while the event loop moves on: `source`
        must read state that is replaced, never mutated in place (a tuple of the last
        session's series), so a scrape sees one consistent version."""
        text = GaugeText(specs, const)
        self.texts.append(lambda: text.render([text.lines(source())]))

    def export_text(self, render: Callable[[], str]) -> None:
        """Serve text `render` writes in Prometheus' format (`GaugeText.render_each`)."""
        self.texts.append(render)

    def exposition(self) -> bytes:
        """Everything `/metrics` serves: the registry, then the exported gauges."""
        return generate_latest(self.registry) + "".join(t() for t in self.texts).encode()

    def count(self, kind: str, type_name: str = "") -> float:
        """Current value of a counter sample (tests and `get` commands read it)."""
        names = {
            "unknown": "tessera_events_unknown_total",
            "dead_letters": "tessera_dead_letters_total",
        }
        target = names.get(kind, "tessera_events_processed_total")
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name != target:
                    continue
                labels = sample.labels
                if kind not in names and labels.get("outcome") != kind:
                    continue
                if type_name and labels.get("type") != type_name:
                    continue
                total += sample.value
        return total

    def serve(self, port: int, addr: str = "127.0.0.1", health: Health | None = None) -> WSGIServer:
        """`/metrics` with the probes beside it (a service without a `Health` is always live
        and never ready, so a probe cannot mistake it for one that is)."""
        return serve_probes(health or Health(), self.exposition, port, addr)
