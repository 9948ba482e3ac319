"""Prometheus metrics of one service, on a registry of its own (tests run several in-process).

Every service counts the events it handled and parked (`ServiceMetrics`); a service whose state
other projects export too adds gauges computed from that state at scrape time with `export`
(the allocator's cards as HAMi names them, the scheduler's queues as Volcano does), written by
`services.runtime.exposition` after the registry's own metrics.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from services.core.observe import MetricSpec, Series
from services.runtime.exposition import GaugeText
from services.runtime.health import Health, serve_probes

#: the handling-time buckets: a delivery is handled in 0.05–2 ms (prometheus_client's default
#: buckets started at 5 ms and put every one of them in the first), so 100 µs to 10 s in 1-2.5-5
#: steps, the defaults' upper ones kept (an append that waits on the log still shows)
BOUNDS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                             0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))  # fmt: skip
_LE = tuple(floatToGoString(b) for b in BOUNDS)
#: prometheus_client's switch for its `_created` series, honoured the same way
_CREATED_OFF = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() in ("true", "1", "t")


class Tally:
    """One counter series: a number the event loop adds to."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class Times:
    """One histogram series: a count per bucket (not cumulative: one add per observation) and
    the sum."""

    __slots__ = ("counts", "created", "sum")

    def __init__(self) -> None:
        self.counts = [0] * len(BOUNDS)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BOUNDS, seconds)] += 1  # (le: the first bound at or above)
        self.sum += seconds


class SeriesFamily:
    """Series by label values, written at scrape time. Every handled event adds to a counter
    and a histogram; prometheus_client's take a lock per add, three per event (~2.5 µs, about
    40 % of the runtime's own cost of a delivery, issue 29's profile). These are plain numbers
    with one writer, the event loop; a scrape (the probe server's thread) reads copies, so a
    histogram's count is always its buckets' (its sum may differ by the observations made
    meanwhile, as with prometheus_client's lock per value)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str], kind: str) -> None:
        self.name, self.documentation, self.label_names, self.kind = name, documentation, tuple(labels), kind
        self.series: dict[tuple[str, ...], Tally | Times] = {}

    def labels(self, *values: str) -> Tally | Times:
        got = self.series.get(values)
        if got is None:
            if len(values) != len(self.label_names):  # (refused here, not at every scrape)
                raise ValueError(f"{self.name}: {len(values)} label values for {self.label_names}")
            series = dict(self.series)  # replaced, never grown in place: a scrape's copy holds
            got = series[values] = Times() if self.kind == "histogram" else Tally()
            self.series = series
        return got

    def collect(self) -> Iterator[Metric]:
        """The samples prometheus_client's Counter and Histogram write, in their order (the
        text format writes `_created` as a gauge of its own, as theirs)."""
        metric = Metric(self.name, self.documentation, self.kind)
        created = not _CREATED_OFF
        for values, one in self.series.items():  # (a dict the loop replaces, never changes)
            labels = dict(zip(self.label_names, values, strict=True))
            if isinstance(one, Times):
                counts, total = list(one.counts), one.sum
                seen = 0
                for le, n in zip(_LE, counts, strict=True):
                    seen += n
                    metric.add_sample(self.name + "_bucket", {**labels, "le": le}, float(seen))
                metric.add_sample(self.name + "_count", labels, float(seen))
                metric.add_sample(self.name + "_sum", labels, total)
            else:
                metric.add_sample(self.name + "_total", labels, one.value)
            if created:
                metric.add_sample(self.name + "_created", labels, one.created)
        yield metric


class _Collector:
    """The registry's collector of the families written at scrape time."""

    def __init__(self, *families: SeriesFamily) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for family in self.families:
            yield from family.collect()


class ServiceMetrics:
    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.service = service
        self.registry = registry or CollectorRegistry()
        self.texts: list[Callable[[], str]] = []  # gauges written at scrape time (`export`)
        self.events = SeriesFamily("tessera_events_processed", "Events handled, by type and outcome",
                                   ["service", "type", "outcome"], "counter")  # fmt: skip
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
        self.handle_seconds = SeriesFamily("tessera_event_handle_seconds",
                                           "Time to handle one event, including appending its results",
                                           ["service", "type"], "histogram")  # fmt: skip
        self.registry.register(_Collector(self.events, self.handle_seconds))  # type: ignore[arg-type]

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
