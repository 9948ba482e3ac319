"""What a scrape costs: `python -m benchmarks.metrics [--nodes N] [--cards C]`.

The allocator computes HAMi's card gauges from its ledgers on every scrape, on the probe
server's thread, holding the GIL while it does: a slow scrape is time the event loop does not
get. Measures the `/metrics` exposition (7 gauges per card) of N nodes × C cards, each card
holding a few slices, three ways: prometheus_client's collector path (what the first version
did), Tessera's text writer cold (every card formatted) and warm (1 % of the cards changed
since the last scrape, the others' lines kept: `services.runtime.exposition`). Writes `benchmarks/results/metrics.md`. Run by hand;
never part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from contracts.devices import CardSpec, SliceSpec
from services.core.ledger import CardState, RegisterCard, ReserveSlice, decide, evolve
from services.core.observe import hami
from services.runtime.exposition import GaugeText

RESULTS = Path(__file__).parent / "results" / "metrics.md"
SLICE = SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g")


def cards(nodes: int, per_node: int) -> dict[str, CardState]:
    out = {}
    for n in range(nodes):
        for i in range(per_node):
            spec = CardSpec(uuid=f"node-{n}-card-{i}", node=f"node-{n}", index=i, type="Ascend910B3",
                            vendor="huawei", memory=65536, cores=20, split_count=4, mode="template")  # fmt: skip
            state = CardState(uuid=spec.uuid)
            for command in (RegisterCard(spec), *(ReserveSlice(f"ns/j{n}-{i}/t{k}", SLICE) for k in range(i % 4))):
                for e in decide(state, command):  # type: ignore[union-attr]
                    state = evolve(state, e)
            out[spec.uuid] = state
    return out


class ClientCollector:
    """The collector path: families built and formatted by prometheus_client on each scrape."""

    def __init__(self, ledgers: dict[str, CardState]) -> None:
        self.ledgers = ledgers

    def collect(self):  # type: ignore[no-untyped-def]
        families = {s.name: GaugeMetricFamily(s.name, s.help, labels=["zone", *s.labels]) for s in hami.SPECS}
        for x in hami.card_series(self.ledgers.values()):
            families[x.name].add_metric(["vGPU", *x.labels], x.value)
        return iter(families.values())


def timed(fn, rounds: int) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        size = len(fn())
        times.append(time.perf_counter() - started)
    return times, size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.metrics")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--cards", type=int, default=8)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    ledgers = cards(args.nodes, args.cards)
    n = len(ledgers)
    registry = CollectorRegistry()
    registry.register(ClientCollector(ledgers))  # type: ignore[arg-type]
    client, size = timed(lambda: generate_latest(registry), max(3, args.rounds // 4))
    text = GaugeText(hami.SPECS, const=(hami.ZONE,))

    def scrape() -> bytes:
        return text.render_each(sorted(ledgers.items()), lambda st: hami.card_series([st])).encode()  # type: ignore[list-item]

    cold, _ = timed(lambda: (text._cache.clear(), scrape())[1], max(3, args.rounds // 4))
    changed = list(ledgers)[:: 100]

    def warm_scrape() -> bytes:
        for uuid in changed:  # a new state object, as a ledger event makes
            ledgers[uuid] = CardState(uuid=uuid, spec=ledgers[uuid].spec, usage=ledgers[uuid].usage)
        return scrape()

    warm, ours = timed(warm_scrape, args.rounds)

    def row(what: str, times: list[float], size: int) -> str:
        return (f"| {what} | {size / 1024:.0f} KiB | {statistics.median(times) * 1000:.0f} ms "
                f"| {max(times) * 1000:.0f} ms |")

    lines = [
        "# Scrape cost of the allocator's HAMi card gauges",
        "",
        f"`python -m benchmarks.metrics --nodes {args.nodes} --cards {args.cards}`: {n} cards, "
        f"{7 * n} series, on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        f"(shared with other work), Python {platform.python_version()}.",
        "",
        "| exposition | size | median | max |",
        "|---|---|---|---|",
        row("prometheus_client collector (every sample, every scrape)", client, size),
        row("text writer, cold (every card formatted)", cold, ours),
        row(f"text writer, warm ({len(changed)} cards changed since the last scrape)", warm, ours),
        "",
        "A scrape holds the GIL for about this long on the probe server's thread. The allocator",
        "serves the warm path: after the first scrape only the cards whose ledger moved are",
        "formatted again.",
    ]
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
