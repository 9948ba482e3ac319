"""Churn on a Kubernetes API: `python -m benchmarks.kube_churn` → `benchmarks/results/kube_churn.md`.

What a cluster's day is made of, which the binding benchmark (`benchmarks.k8s`: pods bound
once, nothing ends) does not exercise: Volcano Jobs arrive (seeded: gangs of 1-8 pods of whole
cards or 16 GB slices, more demand than cards), each pod runs a seeded while on the harness's
kubelet and succeeds, the Job ends Completed and goes — half by `ttlSecondsAfterFinished: 0`
(Tessera's garbage collection), half deleted by the driver as `kubectl delete` would — and the
cards it held take the next gang. The five services run as processes on an embedded NATS
against kmock's emulator (a process of its own), with HAMi's node lock on (the harness's
device plugin releases it) and the harness's garbage collector running, as kube-controller-
manager's does on every real cluster (`--no-collector`: an API server alone, where Tessera
deletes a deleted Job's pods and PodGroup itself, after its grace).

Judged at the end: every Job Completed, then gone with its pods and PodGroup; no pod made twice
(every pod succeeds: nothing may restart); the whole log folded by `services.core.audit` (a
card over capacity at any sequence, a gang below its minAvailable, a commit its ledgers do not
match, a pod started twice; at the end no slice held for a pod that does not run). Figures:
Jobs completed per second, created → Completed p50/p99, the services' CPU per pod.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import k8s
from services.cli.up import ControlPlane
from services.core.audit import Audit
from services.core.simulate.report import build_report
from services.kube import volcano
from services.kube.client import Kube, KubeError, Limits, pods_path
from services.kube.listwatch import Reflector
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import decode_stored
from tests.kube.cluster import GarbageCollector, Kubelet

ROOT = k8s.ROOT
RESULTS = ROOT / "benchmarks" / "results" / "kube_churn.md"
MARK = "<!-- measured below: rewritten by benchmarks/kube_churn.py -->"
NS = k8s.NAMESPACE
DEVICE = "huawei.com/Ascend910B3"


@dataclass
class Workload:
    """The seeded Jobs: each one's manifest, its pods' run times, and when it arrives."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    run_for: dict[str, float] = field(default_factory=dict)  # pod name → seconds Running
    arrivals: list[float] = field(default_factory=list)  # seconds after the first

    @property
    def pods(self) -> int:
        return len(self.run_for)


def workload(seed: int, jobs: int, rate: float, run: tuple[float, float]) -> Workload:
    rng = random.Random(seed)
    w = Workload()
    at = 0.0
    for j in range(jobs):
        replicas = rng.choice((1, 1, 2, 2, 4, 8))
        if rng.random() < 0.4:
            limits = {DEVICE: "1", f"{DEVICE}-memory": "16384"}  # a quarter of a 64 GB card
        else:
            limits = {DEVICE: str(rng.choice((1, 1, 2, 4, 8) if replicas <= 2 else (1, 1, 2)))}
        name = f"cj-{j}"
        spec: dict[str, Any] = {
            "schedulerName": "volcano", "minAvailable": replicas, "queue": "default",
            "tasks": [{"name": "w", "replicas": replicas, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
                    "limits": {**limits, "cpu": "1", "memory": "1Gi"}}}]}}}]}  # fmt: skip
        if j % 2 == 0:
            spec["ttlSecondsAfterFinished"] = 0  # Tessera's job controller deletes it
        w.jobs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                       "metadata": {"name": name, "namespace": NS}, "spec": spec})  # fmt: skip
        for i in range(replicas):
            w.run_for[f"{name}-w-{i}"] = round(rng.uniform(*run), 2)
        w.arrivals.append(at)
        at += rng.expovariate(rate)
    return w


class Observer:
    """The driver's watches: Jobs' phases (a Completed Job without a ttl is deleted, as a user
    would), pods' incarnations, and each pod's end once it ran its while."""

    def __init__(self, kube: Kube, kubelet: Kubelet, w: Workload) -> None:
        self.kube, self.kubelet, self.w = kube, kubelet, w
        self.created: dict[str, float] = {}
        self.completed: dict[str, float] = {}
        self.gone: set[str] = set()
        self.bad_phase: dict[str, str] = {}
        self.uids: dict[str, set[str]] = {}  # pod name → the uids it was made with
        self.live_pods: set[str] = set()
        self.live_groups: set[str] = set()
        self.finishing: set[str] = set()  # pod uids whose end is scheduled
        self.seen: dict[str, dict[str, Any]] = {}  # pod uid → its name; when made, bound, Running (wall)
        self.changed = asyncio.Event()
        self.ttl = {j["metadata"]["name"] for j in w.jobs if "ttlSecondsAfterFinished" in j["spec"]}
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def jobs(self) -> None:
        async for ch in Reflector(self.kube, volcano.jobs_path(NS)).changes():
            if ch.kind == "synced":
                continue
            name = ch.key.split("/", 1)[1]
            if ch.kind == "delete":
                self.gone.add(name)
            else:
                phase = ((ch.obj.get("status") or {}).get("state") or {}).get("phase", "")
                if phase in ("Failed", "Aborted", "Terminated") and name not in self.completed:
                    self.bad_phase[name] = phase
                if phase == "Completed" and name not in self.completed:
                    self.completed[name] = time.perf_counter()
                    if name not in self.ttl:
                        self._spawn(self._delete(name))
            self.changed.set()

    async def _delete(self, name: str) -> None:
        with contextlib.suppress(KubeError):
            await self.kube.delete(volcano.jobs_path(NS, name))

    async def pods(self) -> None:
        async for ch in Reflector(self.kube, pods_path(NS)).changes():
            if ch.kind == "synced":
                continue
            name = ch.key.split("/", 1)[1]
            if ch.kind == "delete":
                self.live_pods.discard(name)
                self.changed.set()
                continue
            self.live_pods.add(name)
            meta = ch.obj.get("metadata") or {}
            uid = meta.get("uid", "")
            seen = self.seen.setdefault(uid, {"made": time.time(), "name": name,  # wall clock: the log's
                                              "after": (meta.get("annotations") or {}).get(volcano.MADE_AFTER)})
            if (ch.obj.get("spec") or {}).get("nodeName"):
                seen.setdefault("bound", time.time())
            self.uids.setdefault(name, set()).add(uid)
            running = (ch.obj.get("status") or {}).get("phase") == "Running"
            if running:
                seen.setdefault("running", time.time())
            if running and uid not in self.finishing and not meta.get("deletionTimestamp"):
                self.finishing.add(uid)
                self._spawn(self._finish(name, uid))

    async def _finish(self, name: str, uid: str) -> None:
        await asyncio.sleep(self.w.run_for.get(name, 0.0))  # the pod's work: a while, not a sync
        with contextlib.suppress(KubeError):  # 404: deleted meanwhile
            current = await self.kube.get(pods_path(NS, name))
            if (current.get("metadata") or {}).get("uid") == uid:
                await self.kubelet.finish(NS, name, 0)

    async def groups(self) -> None:
        async for ch in Reflector(self.kube, volcano.podgroups_path(NS)).changes():
            if ch.kind == "upsert":
                self.live_groups.add(ch.key)
            elif ch.kind == "delete":
                self.live_groups.discard(ch.key)
                self.changed.set()

    def done(self) -> bool:
        names = {j["metadata"]["name"] for j in self.w.jobs}
        return names <= self.gone and len(self.created) == len(names) and not self.live_pods \
            and not self.live_groups  # fmt: skip

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _audit(plane: ControlPlane) -> tuple[list[str], list[str], int]:
    """The whole log folded from #1: (broken rules, what is unsettled at the end, messages)."""
    log = await JetStreamLog.connect(plane.url, plane.creds("admin"))
    try:
        messages = [m async for m in log.replay()]
    finally:
        await log.close()
    a = Audit()
    for m in messages:
        event = await decode_stored(m)
        if event is not None:
            a.apply(m.seq, event)
    findings = a.settle(build_report(messages)["pods"])
    return findings.broken, findings.unsettled, len(messages)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    w = workload(args.seed, args.jobs, args.rate, (args.run_min, args.run_max))
    work = Path(tempfile.mkdtemp(prefix="tessera-churn-"))
    proc, kubeconfig = await asyncio.to_thread(k8s._emulator, work)
    kube = await Kube.connect(kubeconfig, Limits(qps=0, connections=64))
    state = Path(tempfile.mkdtemp(prefix="tessera-churn-nats-", dir="/dev/shm"))
    plane = ControlPlane(state, kubeconfig=kubeconfig,
                         extra={s: ["--kube-qps", str(args.qps)] for s in k8s.SERVICES})  # fmt: skip
    kubelet = Kubelet(SimpleNamespace(kube=kube))  # type: ignore[arg-type]  # it reads only .kube
    obs = Observer(kube, kubelet, w)
    watches = [asyncio.create_task(c) for c in (obs.jobs(), obs.pods(), obs.groups())]
    row: dict[str, Any] = {"nodes": args.nodes, "jobs": args.jobs, "pods": w.pods, "rate": args.rate,
                           "seed": args.seed, "qps": args.qps, "collector": args.collector}  # fmt: skip
    try:
        await k8s._nodes(kube, args.nodes)
        collector = GarbageCollector(kubeconfig, ("pods", "podgroups")) if args.collector else contextlib.nullcontext()
        async with kubelet, collector:
            await asyncio.to_thread(plane.start, lambda _l: None)
            started = time.perf_counter()
            for job, at in zip(w.jobs, w.arrivals, strict=True):
                delay = started + at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)  # the arrival process, not a wait for state
                await kube.create(volcano.jobs_path(NS), job)
                obs.created[job["metadata"]["name"]] = time.perf_counter()
            deadline = time.perf_counter() + args.timeout
            while not obs.done() and time.perf_counter() < deadline and not plane.exited():
                obs.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(obs.changed.wait(), 1.0)
            elapsed = time.perf_counter() - started
            cpu = k8s._cpu_of(k8s._plane_pids(plane))
            cpu["api server"] = k8s._cpu_seconds(proc.pid)
            if args.dump_log:
                await k8s.dump_log(plane, Path(f"{args.dump_log}-{args.seed}.jsonl"))
                pods_file = Path(f"{args.dump_log}-{args.seed}-pods.json")  # when each pod was made, bound, ran
                await asyncio.to_thread(pods_file.write_text, json.dumps(obs.seen))
            broken, unsettled, messages = await _audit(plane)
            row["kubelet_violations"] = list(kubelet.violations)
    finally:
        await obs.close()
        for t in watches:
            t.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        exited = plane.exited()
        await asyncio.to_thread(plane.stop)
        await kube.close()
        proc.terminate()
        proc.wait(30)
        if (work / "requests.json").exists():  # what the emulator served, by client
            row["api_per_pod"] = k8s._api_per_pod(work / "requests.json", w.pods)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    names = [j["metadata"]["name"] for j in w.jobs]
    lat = sorted(obs.completed[n] - obs.created[n] for n in names if n in obs.completed and n in obs.created)
    ends = sorted(obs.completed.values())
    span = ends[-1] - ends[0] if len(ends) > 1 else 0.0
    row.update({
        "completed": len(obs.completed), "gone": len(obs.gone & set(names)),
        "not_completed": sorted(set(names) - set(obs.completed))[:20],
        "failed": dict(sorted(obs.bad_phase.items())[:20]),
        "remade": sorted(n for n, uids in obs.uids.items() if len(uids) > 1)[:20],
        "left": {"pods": sorted(obs.live_pods)[:20], "podgroups": sorted(obs.live_groups)[:20]},
        "exited": exited, "broken": broken[:20], "unsettled": unsettled[:20], "messages": messages,
        "elapsed": round(elapsed, 1), "jobs_per_s": round((len(ends) - 1) / span, 1) if span else 0.0,
        "p50": round(statistics.median(lat), 2) if lat else None,
        "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2) if lat else None,
        "cpu": cpu, "services_ms_per_pod": k8s._ms_per_pod(cpu, k8s.SERVICES, w.pods),
        "made_to_bound": _quantiles([t["bound"] - t["made"] for t in obs.seen.values() if "bound" in t]),
        "bound_to_running": _quantiles([t["running"] - t["bound"] for t in obs.seen.values()
                                        if "running" in t and "bound" in t]),
    })  # fmt: skip
    row["clean"] = not (row["not_completed"] or row["failed"] or row["remade"] or row["left"]["pods"]
                        or row["left"]["podgroups"] or exited or broken or unsettled
                        or row["kubelet_violations"] or row["gone"] < len(names))  # fmt: skip
    return row


def _quantiles(xs: list[float]) -> str:
    if not xs:
        return ""
    xs = sorted(xs)
    return f"{statistics.median(xs):.2f} / {xs[min(len(xs) - 1, int(len(xs) * 0.99))]:.2f}"


def render(rows: list[dict[str, Any]]) -> list[str]:
    lines = [MARK, "", "API server: kmock's emulator (one process); NATS store on tmpfs; 2 cores.", "",
             "| nodes | jobs | pods | arrivals/s | client QPS | seed | completed | wall s | Job created→Completed p50 / p99 s "
             "| pod made→bound p50 / p99 s | services ms/pod | log messages per pod | clean |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['nodes']} | {r['jobs']} | {r['pods']} | {r['rate']} | {r['qps']:g} | {r['seed']} "
                     f"| {r['completed']} | {r['elapsed']} | {r['p50']} / {r['p99']} | {r['made_to_bound']} "
                     f"| {r['services_ms_per_pod']} | {round(r['messages'] / max(r['pods'], 1), 1)} "
                     f"| {'yes' if r['clean'] else 'NO'} |")  # fmt: skip
    for r in rows:
        if not r["clean"]:
            bad = {k: r[k] for k in ("not_completed", "failed", "remade", "left", "exited", "broken",
                                     "unsettled", "kubelet_violations") if r[k] and r[k] != {"pods": [], "podgroups": []}}  # fmt: skip
            lines += ["", f"Seed {r['seed']}: `{json.dumps(bad)}`"]
    return lines


def write(rows: list[dict[str, Any]]) -> None:
    head = RESULTS.read_text().split(MARK)[0] if RESULTS.exists() else "# Churn on a Kubernetes API\n\n"
    RESULTS.write_text(head.rstrip() + "\n\n" + "\n".join(render(rows)) + "\n")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.kube_churn")
    p.add_argument("--nodes", type=int, default=16, help="nodes of 8 Ascend 910B3 each")
    p.add_argument("--jobs", type=int, default=400)
    p.add_argument("--rate", type=float, default=8.0, help="Jobs arriving per second (Poisson)")
    p.add_argument("--run-min", type=float, default=0.5, help="seconds a pod runs, at least")
    p.add_argument("--run-max", type=float, default=3.0, help="seconds a pod runs, at most")
    p.add_argument("--seeds", default="1", help="comma-separated seeds: one run each")
    p.add_argument("--qps", type=float, default=50, help="every service's client QPS limit (50: the chart's "
                   "default, kube-scheduler's and Volcano's)")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for the last Job to go")
    p.add_argument("--no-collector", dest="collector", action="store_false",
                   help="no garbage collector (an API server alone): Tessera deletes deleted Jobs' objects itself")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--dump-log", default="", help="write each run's log (JSONL) to PREFIX-seed.jsonl")
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        args.seed = seed
        row = await run(args)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    args = parse()
    for package in ("contracts", "services"):  # as benchmarks.k8s: the image ships bytecode
        compileall.compile_dir(ROOT / package, quiet=1, workers=1)
    rows = asyncio.run(main_async(args))
    if not args.no_write:
        write(rows)
    if not all(r["clean"] for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
