"""Replay the Alibaba openb GPU-sharing traces under FGD's protocol and compare policies.

    python -m benchmarks.openb --trace default --policies fgd,tessera --seeds 42-51 [--json OUT]

Protocol (perf.md §1.2): the 1213-node GPU cluster, pods shuffled per seed and inflated with
resampled pods to 130% of card capacity, one pod at a time, no departures, a pod that fits
nowhere is dropped. Metrics (perf.md §1.3): unallocated card % against arrived card %, bucketed
by whole percent of arrived workload and averaged within a bucket, read at 100% and 130%; and
the fragmentation rate at 90%. The placement itself is ``services.core.placement`` — the same
code the scheduler uses.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.openb_trace import (
    arrival_sequence,
    available_traces,
    capacity_milli,
    data_dir,
    load_nodes,
    load_trace,
)
from services.core.placement import (
    POLICIES,
    FragmentationModel,
    NodeView,
    Placer,
    Request,
    TargetWorkload,
    cards_by_model,
)

#: The simulator's per-node pod cap (kube default raised to 1001 in its config).
MAX_PODS_PER_NODE = 1001
#: The goal: Tessera leaves at most this share of FGD's unallocated cards at arrived = 100%.
GOAL_RATIO_PCT = 90.0
#: Published policy labels in ``fgd_expected_results``.
PUBLISHED_NAMES = {
    "random": "01-Random",
    "dotproduct": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


@dataclass(frozen=True, slots=True)
class RunResult:
    trace: str
    policy: str
    seed: int
    unallocated_pct_at_100: float
    unallocated_pct_at_130: float
    frag_rate_at_90: float
    seconds: float
    failed_pods: int
    pods: int


@dataclass(frozen=True, slots=True)
class Curve:
    """Per-bucket means of the simulator's logged series, keyed by whole arrived %."""

    alloc_pct: dict[int, float]
    frag_rate_pct: dict[int, float]

    def at(self, series: dict[int, float], bucket: int) -> float:
        # The reference analysis widens to ±1 when a bucket is empty (large pods jump over it).
        if bucket in series:
            return series[bucket]
        near = [series[b] for b in (bucket - 1, bucket + 1) if b in series]
        return sum(near) / len(near) if near else float("nan")


def replay(
    nodes: Sequence[NodeView],
    pods: Sequence[Request],
    policy_name: str,
    workload: TargetWorkload,
    tie_seed: int,
    frag: FragmentationModel | None = None,
    stop_pct: float = 130.5,
) -> tuple[Curve, int, dict[str, NodeView]]:
    """Run one replay; returns the bucketed curves, the failed-pod count and the final nodes.

    ``frag`` measures fragmentation for the metrics and may be shared across runs of the same
    workload (it is a memo of a pure function).
    """
    frag = frag or FragmentationModel(workload)
    policy = POLICIES[policy_name](workload, cards_by_model(nodes))
    rng = random.Random(tie_seed)
    # The simulator names nodes with a random prefix per run and its scheduler keeps the first
    # best node in that order; a seeded shuffle reproduces that tie-break distribution.
    order = list(nodes)
    rng.shuffle(order)
    placer = Placer(order, policy, rng, MAX_PODS_PER_NODE)
    capacity = capacity_milli(nodes)
    node_frag = {n.name: frag.of(n) for n in nodes}
    frag_total = sum(node_frag.values())
    arrived = allocated = failed = 0
    alloc_sum: dict[int, float] = {}
    rate_sum: dict[int, float] = {}
    count: dict[int, int] = {}
    for req in pods:
        arrived += req.gpu_milli
        placement = placer.place(req)
        if placement is None:
            failed += 1
        else:
            allocated += req.gpu_milli
            view = placer.node(placement.node)
            f = frag.of(view)
            frag_total += f - node_frag[view.name]
            node_frag[view.name] = f
        arrived_pct = 100.0 * arrived / capacity
        if arrived_pct > stop_pct:
            break
        bucket = round(arrived_pct)
        idle = capacity - allocated
        alloc_sum[bucket] = alloc_sum.get(bucket, 0.0) + round(100.0 * allocated / capacity, 2)
        rate = 100.0 * frag_total / idle if idle else 100.0
        rate_sum[bucket] = rate_sum.get(bucket, 0.0) + rate
        count[bucket] = count.get(bucket, 0) + 1
    curve = Curve(
        {b: alloc_sum[b] / count[b] for b in count},
        {b: rate_sum[b] / count[b] for b in count},
    )
    return curve, failed, {n.name: n for n in placer.nodes}


def run_one(trace: str, policy: str, seed: int, root: str | None = None) -> RunResult:
    base = Path(root) if root else None
    nodes = load_nodes(base)
    requests = load_trace(trace, base)
    workload = TargetWorkload.from_requests(requests)
    pods = arrival_sequence(requests, capacity_milli(nodes), seed)
    t0 = time.perf_counter()
    curve, failed, _ = replay(nodes, pods, policy, workload, tie_seed=seed * 7919 + 17)
    elapsed = time.perf_counter() - t0
    return RunResult(
        trace,
        policy,
        seed,
        round(100.0 - curve.at(curve.alloc_pct, 100), 3),
        round(100.0 - curve.at(curve.alloc_pct, 130), 3),
        round(curve.at(curve.frag_rate_pct, 90), 2),
        round(elapsed, 2),
        failed,
        len(pods),
    )


def load_published(root: Path | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """Published per-(trace, policy) means from ``fgd_expected_results/summary_by_policy.csv``."""
    path = (root or data_dir()) / "fgd_expected_results" / "summary_by_policy.csv"
    out: dict[tuple[str, str], dict[str, float]] = {}
    if not path.exists():
        return out
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            trace = row["workload"].removeprefix("openb_pod_list_")
            out[(trace, row["policy"])] = {
                "u100": float(row["unalloc_gpu_pct_at_arrive100_mean"]),
                "u100_sd": float(row["unalloc_gpu_pct_at_arrive100_sd"]),
                "u130": float(row["unalloc_gpu_pct_at_arrive130_mean"]),
                "frag90": float(row["frag_ratio_pct_of_idle_at_arrive90"]),
            }
    return out


def parse_seeds(spec: str) -> list[int]:
    seeds: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.extend(range(int(lo), int(hi) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def format_table(results: Sequence[RunResult], published: dict) -> str:
    """Markdown table: per trace and policy, our mean ± sd beside the published mean."""
    lines = [
        "| trace | policy | unalloc % @100 (ours) | published @100 | unalloc % @130 (ours) "
        "| published @130 | frag rate % @90 (ours) | published @90 | s/seed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.trace, r.policy), []).append(r)
    for (trace, policy), rs in groups.items():
        m100, s100 = _mean_sd([r.unallocated_pct_at_100 for r in rs])
        m130, s130 = _mean_sd([r.unallocated_pct_at_130 for r in rs])
        mf, sf = _mean_sd([r.frag_rate_at_90 for r in rs])
        pub = published.get((trace, PUBLISHED_NAMES.get(policy, "")))
        p100 = f"{pub['u100']:.2f} ± {pub['u100_sd']:.2f}" if pub else "–"
        p130 = f"{pub['u130']:.2f}" if pub else "–"
        pf = f"{pub['frag90']:.1f}" if pub else "–"
        secs = statistics.fmean(r.seconds for r in rs)
        lines.append(
            f"| {trace} | {policy} | {m100:.2f} ± {s100:.2f} | {p100} | {m130:.2f} ± {s130:.2f} "
            f"| {p130} | {mf:.1f} ± {sf:.1f} | {pf} | {secs:.1f} |"
        )
    return "\n".join(lines)


def format_ratio_table(
    results: Sequence[RunResult], policy: str = "tessera", base: str = "fgd"
) -> str:
    """Per trace: ``policy``'s mean unallocated % at 100 as a share of ``base``'s (same run), and
    whether that meets the issue's goal of at most 90 %. One decimal, because the goal sits
    within a point of several traces and a rounded "90%" would not say which side it is on."""
    by: dict[tuple[str, str], list[float]] = {}
    for r in results:
        by.setdefault((r.trace, r.policy), []).append(r.unallocated_pct_at_100)
    lines = [
        f"| trace | {base} @100 | {policy} @100 | {policy} / {base} | ≤ {GOAL_RATIO_PCT:.0f}% |",
        "|---|---|---|---|---|",
    ]
    for trace in dict.fromkeys(r.trace for r in results):
        a, b = by.get((trace, base)), by.get((trace, policy))
        if a and b:
            ma, mb = statistics.fmean(a), statistics.fmean(b)
            ratio = 100 * mb / ma
            met = "yes" if ratio <= GOAL_RATIO_PCT else "no"
            lines.append(f"| {trace} | {ma:.2f} | {mb:.2f} | {ratio:.1f}% | {met} |")
    return "\n".join(lines)


def load_results(paths: Sequence[Path]) -> list[RunResult]:
    """Records written by ``--json`` (one or more files), for re-rendering the tables."""
    out: list[RunResult] = []
    for path in paths:
        for rec in json.loads(path.read_text()):
            out.append(
                RunResult(
                    rec["trace"],
                    rec["policy"],
                    rec["seed"],
                    rec["unallocated_pct_at_100"],
                    rec["unallocated_pct_at_130"],
                    rec["frag_rate_at_90"],
                    rec.get("seconds", float("nan")),
                    rec.get("failed_pods", -1),
                    rec.get("pods", -1),
                )
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.openb", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--trace", default="default", help="trace name(s), comma list, or 'all'")
    ap.add_argument("--policies", default="bestfit,fgd,tessera", help="comma list of policies")
    ap.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43")
    ap.add_argument("--json", type=Path, help="write one record per (trace, policy, seed)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument(
        "--report", type=Path, nargs="+", help="only re-render tables from --json files"
    )
    ap.add_argument(
        "--data",
        type=Path,
        help="openb data dir (default: $TESSERA_OPENB_DIR or ../shared/data/openb)",
    )
    args = ap.parse_args(argv)

    root = args.data or data_dir()
    if args.report:
        loaded = load_results(args.report)
        print(format_table(loaded, load_published(root)))
        print()
        print(format_ratio_table(loaded))
        return 0
    traces = available_traces(root) if args.trace == "all" else args.trace.split(",")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        ap.error(f"unknown policies {unknown}; known: {sorted(POLICIES)}")
    seeds = parse_seeds(args.seeds)
    jobs = [(t, p, s) for t in traces for p in policies for s in seeds]

    results: list[RunResult] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            futs = [pool.submit(run_one, t, p, s, str(root)) for t, p, s in jobs]
            for f in futs:
                r = f.result()
                print(_progress(r), file=sys.stderr, flush=True)
                results.append(r)
    else:
        for t, p, s in jobs:
            r = run_one(t, p, s, str(root))
            print(_progress(r), file=sys.stderr, flush=True)
            results.append(r)

    print(format_table(results, load_published(root)))
    if "tessera" in policies and "fgd" in policies:
        print()
        print(format_ratio_table(results))
    if args.json:
        records = [
            {k: v for k, v in asdict(r).items() if k not in ("seconds", "failed_pods", "pods")}
            | {"seconds": r.seconds}
            for r in results
        ]
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    return 0


def _progress(r: RunResult) -> str:
    return (
        f"{r.trace:>12} {r.policy:>10} seed={r.seed} u100={r.unallocated_pct_at_100:.2f} "
        f"u130={r.unallocated_pct_at_130:.2f} frag90={r.frag_rate_at_90:.1f} "
        f"failed={r.failed_pods}/{r.pods} {r.seconds:.1f}s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
