"""Prometheus' text format for gauges computed from a service's state at scrape time.

The allocator exports seven HAMi gauges per card; prometheus_client's collector path formats
every sample again on every scrape (4,000 cards: ~1.5 s holding the GIL on the probe thread,
`benchmarks/results/metrics.md`), time the event loop does not get. Here samples are written
straight in the text format, and `render_each` keeps each card's lines until its state object
is replaced (ledger states are frozen: a new state is a new object), so a scrape formats only
the cards that changed since the last one.

The text format needs a family's lines together: texts are kept per family and joined under
one `# HELP` / `# TYPE` header each.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

from prometheus_client.utils import floatToGoString

from services.core.observe import MetricSpec, Series

Texts = dict[str, str]  # family name -> its sample lines


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _header(spec: MetricSpec) -> str:
    text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {spec.name} {text}\n# TYPE {spec.name} {spec.kind}\n"


class GaugeText:
    """Writes the gauges of `specs`; `const` labels go first on every sample (HAMi's zone)."""

    def __init__(self, specs: Sequence[MetricSpec], const: Sequence[tuple[str, str]] = ()) -> None:
        self.specs = {s.name: s for s in specs}
        self.headers = {s.name: _header(s) for s in specs}
        self.const = tuple(const)
        self._cache: dict[Hashable, tuple[object, Texts]] = {}

    def lines(self, series: Iterable[Series]) -> Texts:
        """The sample lines of `series`, per family."""
        out: dict[str, list[str]] = {}
        for s in series:
            names = [k for k, _ in self.const] + list(self.specs[s.name].labels)
            values = [v for _, v in self.const] + list(s.labels)
            assert len(names) == len(values), f"{s.name}: {len(values)} label values"
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in zip(names, values, strict=True))
            out.setdefault(s.name, []).append(
                f"{s.name}{{{labels}}} {floatToGoString(s.value)}\n" if labels
                else f"{s.name} {floatToGoString(s.value)}\n"
            )  # fmt: skip
        return {name: "".join(ls) for name, ls in out.items()}

    def render(self, parts: Iterable[Texts]) -> str:
        """Every family under its header, with the lines of `parts` in order."""
        parts = list(parts)
        return "".join(self.headers[name] + "".join(p.get(name, "") for p in parts)
                       for name in self.specs)  # fmt: skip

    def render_each(self, items: Iterable[tuple[Hashable, object]],
                    series_of: Callable[[object], Iterable[Series]]) -> str:  # fmt: skip
        """`items` are (key, state) pairs; a key's lines are formatted again only when its
        state is another object than at the last scrape. Keys not given are forgotten."""
        parts, seen = [], {}
        for key, state in items:
            hit = self._cache.get(key)
            if hit is None or hit[0] is not state:
                hit = (state, self.lines(series_of(state)))
            seen[key] = hit
            parts.append(hit[1])
        self._cache = seen  # replaced whole: concurrent scrapes never see it half-built
        return self.render(parts)
