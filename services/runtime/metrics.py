"""Prometheus metrics of one service, on a registry of its own (tests run several in-process).

Every service counts the events it handled and parked (`ServiceMetrics`); a service whose state
other projects export too adds gauges computed from that state at scrape time with `export`
(the allocator's cards as HAMi names them, the scheduler's queues as Volcano does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from services.core.observe import MetricSpec, Series
from services.runtime.health import Health, serve_probes


class SeriesCollector(Collector):
    """Gauges of the families `specs`, their samples read from `source` on every scrape.

    The scrape runs on the probe server's thread while the event loop moves on: `source` must
    read state that is replaced, never mutated in place (a frozen card state, a tuple of the
    last session's series), so a scrape sees one consistent version. `const` labels are added
    to every series (HAMi's `zone`)."""

    def __init__(self, specs: Sequence[MetricSpec], source: Callable[[], Iterable[Series]],
                 const: Sequence[tuple[str, str]] = ()) -> None:  # fmt: skip
        self.specs = {s.name: s for s in specs}
        self.source = source
        self.const = tuple(const)

    def _families(self) -> dict[str, GaugeMetricFamily]:
        names = [k for k, _ in self.const]
        return {s.name: GaugeMetricFamily(s.name, s.help, labels=[*names, *s.labels])
                for s in self.specs.values()}  # fmt: skip

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families().values())  # registering must not read the state yet

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = self._families()
        values = [v for _, v in self.const]
        for s in self.source():
            families[s.name].add_metric([*values, *s.labels], s.value)
        return iter(families.values())


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

    def export(self, specs: Sequence[MetricSpec], source: Callable[[], Iterable[Series]],
               const: Sequence[tuple[str, str]] = ()) -> None:  # fmt: skip
        """Serve the gauges `source` computes, beside the event counters (`SeriesCollector`)."""
        self.registry.register(SeriesCollector(specs, source, const))

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
