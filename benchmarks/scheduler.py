"""Scheduler decision throughput: `python -m benchmarks.scheduler` → `benchmarks/results/scheduler.md`.

ONE scheduling session (`decide(snapshot, conf)`, Tessera's default configuration: Volcano's
default plus deviceshare) placing `--jobs` single-pod jobs and `--gangs` gangs of 8 on 500 and on
5,000 nodes × 8 Ascend 910B3 cards. The cluster and the workload go the real path: inventory →
`NodeRegistered` + ledger events, manifests → admission → `JobSubmitted`, all folded into the
scheduler's `ClusterProjection` by the simulate engine; the timed part is `decide` on the frozen
snapshot (snapshot building is timed separately).

The workload mixes requests the way the users' manifests do (examples/article.yaml,
examples/inference.yaml): whole cards, vNPU template slices (8 GB → vir05_1c_16g, 32 GB →
vir10_3c_32g) and hami-core soft slices on hami-core nodes, plus 8-worker whole-card training
gangs. Every case runs in a fresh process so its peak RSS is its own. Run by hand; never part
of the test suite (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "scheduler.md"
#: Everything after this line in the results file is written by hand and kept on rewrite.
HAND_WRITTEN = "<!-- written by hand below: kept when the benchmark rewrites the file -->"
NAMESPACE = "bench"
CARD = "huawei.com/Ascend910B3"

#: (label, weight %, cpu, memory, device limits, pod annotations) of the single-pod jobs.
SHAPES: tuple[tuple[str, int, str, str, dict[str, str], dict[str, str]], ...] = (
    ("whole card", 5, "8", "64Gi", {CARD: "1"}, {}),
    ("template 8 GB (vir05_1c_16g)", 45, "2", "16Gi", {CARD: "1", f"{CARD}-memory": "8192"}, {}),
    ("template 16 GB (vir05_1c_16g)", 10, "2", "16Gi", {CARD: "1", f"{CARD}-memory": "16384"}, {}),
    ("template 32 GB (vir10_3c_32g)", 5, "4", "32Gi", {CARD: "1", f"{CARD}-memory": "32768"}, {}),
    ("hami-core 8 GB / 20 %", 30, "2", "16Gi",
     {CARD: "1", f"{CARD}-memory": "8192", f"{CARD}-core": "20"},
     {"huawei.com/vnpu-mode": "hami-core"}),
    ("hami-core 28 GB / 40 %", 5, "4", "32Gi",
     {CARD: "1", f"{CARD}-memory": "28672", f"{CARD}-core": "40"},
     {"huawei.com/vnpu-mode": "hami-core"}),
)  # fmt: skip
HAMI_CORE_NODE_EVERY = 4  # one node in four runs hami-core soft slicing


def inventory(nodes: int) -> dict[str, Any]:
    """Atlas 800T A2 style nodes (192 cores, 1.5 TiB, 8 × 910B3); every 4th is hami-core."""
    out = []
    for n in range(nodes):
        node: dict[str, Any] = {
            "name": f"node-{n:05d}", "cpu": 192, "memory": "1536Gi",
            "devices": [{"type": "Ascend910B3", "count": 8}],
        }  # fmt: skip
        if n % HAMI_CORE_NODE_EVERY == HAMI_CORE_NODE_EVERY - 1:
            node["annotations"] = {"hami-vnpu-core": "true"}
        out.append(node)
    return {"nodes": out}


def _container(cpu: str, memory: str, limits: dict[str, str]) -> dict[str, Any]:
    return {"name": "main", "image": "ascend-pytorch:24.0.RC1",
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": limits}}  # fmt: skip


def workload_docs(
    jobs: int, gangs: int, seed: int = 7
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """`jobs` plain pods drawn from SHAPES by weight and `gangs` 8-worker Volcano Jobs on whole
    cards, interleaved in a seeded order (creation order is the session's tie-break)."""
    rng = random.Random(seed)
    picks = rng.choices(range(len(SHAPES)), weights=[s[1] for s in SHAPES], k=jobs)
    kinds: list[tuple[str, int]] = [("pod", i) for i in range(jobs)]
    kinds += [("gang", g) for g in range(gangs)]
    rng.shuffle(kinds)
    docs: list[dict[str, Any]] = []
    mix: Counter[str] = Counter()
    for kind, i in kinds:
        if kind == "gang":
            mix["gang worker (whole card)"] += 8
            docs.append({
                "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": f"train-{i:04d}", "namespace": NAMESPACE},
                "spec": {"minAvailable": 8, "schedulerName": "volcano", "queue": "default",
                         "tasks": [{"name": "worker", "replicas": 8, "template": {"spec": {
                             "containers": [_container("16", "128Gi", {CARD: "1"})]}}}]},
            })  # fmt: skip
            continue
        label, _, cpu, memory, limits, annotations = SHAPES[picks[i]]
        mix[label] += 1
        docs.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": NAMESPACE,
                         "annotations": dict(annotations)},
            "spec": {"containers": [_container(cpu, memory, limits)]},
        })  # fmt: skip
    return docs, mix


@dataclass
class CaseResult:
    nodes: int
    jobs: int
    gangs: int
    pods: int
    bound: int
    pipelined: int
    unschedulable_jobs: int
    setup_s: float
    snapshot_s: float
    session_s: float
    session_cpu_s: float
    rss_before_mib: float
    rss_peak_mib: float
    mix: dict[str, int]
    #: of the unschedulable jobs, those enqueue left Pending, and those of them whose reasons
    #: name the nodes (a trial placement, services/core/scheduling/trial.py)
    refused_jobs: int = 0
    refused_named: int = 0

    @property
    def pods_per_s(self) -> float:
        return (self.bound + self.pipelined) / self.session_s if self.session_s else 0.0

    @property
    def pods_per_cpu_s(self) -> float:
        return (self.bound + self.pipelined) / self.session_cpu_s if self.session_cpu_s else 0.0


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(nodes: int, jobs: int, gangs: int) -> tuple[Any, Any, Counter[str]]:
    """The simulate engine's path: inventory + admitted manifests folded into its projection."""
    from services.core.devices import build_vendors
    from services.core.scheduling.config import default_conf
    from services.core.simulate.engine import load_simulation
    from services.core.simulate.inventory import load_inventory
    from services.core.workload import admit
    from services.core.workload.devicerequests import hami_parser

    vendors = build_vendors()
    conf = default_conf()
    docs, mix = workload_docs(jobs, gangs)
    workload = admit(docs, hami_parser(vendors), vendors.resource_names())
    assert not workload.rejections, [r.message() for r in workload.rejections[:3]]
    sim = load_simulation(conf, vendors, load_inventory(inventory(nodes), vendors.catalogue),
                          workload, cycles=0)  # fmt: skip
    sim.run()  # submits every job at t=0, runs no session
    return sim.projection, conf, mix


def run_case(nodes: int, jobs: int, gangs: int, profile_top: int = 0) -> tuple[CaseResult, str]:
    from services.core.scheduling.decide import decide

    t0 = time.perf_counter()
    projection, conf, mix = build(nodes, jobs, gangs)
    t1 = time.perf_counter()
    snap = projection.snapshot()
    t2 = time.perf_counter()
    rss_before = _rss_mib()
    prof = cProfile.Profile() if profile_top else None
    t3, c3 = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    d = decide(snap, conf)
    if prof is not None:
        prof.disable()
    t4, c4 = time.perf_counter(), time.process_time()
    bound = sum(len(jp.placements) for jp in d.placements if not jp.pipelined)
    pipelined = sum(len(jp.placements) for jp in d.placements if jp.pipelined)
    result = CaseResult(
        nodes=nodes, jobs=jobs, gangs=gangs, pods=jobs + 8 * gangs, bound=bound,
        pipelined=pipelined, unschedulable_jobs=len(d.unschedulable), setup_s=t1 - t0,
        snapshot_s=t2 - t1, session_s=t4 - t3, session_cpu_s=c4 - c3, rss_before_mib=rss_before,
        rss_peak_mib=_rss_mib(), mix=dict(mix),
        refused_jobs=sum(1 for u in d.unschedulable if u.code == "NotEnqueued"),
        refused_named=sum(1 for u in d.unschedulable if u.code == "NotEnqueued" and u.node_reasons),
    )  # fmt: skip
    text = ""
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(profile_top)
        text = buf.getvalue()
    return result, text


def compare_trials(nodes: int, jobs: int, gangs: int, runs: int) -> str:
    """The session's CPU time with and without the enqueue refusals' trial placements
    (services/core/scheduling/trial.py), alternating on one snapshot; the least of `runs` each,
    the least disturbed by other work on the machine."""
    from services.core.scheduling import decide as decide_module

    projection, conf, _ = build(nodes, jobs, gangs)
    snap = projection.snapshot()
    real = decide_module.gang_trials
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    refused = named = 0
    for _ in range(runs):
        for mode in cpu:
            decide_module.gang_trials = real if mode == "with" else (lambda ssn: {})  # type: ignore[assignment]
            c0 = time.process_time()
            d = decide_module.decide(snap, conf)
            cpu[mode].append(time.process_time() - c0)
            if mode == "with":
                refused = sum(1 for u in d.unschedulable if u.code == "NotEnqueued")
                named = sum(1 for u in d.unschedulable if u.code == "NotEnqueued" and u.node_reasons)
    decide_module.gang_trials = real
    best = {k: min(v) for k, v in cpu.items()}
    return (f"| {nodes:,} | {refused:,} | {named:,} | {best['without']:.2f} | {best['with']:.2f} | "
            f"{best['with'] - best['without']:+.2f} |")  # fmt: skip


def _child(nodes: int, jobs: int, gangs: int) -> CaseResult:
    """One case in a fresh interpreter, so peak RSS is that case's alone."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scheduler", "--case", str(nodes), "--jobs", str(jobs),
         "--gangs", str(gangs)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return CaseResult(**data)


def _profile_summary(text: str, keep: int) -> list[str]:
    """The pstats table trimmed to its header and `keep` rows, paths shortened to the repo."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    root = str(Path(__file__).resolve().parents[1]) + "/"
    rows = [line.replace(root, "") for line in lines[start : start + keep + 1]]
    return [line for line in rows if line.strip()]


def report(results: list[CaseResult], profile: tuple[int, str], args: argparse.Namespace) -> str:
    lines = [
        "# Scheduler decision throughput",
        "",
        f"`python -m benchmarks.scheduler --nodes {args.nodes} --jobs {args.jobs} "
        f"--gangs {args.gangs}` on {platform.machine()}, Python {platform.python_version()}; "
        "2 cores shared with other work, so wall times are noisy (up to 3× between runs under load; CPU times much less).",
        "",
        "One session of the default configuration (enqueue, allocate, backfill; priority, gang,",
        "conformance | overcommit, drf, predicates, proportion, nodeorder, deviceshare) over the",
        "snapshot the simulate engine's projection builds. pods/s = pods placed (bound +",
        "pipelined) ÷ session wall time; in brackets the same over the session's CPU time",
        "(`time.process_time`), which other processes on the machine disturb less. Peak RSS is",
        "the whole case process (cluster, workload, log, snapshot and session).",
        "",
        "| nodes × 8 × 910B3 | pods | bound | pipelined | unschedulable jobs (refused at enqueue, "
        "of them naming nodes) | session s (CPU s) | **pods/s** (per CPU s) | snapshot s | setup s "
        "| RSS before / peak MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.nodes:,} | {r.pods:,} | {r.bound:,} | {r.pipelined:,} | "
            f"{r.unschedulable_jobs:,} ({r.refused_jobs:,}, {r.refused_named:,}) | "
            f"{r.session_s:.2f} ({r.session_cpu_s:.2f}) | "
            f"**{r.pods_per_s:,.0f}** ({r.pods_per_cpu_s:,.0f}) | "
            f"{r.snapshot_s:.2f} | {r.setup_s:.1f} | {r.rss_before_mib:,.0f} / "
            f"{r.rss_peak_mib:,.0f} |"
        )
    if results:
        lines += ["", "Request mix (pods):", ""]
        lines += [f"- {k}: {v:,}" for k, v in sorted(results[0].mix.items())]
    nodes, text = profile
    if text:
        lines += [
            "",
            f"## Profile ({nodes:,} nodes, cProfile, sorted by own time)",
            "",
            "```",
            *_profile_summary(text, 25),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="500,5000")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--gangs", type=int, default=100)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=int, default=0, help="node count to profile (0: largest)")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--compare-trials", type=int, default=0, metavar="RUNS",
                        help="print CPU s with and without enqueue's trial placements (no file)")
    args = parser.parse_args()
    if args.compare_trials:
        print("| nodes | refused at enqueue | naming nodes | CPU s without trials | with | Δ |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n in (int(x) for x in args.nodes.split(",")):
            print(compare_trials(n, args.jobs, args.gangs, args.compare_trials), flush=True)
        return 0
    if args.case:
        result, _ = run_case(args.case, args.jobs, args.gangs)
        print(json.dumps(asdict(result)))
        return 0
    results = []
    for n in (int(x) for x in args.nodes.split(",")):
        r = _child(n, args.jobs, args.gangs)
        results.append(r)
        print(f"{n:>6} nodes: {r.bound + r.pipelined:,}/{r.pods:,} pods placed in "
              f"{r.session_s:.2f} s = {r.pods_per_s:,.0f} pods/s "
              f"({r.session_cpu_s:.2f} CPU s = {r.pods_per_cpu_s:,.0f}) "
              f"(unschedulable jobs {r.unschedulable_jobs}, refused at enqueue {r.refused_jobs}, "
              f"of them naming nodes {r.refused_named}, peak RSS {r.rss_peak_mib:,.0f} MiB)")  # fmt: skip
    prof_nodes = args.profile or max(r.nodes for r in results)
    text = ""
    if not args.no_profile:
        _, text = run_case(prof_nodes, args.jobs, args.gangs, profile_top=40)
        print("\n".join(_profile_summary(text, 25)))
    out = report(results, (prof_nodes, text), args)
    if not args.no_write:
        previous = args.out.read_text() if args.out.exists() else ""
        if HAND_WRITTEN in previous:
            out += "\n" + HAND_WRITTEN + previous.split(HAND_WRITTEN, 1)[1]
        args.out.write_text(out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
