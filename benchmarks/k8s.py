"""Binding throughput and latency against a Kubernetes API server.

    python -m benchmarks.k8s [--nodes 500] [--pods 4000] [--shapes whole,slice]
                             [--modes backlog,stream] [--kubeconfig PATH] [--qps 1000]
    python -m benchmarks.k8s --sizes 500x4000,5000x10000   # the whole table (issue 29)

Per run: `--nodes` Nodes with HAMi's register annotation (8 × Ascend 910B3, template mode), then
`--pods` Pods with `schedulerName: volcano` (whole cards, or 16 GB vNPU slices), created
concurrently (64 requests in flight on one client); `backlog` creates them all and then starts
the control plane, `stream` starts it first and creates them while it schedules. The five
services run as processes with `--kubeconfig` on an embedded NATS; bindings without HAMi's node
lock (no device plugin answers here). Measured from a watch of the pods: pods/s from the first
binding to the last, and creation → bound p50 / p99. Without `--kubeconfig` the API server is
kmock's emulator in a process of its own (tests/kube/cluster.py); with it, the same against a
real one (its Nodes and Pods are created in namespace `tessera-bench` and deleted after).
Results go to benchmarks/results/k8s.md (the hand-written part of that file is kept).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube.client import Kube, KubeError, Limits, nodes_path, pods_path
from services.kube.listwatch import Reflector

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("allocator", "queue", "scheduler", "admission", "nodeagent")
RESULTS = ROOT / "benchmarks" / "results" / "k8s.md"
NAMESPACE = "tessera-bench"
MARK = "<!-- measured below: rewritten by benchmarks/k8s.py -->"


def _register(node: str) -> str:
    return json.dumps([{"id": f"{node}-npu-{i}", "index": i, "count": 4, "devmem": 65536,
                        "devcore": 20, "type": "Ascend910B3", "health": True} for i in range(8)])  # fmt: skip


def _pod(i: int, shape: str) -> dict[str, Any]:
    limits = {"huawei.com/Ascend910B3": "1", "cpu": "1", "memory": "1Gi"}
    if shape == "slice":
        limits["huawei.com/Ascend910B3-memory"] = "16384"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"b-{i}", "namespace": NAMESPACE},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox",
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

    async def run(self) -> None:
        async for ch in Reflector(self.kube, pods_path(NAMESPACE)).changes():
            if ch.kind == "upsert" and (ch.obj.get("spec") or {}).get("nodeName"):
                name = ch.obj["metadata"]["name"]
                self.bound.setdefault(name, time.perf_counter())
                if len(self.bound) >= self.want:
                    self.all_bound.set()

    async def create(self, pods: list[dict[str, Any]]) -> None:
        async def one(p: dict[str, Any]) -> None:
            await self.kube.create(pods_path(NAMESPACE), p)
            self.created[p["metadata"]["name"]] = time.perf_counter()

        await _gather_limited([one(p) for p in pods], 64)


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


async def run_one(args: argparse.Namespace, shape: str, mode: str, kubeconfig: str, work: Path) -> dict[str, Any]:
    kube = await Kube.connect(kubeconfig, Limits(qps=0, connections=128))
    state = Path(tempfile.mkdtemp(prefix="tessera-k8s-nats-", dir="/dev/shm")) if args.store == "tmpfs" \
        else work / f"state-{shape}-{mode}"  # fmt: skip
    plane = ControlPlane(state, kubeconfig=kubeconfig, extra={
        "allocator": ["--hami-node-lock", "off", "--kube-qps", str(args.qps)],
        **{s: ["--kube-qps", str(args.qps)] for s in ("admission", "queue", "nodeagent")}})  # fmt: skip
    watch = Watch(kube)
    watch.want = args.pods
    watcher = asyncio.create_task(watch.run())
    pods = [_pod(i, shape) for i in range(args.pods)]
    try:
        if args.kubeconfig:  # kmock has no Namespace objects (any namespace just works)
            await _ensure_namespace(kube)
        await _nodes(kube, args.nodes)
        started = time.perf_counter()
        if mode == "backlog":
            await watch.create(pods)
            await asyncio.to_thread(plane.start, lambda _l: None)
        else:
            await asyncio.to_thread(plane.start, lambda _l: None)
            await watch.create(pods)
        try:
            await asyncio.wait_for(watch.all_bound.wait(), args.timeout)
        except TimeoutError:
            pass
        elapsed = time.perf_counter() - started
        cpu = {name: _cpu_seconds(proc.pid) for name, proc in plane.procs.items()}
        for server in plane.servers:  # the log shares the cores too (not counted as a service)
            cpu["nats-server"] = round(cpu.get("nats-server", 0.0) + _cpu_seconds(server.pid or 0), 1)
        reads = await _delivered(plane.url, plane.creds("admin"))
        dump = Path(f"{args.dump_log}-{shape}-{mode}.jsonl") if args.dump_log else work / "log.jsonl"
        done = await asyncio.to_thread(subprocess.run, [  # the log with its timestamps
            sys.executable, "-m", "services.cli.main", "events", "--output-file", str(dump),
            "--nats", plane.url, *(["--nats-creds", plane.creds("cli")] if plane.creds("cli") else [])],
            cwd=ROOT, check=False, capture_output=True, text=True)  # fmt: skip
        if done.returncode:
            print(f"dumping the log failed: {done.stderr.strip()}", file=sys.stderr)
        writes = _written(dump) if dump.exists() else {}
        if args.emulator_pid:
            cpu["api server"] = _cpu_seconds(args.emulator_pid)
        cpu["driver"] = round(time.process_time(), 1)
    finally:
        await asyncio.to_thread(plane.stop)
        if args.store == "tmpfs":
            shutil.rmtree(state, ignore_errors=True)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if args.kubeconfig:
            await _cleanup(kube, args.nodes)
        await kube.close()
    times = sorted(watch.bound.values())
    lat = sorted(watch.bound[n] - watch.created[n] for n in watch.bound if n in watch.created)
    span = (times[-1] - times[0]) if len(times) > 1 else 0.0
    per_pod = max(len(times), 1)
    return {"reads_per_pod": {k: round(v / per_pod, 1) for k, v in reads.items()},
            "writes_per_pod": {k: round(v / per_pod, 2) for k, v in sorted(writes.items())},
            "shape": shape, "mode": mode, "nodes": args.nodes, "pods": args.pods, "bound": len(times),
            "pods_per_s": round((len(times) - 1) / span, 1) if span else 0.0,
            "p50": round(statistics.median(lat), 2) if lat else None,
            "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2) if lat else None,
            "elapsed": round(elapsed, 1), "cpu": cpu}  # fmt: skip


def _cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (Linux /proc), to see who is the limit."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)


async def _ensure_namespace(kube: Kube) -> None:
    try:
        await kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": NAMESPACE}})  # fmt: skip
    except KubeError as exc:
        if exc.status != 409:
            raise


async def _cleanup(kube: Kube, nodes: int) -> None:
    for i in range(nodes):
        try:
            await kube.delete(nodes_path(f"bench-{i}"))
        except KubeError:
            pass
    try:
        await kube.delete(f"/api/v1/namespaces/{NAMESPACE}")
    except KubeError:
        pass


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
            work = Path(tempfile.mkdtemp(prefix="tessera-k8s-"))
            proc = None
            if args.kubeconfig:
                kubeconfig = args.kubeconfig
            else:
                proc, kubeconfig = await asyncio.to_thread(_emulator, work)
            args.emulator_pid = proc.pid if proc else 0
            row: dict[str, Any] | None = None
            try:
                row = await run_one(args, shape, mode, kubeconfig, work)
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait(30)
                    if row is not None:  # it wrote what it served as it stopped
                        row["api_per_pod"] = _api_per_pod(work / "requests.json", row["bound"])
                shutil.rmtree(work, ignore_errors=True)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def write(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    head = RESULTS.read_text().split(MARK)[0] if RESULTS.exists() else "# Kubernetes edge: binding throughput\n\n"
    server = f"real API server ({args.kubeconfig})" if args.kubeconfig else "kmock's emulator (one process)"
    lines = [MARK, "", f"API server: {server}; NATS store on {args.store}; client QPS {args.qps}; load average at start "
             f"{os.getloadavg()[0]:.1f}; {os.cpu_count()} cores.", "",
             "| nodes | pods | shape | mode | bound | pods/s (first→last binding) | created→bound p50 s | p99 s | wall s | CPU s per process |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cpu = ", ".join(f"{k} {v}" for k, v in r["cpu"].items())
        lines.append(f"| {r['nodes']} | {r['pods']} | {r['shape']} | {r['mode']} | {r['bound']} | "
                     f"{r['pods_per_s']} | {r['p50']} | {r['p99']} | {r['elapsed']} | {cpu} |")  # fmt: skip
    lines += ["", "Per bound pod: CPU ms of the five services (start-up included), and the log messages "
              "each process read (deliveries to its consumers) and wrote.", "",
              "| nodes | shape | mode | services CPU ms/pod | read per pod | written per pod |", "|---|---|---|---|---|---|"]
    for r in rows:
        services = sum(v for k, v in r["cpu"].items() if k in SERVICES)
        ms = round(1000 * services / max(r["bound"], 1), 2)
        read = ", ".join(f"{k} {v}" for k, v in r.get("reads_per_pod", {}).items())
        wrote = ", ".join(f"{k} {v}" for k, v in r.get("writes_per_pod", {}).items())
        lines.append(f"| {r['nodes']} | {r['shape']} | {r['mode']} | {ms} | {read} | {wrote} |")
    if any(r.get("api_per_pod") for r in rows):
        lines += ["", "API requests per bound pod, by service, those asked at least once per 100 pods (the "
                  "emulator's count; kube-scheduler asks a binding and an Event):", "",
                  "| nodes | shape | mode | requests per pod |", "|---|---|---|---|"]
        for r in rows:
            what = "; ".join(f"{svc}: " + ", ".join(f"{k} {v}" for k, v in sorted(asked.items(), key=lambda kv: -kv[1]))
                             for svc, asked in sorted(r.get("api_per_pod", {}).items()))
            lines.append(f"| {r['nodes']} | {r['shape']} | {r['mode']} | {what} |")
    RESULTS.write_text(head.rstrip() + "\n\n" + "\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.k8s")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--pods", type=int, default=4000)
    p.add_argument("--sizes", default="", help="several runs' nodes × pods: 500x4000,5000x10000 (the "
                   "table issue 29 asks for; ~15 minutes on 2 cores)")
    p.add_argument("--shapes", default="whole,slice", help="whole cards and/or 16 GB slices")
    p.add_argument("--modes", default="backlog,stream")
    p.add_argument("--kubeconfig", default="", help="a real API server (default: kmock's emulator)")
    p.add_argument("--qps", type=float, default=1000, help="client QPS limit of every service")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for all bindings")
    p.add_argument("--store", default="tmpfs", choices=("tmpfs", "disk"),
                   help="where NATS keeps the stream (disk: every atomic batch is an fsync)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--dump-log", default="", help="write each run's log (JSONL) to PREFIX-shape-mode.jsonl")
    args = p.parse_args()
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
