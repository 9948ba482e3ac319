"""Prometheus metrics of one service, on a registry of its own (tests run several in-process)."""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram

from services.runtime.health import Health, serve_probes


class ServiceMetrics:
    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.service = service
        self.registry = registry or CollectorRegistry()
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
        self.handle_seconds = Histogram(
            "tessera_event_handle_seconds",
            "Time to handle one event, including appending its results",
            ["service", "type"],
            registry=self.registry,
        )

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
        return serve_probes(health or Health(), self.registry, port, addr)
