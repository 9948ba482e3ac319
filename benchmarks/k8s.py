"""Binding throughput and latency against a Kubernetes API server.

    python -m benchmarks.k8s [--nodes 500] [--pods 4000] [--shapes whole,slice,vcjob]
                             [--modes backlog,stream] [--kubeconfig PATH] [--qps 1000]
    python -m benchmarks.k8s --sizes 500x4000,5000x10000   # the whole table (issue 29)
    python -m benchmarks.k8s --kubeconfig K \
        --against 'kube-scheduler --kubeconfig {kubeconfig} --leader-elect=false'   # side by side

Per run: `--nodes` Nodes with HAMi's register annotation (8 × Ascend 910B3, template mode), then
`--pods` Pods with `schedulerName: volcano` (whole cards, or 16 GB vNPU slices), created
concurrently (64 requests in flight on one client) — or, shape `vcjob`, Volcano Jobs of
`--job-size` workers (whole cards; gangs of that size) whose pods Tessera's job controller makes,
each pod's latency from its Job's creation; `backlog` creates them all and then starts
the control plane, `stream` starts it first and creates them while it schedules. The five
services run as processes with `--kubeconfig` on an embedded NATS; bindings without HAMi's node
lock (no device plugin answers here). Measured from a watch of the pods: pods/s from the first
binding to the last, and creation → bound p50 / p99. Without `--kubeconfig` the API server is
kmock's emulator in a process of its own (tests/kube/cluster.py); with it, the same against a
real one (its Nodes and Pods are created in namespace `tessera-bench` and deleted after).
`--against COMMAND` runs another scheduler after Tessera on each whole-card run, on the same
server with the same Nodes and Pods (theirs name it in `schedulerName`, `--against-name`), and
adds the ratios issue 29 states its goals in. Each process's CPU is also read at the first
binding, so the binding window's cost stands apart from start-up.
`--waiting N` creates N whole-card pods more than the cluster's cards hold (make `--pods` the
number of cards): once `--pods` are bound, each process's CPU is read over `--idle` seconds in
which nothing else happens — what a backlog longer than the cluster costs while it waits
(`--idle` alone: what a cluster at rest costs).
Results go to benchmarks/results/k8s.md (the hand-written part of that file is kept).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube.client import Kube, KubeError, Limits, nodes_path, pods_path
from services.kube.listwatch import Reflector
from services.kube.volcano import jobs_path

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("allocator", "queue", "scheduler", "admission", "nodeagent")
RESULTS = ROOT / "benchmarks" / "results" / "k8s.md"
NAMESPACE = "tessera-bench"
MARK = "<!-- measured below: rewritten by benchmarks/k8s.py -->"


def _register(node: str) -> str:
    return json.dumps([{"id": f"{node}-npu-{i}", "index": i, "count": 4, "devmem": 65536,
                        "devcore": 20, "type": "Ascend910B3", "health": True} for i in range(8)])  # fmt: skip


def _job(j: int, size: int) -> dict[str, Any]:
    """A Volcano Job of `size` one-card workers, one gang (`vcjob`): what users submit most."""
    limits = {"huawei.com/Ascend910B3": "1", "cpu": "1", "memory": "1Gi"}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": f"bj-{j}", "namespace": NAMESPACE},
            "spec": {"schedulerName": "volcano", "minAvailable": size, "queue": "default", "tasks": [
                {"name": "worker", "replicas": size, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"limits": limits}}]}}}]}}  # fmt: skip


def _job_pods(job: dict[str, Any]) -> list[str]:
    task = job["spec"]["tasks"][0]
    return [f"{job['metadata']['name']}-{task['name']}-{i}" for i in range(task["replicas"])]


def _pod(i: int, shape: str, scheduler: str = "volcano") -> dict[str, Any]:
    limits = {"huawei.com/Ascend910B3": "1", "cpu": "1", "memory": "1Gi"}
    if shape == "slice":
        limits["huawei.com/Ascend910B3-memory"] = "16384"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"b-{i}", "namespace": NAMESPACE},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox",
                                                                 "resources": {"limits": limits}}]}}  # fmt: skip


async def _gather_limited(coros: list[Any], limit: int) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def _nodes(kube: Kube, n: int) -> None:
    async def create(i: int) -> None:
        name = f"bench-{i}"
        await kube.create(nodes_path(), {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name},
            "annotations": {hami.ascend_register_key("Ascend910B3"): _register(name)}}})  # fmt: skip
        await kube.patch(nodes_path(name) + "/status", {"status": {
            "allocatable": {"cpu": "192", "memory": "1536Gi", "pods": "110", "huawei.com/Ascend910B3": "8"},
            "capacity": {"cpu": "192", "memory": "1536Gi", "pods": "110", "huawei.com/Ascend910B3": "8"},
            "conditions": [{"type": "Ready", "status": "True"}]}})  # fmt: skip

    await _gather_limited([create(i) for i in range(n)], 64)


class Watch:
    """When each pod was created (by us) and first seen bound (by a watch)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.all_bound = asyncio.Event()
        self.want = 0
        #: read at the first binding: the CPU each measured process had spent by then, so what
        #: the binding window itself cost stands apart from start-up (imports, registration)
        self.at_first: Callable[[], dict[str, float]] = dict
        self.first_cpu: dict[str, float] = {}

    async def run(self) -> None:
        async for ch in Reflector(self.kube, pods_path(NAMESPACE)).changes():
            if ch.kind == "upsert" and (ch.obj.get("spec") or {}).get("nodeName"):
                name = ch.obj["metadata"]["name"]
                if not self.bound:
                    self.first_cpu = self.at_first()
                self.bound.setdefault(name, time.perf_counter())
                if len(self.bound) >= self.want:
                    self.all_bound.set()

    async def create(self, objs: list[dict[str, Any]]) -> None:
        async def one(o: dict[str, Any]) -> None:
            if o["kind"] == "Job":
                await self.kube.create(jobs_path(NAMESPACE), o)
                now = time.perf_counter()
                self.created.update(dict.fromkeys(_job_pods(o), now))
                return
            await self.kube.create(pods_path(NAMESPACE), o)
            self.created[o["metadata"]["name"]] = time.perf_counter()

        await _gather_limited([one(o) for o in objs], 64)


async def _delivered(url: str, creds: str) -> dict[str, int]:
    """Messages each process took from the log: its durables' deliveries (JetStream's consumer
    info, redeliveries included); the scheduler reads the whole log (direct gets, no durable)."""
    import nats

    from services.runtime.natsauth import connect_options

    nc = await nats.connect(url, **connect_options(creds, "", url))
    try:
        js = nc.jetstream()
        out: dict[str, int] = {"scheduler": (await js.stream_info("TESSERA")).state.last_seq}
        for info in await js.consumers_info("TESSERA"):
            key = _PRODUCERS.get(info.name)
            if key is not None:  # (ordered consumers of readers come and go: not a service's)
                out[key] = out.get(key, 0) + (info.delivered.consumer_seq if info.delivered else 0)
        return out
    finally:
        await nc.close()


#: message-id producers (contracts.envelope.msg_id) → the process that writes them
_PRODUCERS = {"sched": "scheduler", "sched-conf": "scheduler", "queue": "queue", "kube-jobs": "queue",
              "kube-status": "queue", "allocator": "allocator", "binder": "allocator", "admission": "admission",
              "admit": "admission", "nodeagent": "nodeagent", "kube-node": "nodeagent"}  # fmt: skip


def _written(path: Path) -> dict[str, int]:
    """Messages each process appended, by the producer its message ids name."""
    out: dict[str, int] = {}
    for line in path.read_text().splitlines():
        mid = json.loads(line).get("headers", {}).get("Nats-Msg-Id", "")
        producer = mid.split(":", 1)[0] if ":" in mid else "other"
        key = _PRODUCERS.get(producer, producer)
        out[key] = out.get(key, 0) + 1
    return out


class External:
    """Another scheduler on the same API server, started from a command line (`--against`):
    issue 29 compares Tessera with kube-scheduler side by side. The driver creates the same
    Nodes and Pods (naming it in `schedulerName`), starts it where Tessera's plane would start
    and measures the same watch; its CPU is its process's, so the command must be the
    scheduler itself (run without a shell), e.g.
    `kube-scheduler --kubeconfig K --leader-elect=false`."""

    def __init__(self, argv: list[str], label: str, kubeconfig: str, work: Path) -> None:
        self.argv, self.label, self.kubeconfig, self.work = argv, label, kubeconfig, work
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.work / f"{self.label}.log").open("ab") as log:  # (the child keeps its own copy)
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env={**os.environ, "KUBECONFIG": self.kubeconfig, "PYTHONPATH": str(ROOT)})  # fmt: skip

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def pids(self) -> dict[str, int]:
        return {self.label: self.proc.pid} if self.proc is not None else {}

    def died(self) -> str:
        """Why it stopped on its own ("" while it runs): a scheduler that exits binds nothing,
        and the run would wait out `--timeout` for nothing."""
        if self.proc is None or self.proc.poll() is None:
            return ""
        tail = (self.work / f"{self.label}.log").read_text(errors="replace")[-2000:]
        return f"{self.label} exited with {self.proc.returncode}: {tail}"


def _plane_pids(plane: ControlPlane) -> dict[str, int]:
    pids = {name: proc.pid for name, proc in plane.procs.items()}
    for server in plane.servers:  # the log shares the cores too (not counted as a service)
        pids["nats-server"] = server.pid or 0
    return pids


def _cpu_of(pids: dict[str, int]) -> dict[str, float]:
    return {name: _cpu_seconds(pid) for name, pid in pids.items()}


async def _bound_or_died(watch: Watch, other: External | None, timeout: float) -> None:
    """Until every pod is bound, `timeout` passes, or the foreign scheduler has exited."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watch.all_bound.wait(), min(1.0, deadline - time.perf_counter()))
        if watch.all_bound.is_set():
            return
        if other is not None and other.died():
            raise SystemExit(other.died())


async def run_one(args: argparse.Namespace, shape: str, mode: str, kubeconfig: str, work: Path,
                  against: External | None = None) -> dict[str, Any]:  # fmt: skip
    """One run of Tessera (or, with `against`, of that scheduler) on fresh Nodes and Pods."""
    kube = await Kube.connect(kubeconfig, Limits(qps=0, connections=128))
    state = Path(tempfile.mkdtemp(prefix="tessera-k8s-nats-", dir="/dev/shm")) if args.store == "tmpfs" \
        else work / f"state-{shape}-{mode}"  # fmt: skip
    plane = ControlPlane(state, kubeconfig=kubeconfig, extra={
        "allocator": ["--hami-node-lock", "off", "--kube-qps", str(args.qps)],
        **{s: ["--kube-qps", str(args.qps)] for s in ("admission", "queue", "nodeagent")}})  # fmt: skip
    start = against.start if against is not None else lambda: plane.start(lambda _l: None)
    pids = (lambda: against.pids()) if against is not None else (lambda: _plane_pids(plane))
    watch = Watch(kube)
    watch.want = args.pods
    watch.at_first = lambda: _cpu_of(pids())
    watcher = asyncio.create_task(watch.run())
    if shape == "vcjob":
        size = max(1, args.job_size)
        pods = [_job(j, size) for j in range(args.pods // size)]
        watch.want = len(pods) * size
    else:
        pods = [_pod(i, shape, against.label if against is not None else "volcano") for i in range(args.pods)]
    # pods beyond the cluster's cards (`--waiting`): bound ones stay `want`, these wait for good
    pods += [_pod(args.pods + i, "whole", against.label if against is not None else "volcano")
             for i in range(args.waiting)]  # fmt: skip
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    idle: dict[str, float] = {}
    try:
        if args.kubeconfig:  # kmock has no Namespace objects (any namespace just works)
            await _ensure_namespace(kube)
        await _nodes(kube, args.nodes)
        started = time.perf_counter()
        if mode == "backlog":
            await watch.create(pods)
            await asyncio.to_thread(start)
        else:
            await asyncio.to_thread(start)
            await watch.create(pods)
        await _bound_or_died(watch, against, args.timeout)
        elapsed = time.perf_counter() - started
        cpu = _cpu_of(pids())
        if (seconds := args.idle if args.idle is not None else 20.0 if args.waiting else 0.0) > 0:
            idle = await _idle_cpu(pids, cpu, seconds)
        if against is None:
            reads = await _delivered(plane.url, plane.creds("admin"))
            dump = Path(f"{args.dump_log}-{shape}-{mode}.jsonl") if args.dump_log else work / "log.jsonl"
            await dump_log(plane, dump)
            writes = _written(dump) if dump.exists() else {}
        if args.emulator_pid:
            cpu["api server"] = _cpu_seconds(args.emulator_pid)
        cpu["driver"] = round(time.process_time(), 1)
    finally:
        if against is not None:
            await asyncio.to_thread(against.stop)
        else:
            await asyncio.to_thread(plane.stop)
        if args.store == "tmpfs":
            shutil.rmtree(state, ignore_errors=True)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if args.kubeconfig:
            await _cleanup(kube, args.nodes, [*watch.created, *(f"b-{i}" for i in range(args.pods))],
                           [p["metadata"]["name"] for p in pods if p["kind"] == "Job"])  # fmt: skip
        await kube.close()
    times = sorted(watch.bound.values())
    lat = sorted(watch.bound[n] - watch.created[n] for n in watch.bound if n in watch.created)
    span = (times[-1] - times[0]) if len(times) > 1 else 0.0
    per_pod = max(len(times), 1)
    return {"scheduler": against.label if against is not None else "tessera",
            "reads_per_pod": {k: round(v / per_pod, 1) for k, v in reads.items()},
            "writes_per_pod": {k: round(v / per_pod, 2) for k, v in sorted(writes.items())},
            "shape": shape, "mode": mode, "nodes": args.nodes, "pods": args.pods, "bound": len(times),
            "pods_per_s": round((len(times) - 1) / span, 1) if span else 0.0,
            "p50": round(statistics.median(lat), 2) if lat else None,
            "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2) if lat else None,
            "elapsed": round(elapsed, 1), "cpu": cpu, "waiting": args.waiting, "idle_cpu": idle,
            "window_cpu": {k: round(cpu[k] - v, 1) for k, v in watch.first_cpu.items() if k in cpu}}  # fmt: skip


async def _idle_cpu(pids: Callable[[], dict[str, int]], before: dict[str, float], seconds: float) -> dict[str, float]:
    """CPU ms per second each process spends once every pod that fits is bound, nothing else
    happening: with `--waiting` pods, what a backlog longer than the cluster costs for as long
    as it lasts (every batch cluster's normal state; kube-scheduler parks such pods until an
    event could make them fit); without, what a cluster at rest costs."""
    await asyncio.sleep(seconds)
    after = _cpu_of(pids())
    return {k: round(1000 * (after[k] - v) / seconds, 1) for k, v in before.items() if k in after}


async def dump_log(plane: ControlPlane, path: Path) -> None:
    """The log with its timestamps, as `tessera events` writes it (JSONL with each message's
    headers), to replay or read."""
    creds = plane.creds("cli")
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "services.cli.main", "events", "--output-file", str(path), "--nats", plane.url,
        *(["--nats-creds", creds] if creds else [])], cwd=ROOT, check=False, capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        print(f"dumping the log failed: {done.stderr.strip()}", file=sys.stderr)


def _cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (Linux /proc), to see who is the limit."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


async def _ensure_namespace(kube: Kube) -> None:
    try:
        await kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": NAMESPACE}})  # fmt: skip
    except KubeError as exc:
        if exc.status != 409:
            raise


async def _cleanup(kube: Kube, nodes: int, pods: Iterable[str], jobs: Iterable[str] = ()) -> None:
    """What a run made on a real server, gone before the next run makes it again: the Pods at
    once (`gracePeriodSeconds: 0` — no kubelet runs them, so a graceful deletion of a bound pod
    would wait for a confirmation that never comes, and the next run's `b-0` would meet it),
    then the Nodes. The namespace stays: deleting it needs a namespace controller, which an API
    server alone (envtest) does not run, and the next run would find it terminating."""
    now = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}

    async def gone(path: str, body: object = None) -> None:
        with contextlib.suppress(KubeError):  # (404: never made, or gone already)
            await kube.delete(path, body)

    await _gather_limited([gone(jobs_path(NAMESPACE, j), now) for j in jobs], 64)  # (their pods below)
    await _gather_limited([gone(pods_path(NAMESPACE, n), now) for n in dict.fromkeys(pods)], 64)
    await _gather_limited([gone(nodes_path(f"bench-{i}")) for i in range(nodes)], 64)


def _emulator(work: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.kube.cluster", str(work)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit(f"kmock emulator did not start: {line!r}")
    return proc, line.split(" ", 1)[1].strip()


def _api_per_pod(counted: Path, bound: int) -> dict[str, dict[str, float]]:
    """The emulator's count of the services' requests (by their User-Agent, `tessera-<service>`)
    per bound pod, by verb and resource: what they would ask of a real API server and its etcd
    (kube-scheduler asks one binding and one event per pod)."""
    try:
        counts = json.loads(counted.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, dict[str, float]] = {}
    for c in counts:
        agent = c["agent"]
        if agent.startswith("tessera-"):
            share = round(c["n"] / max(bound, 1), 2)
            if share >= 0.01:  # not the start-up's lists and watches
                out.setdefault(agent.removeprefix("tessera-"), {})[f"{c['verb']} {c['resource']}"] = share
    return out


def sizes_of(args: argparse.Namespace) -> list[tuple[int, int]]:
    """`--sizes 500x4000,5000x10000` (nodes × pods), else the one `--nodes` × `--pods`."""
    if not args.sizes:
        return [(args.nodes, args.pods)]
    try:
        return [(int(n), int(p)) for n, _, p in (s.strip().partition("x") for s in args.sizes.split(","))]
    except ValueError:
        raise SystemExit(f"--sizes {args.sizes!r}: give NODESxPODS pairs, e.g. 500x4000,5000x10000") from None


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for nodes, pods in sizes_of(args):
        args.nodes, args.pods = nodes, pods
        rows += await _size(args)
    return rows


async def _size(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for shape in args.shapes.split(","):
        for mode in args.modes.split(","):
            rows.append(await _on_server(args, shape, mode, None))
            if args.against and shape == "whole":  # (kube-scheduler cannot cut a card)
                rows.append(await _on_server(args, shape, mode, args.against))
    return rows


async def _on_server(args: argparse.Namespace, shape: str, mode: str, against: str | None) -> dict[str, Any]:
    """One run on a server of its own (a fresh emulator) or on `--kubeconfig`'s."""
    work = Path(tempfile.mkdtemp(prefix="tessera-k8s-"))
    proc = None
    if args.kubeconfig:
        kubeconfig = args.kubeconfig
    else:
        proc, kubeconfig = await asyncio.to_thread(_emulator, work)
    args.emulator_pid = proc.pid if proc else 0
    other = None
    if against is not None:
        argv = [a.replace("{kubeconfig}", kubeconfig) for a in shlex.split(against)]
        other = External(argv, args.against_name, kubeconfig, work)
    row: dict[str, Any] | None = None
    try:
        row = await run_one(args, shape, mode, kubeconfig, work, other)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
            if row is not None:  # it wrote what it served as it stopped
                row["api_per_pod"] = _api_per_pod(work / "requests.json", row["bound"])
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(row), flush=True)
    return row


def _ms_per_pod(cpu: dict[str, float], names: Iterable[str], pods: int) -> float:
    return round(1000 * sum(cpu.get(n, 0.0) for n in names) / max(pods, 1), 2)


def _whose(row: dict[str, Any]) -> tuple[str, ...]:
    """The processes a row's scheduler is: Tessera's five services and its log, or the other's."""
    return (*SERVICES, "nats-server") if row.get("scheduler", "tessera") == "tessera" else (row["scheduler"],)


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tessera against each other scheduler run on the same size, shape and mode: the ratios
    issue 29 states its goals in (pods/s ≥ 1.0 × at 500 nodes, ≥ 1.5 × at 5,000; p99 ≤ 2 ×),
    and each side's CPU per bound pod, the whole run and the binding window alone."""
    out = []
    for t in (r for r in rows if r.get("scheduler", "tessera") == "tessera"):
        for o in rows:
            if o.get("scheduler", "tessera") == "tessera" or any(o[k] != t[k] for k in ("nodes", "pods", "shape", "mode")):
                continue
            out.append({
                "nodes": t["nodes"], "pods": t["pods"], "shape": t["shape"], "mode": t["mode"], "other": o["scheduler"],
                "pods_per_s": round(t["pods_per_s"] / o["pods_per_s"], 2) if o["pods_per_s"] else None,
                "p99": round(t["p99"] / o["p99"], 2) if t["p99"] is not None and o["p99"] else None,
                "cpu_ms": (_ms_per_pod(t["cpu"], _whose(t), t["bound"]), _ms_per_pod(o["cpu"], _whose(o), o["bound"])),
                "window_ms": (_ms_per_pod(t.get("window_cpu", {}), _whose(t), t["bound"]),
                              _ms_per_pod(o.get("window_cpu", {}), _whose(o), o["bound"])),
            })  # fmt: skip
    return out


def render(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """The measured part of the results file (below `MARK`), as lines."""
    server = f"real API server ({args.kubeconfig})" if args.kubeconfig else "kmock's emulator (one process)"
    lines = [MARK, "", f"API server: {server}; NATS store on {args.store}; client QPS {args.qps}; load average at start "
             f"{os.getloadavg()[0]:.1f}; {os.cpu_count()} cores.", "",
             "| scheduler | nodes | pods | shape | mode | bound | pods/s (first→last binding) | created→bound p50 s | p99 s | wall s | CPU s per process |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cpu = ", ".join(f"{k} {v}" for k, v in r["cpu"].items())
        lines.append(f"| {r.get('scheduler', 'tessera')} | {r['nodes']} | {r['pods']} | {r['shape']} | {r['mode']} | "
                     f"{r['bound']} | {r['pods_per_s']} | {r['p50']} | {r['p99']} | {r['elapsed']} | {cpu} |")  # fmt: skip
    lines += ["", "Per bound pod: CPU ms of the five services (the whole run, start-up included; and from the "
              "first binding to the last alone), and the log messages each process read (deliveries to its "
              "consumers) and wrote.", "",
              "| nodes | shape | mode | services CPU ms/pod | in the binding window | read per pod | written per pod |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if r.get("scheduler", "tessera") != "tessera":
            continue
        ms = _ms_per_pod(r["cpu"], SERVICES, r["bound"])
        window = _ms_per_pod(r.get("window_cpu", {}), SERVICES, r["bound"])
        read = ", ".join(f"{k} {v}" for k, v in r.get("reads_per_pod", {}).items())
        wrote = ", ".join(f"{k} {v}" for k, v in r.get("writes_per_pod", {}).items())
        lines.append(f"| {r['nodes']} | {r['shape']} | {r['mode']} | {ms} | {window} | {read} | {wrote} |")
    if pairs := compare(rows):
        lines += ["", "Side by side on the same API server (`--against`): Tessera's figure over the other's; CPU "
                  "ms per bound pod of Tessera's processes (five services and nats-server) and of the other's, "
                  "the whole run and the binding window alone. Issue 29's goals: pods/s ≥ 1.0 × at 500 "
                  "nodes and ≥ 1.5 × at 5,000; p99 ≤ 2 ×.", "",
                  "| nodes | pods | shape | mode | against | pods/s × | p99 × | CPU ms/pod (Tessera / other) | "
                  "in the window |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for c in pairs:
            lines.append(f"| {c['nodes']} | {c['pods']} | {c['shape']} | {c['mode']} | {c['other']} | "
                         f"{c['pods_per_s']} | {c['p99']} | {c['cpu_ms'][0]} / {c['cpu_ms'][1]} | "
                         f"{c['window_ms'][0]} / {c['window_ms'][1]} |")  # fmt: skip
    if idle := [r for r in rows if r.get("idle_cpu")]:
        lines += ["", "Once every pod that fits is bound (and `--waiting` pods more wait), nothing else happening: "
                  "CPU ms per second of each process.", "", "| scheduler | nodes | shape | mode | waiting | CPU ms/s |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for r in idle:
            cpu = ", ".join(f"{k} {v}" for k, v in r["idle_cpu"].items())
            lines.append(f"| {r.get('scheduler', 'tessera')} | {r['nodes']} | {r['shape']} | {r['mode']} | "
                         f"{r['waiting']} | {cpu} |")  # fmt: skip
    if any(r.get("api_per_pod") for r in rows):
        lines += ["", "API requests per bound pod, by service, those asked at least once per 100 pods (the "
                  "emulator's count; kube-scheduler asks a binding and an Event):", "",
                  "| nodes | shape | mode | requests per pod |", "|---|---|---|---|"]
        for r in rows:
            if r.get("scheduler", "tessera") != "tessera":
                continue
            what = "; ".join(f"{svc}: " + ", ".join(f"{k} {v}" for k, v in sorted(asked.items(), key=lambda kv: -kv[1]))
                             for svc, asked in sorted(r.get("api_per_pod", {}).items()))
            lines.append(f"| {r['nodes']} | {r['shape']} | {r['mode']} | {what} |")
    return lines


def write(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    head = RESULTS.read_text().split(MARK)[0] if RESULTS.exists() else "# Kubernetes edge: binding throughput\n\n"
    RESULTS.write_text(head.rstrip() + "\n\n" + "\n".join(render(rows, args)) + "\n")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.k8s")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--pods", type=int, default=4000)
    p.add_argument("--sizes", default="", help="several runs' nodes × pods: 500x4000,5000x10000 (the "
                   "table issue 29 asks for; ~15 minutes on 2 cores)")
    p.add_argument("--shapes", default="whole,slice", help="whole cards and/or 16 GB slices, or vcjob: "
                   "Volcano Jobs of --job-size whole-card workers (not in the default table)")
    p.add_argument("--job-size", type=int, default=8, help="workers per Volcano Job (shape vcjob)")
    p.add_argument("--modes", default="backlog,stream")
    p.add_argument("--kubeconfig", default="", help="a real API server (default: kmock's emulator)")
    p.add_argument("--qps", type=float, default=1000, help="client QPS limit of every service")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for all bindings")
    p.add_argument("--store", default="tmpfs", choices=("tmpfs", "disk"),
                   help="where NATS keeps the stream (disk: every atomic batch is an fsync)")
    p.add_argument("--against", default="", metavar="COMMAND",
                   help="also run this scheduler on the same server, side by side (whole cards only): "
                        "its command line, `{kubeconfig}` replaced by the server's, e.g. "
                        "'kube-scheduler --kubeconfig {kubeconfig} --leader-elect=false'")
    p.add_argument("--against-name", default="default-scheduler",
                   help="the schedulerName its pods carry (and its label in the table)")
    p.add_argument("--waiting", type=int, default=0, help="whole-card pods beyond --pods that wait (make "
                   "--pods the cluster's cards): the scheduler's cost while a backlog waits")
    p.add_argument("--idle", type=float, default=None, help="seconds each process's CPU is read once all are "
                   "bound and nothing else happens (default: 20 with --waiting, else none)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--dump-log", default="", help="write each run's log (JSONL) to PREFIX-shape-mode.jsonl")
    return p.parse_args(argv)


def main() -> None:
    args = parse()
    # The services' bytecode written first, as the image does (deploy/Dockerfile): with
    # PYTHONDONTWRITEBYTECODE set (these machines set it) each service would compile the
    # project's ~36,000 lines at every start, ~0.5 s of CPU each, not part of scheduling.
    for package in ("contracts", "services"):
        compileall.compile_dir(ROOT / package, quiet=1, workers=1)
    rows = asyncio.run(main_async(args))
    if not args.no_write:
        write(rows, args)


if __name__ == "__main__":
    main()
