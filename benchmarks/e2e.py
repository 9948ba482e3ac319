"""End-to-end throughput: `python -m benchmarks.e2e` → `benchmarks/results/e2e.md`.

NATS + the five services as separate processes (`ControlPlane`, as `tessera up` starts them),
100 simulated nodes × 8 Ascend 910B3 cards in one node agent, and 2,000 single-slice pods
(16 GB vir05 template each) submitted through the admission service in requests of `--chunk`
pods. A plain core-NATS subscriber on the job subjects timestamps every `JobSubmitted` and
`PlacementCommitted` as it is published, so submit → bound latency is measured on one clock,
outside the services. Throughput = pods bound / (last bind − first submit). Run by hand, once
with the NATS store on the disk and once on tmpfs (`--store`); never part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import nats
import yaml

from contracts.api import ApplyReply, ApplyRequest, decode, encode
from services.cli.control import request
from services.cli.up import ControlPlane
from services.runtime.natsauth import connect_options

RESULTS = Path(__file__).parent / "results" / "e2e.md"


def inventory(nodes: int) -> dict:
    return {"nodes": [{"name": "node", "count": nodes, "cpu": 192, "memory": "1536Gi",
                       "devices": [{"type": "Ascend910B3", "count": 8}]}]}  # fmt: skip


def pods(n: int, start: int = 0) -> str:
    docs = [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p-{i:05d}", "namespace": "bench"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"cpu": "1", "memory": "4Gi"},
            "limits": {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"}}}]},
    } for i in range(start, start + n)]  # fmt: skip
    return yaml.safe_dump_all(docs)


async def run(nodes: int, count: int, chunk: int, store: Path, rate: float = 0.0) -> dict:
    inv = store / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory(nodes)))
    plane = ControlPlane(store / "state", inventory=str(inv), env={"TESSERA_LOG_LEVEL": "WARNING"})
    started = time.perf_counter()
    plane.start(report=lambda _line: None)
    up_s = time.perf_counter() - started
    submitted: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = asyncio.Event()
    nc = await nats.connect(plane.url, **connect_options(url=plane.url))  # as the operator

    async def seen(msg: nats.aio.msg.Msg) -> None:
        kind = (msg.headers or {}).get("Tessera-Type")
        job = msg.subject.rsplit(".", 1)[-1]
        if kind == "JobSubmitted":
            submitted.setdefault(job, time.perf_counter())
        elif kind == "PlacementCommitted":
            bound.setdefault(job, time.perf_counter())
            if len(bound) >= count:
                done.set()

    try:
        await nc.subscribe("tessera.ev.job.bench.>", cb=seen)
        if rate:
            chunk = max(1, int(rate // 10))  # ten requests a second
        texts = [pods(min(chunk, count - i), i) for i in range(0, count, chunk)]
        t0 = time.perf_counter()
        rejected = 0
        for k, text in enumerate(texts):
            if rate:  # paced: chunk k goes out at k·chunk/rate seconds
                await asyncio.sleep(max(0.0, t0 + k * chunk / rate - time.perf_counter()))
            data = await request(plane.url, "tessera", "admission", "apply",
                                 encode(ApplyRequest(manifest=text)), timeout=120)  # fmt: skip
            reply = decode(data, ApplyReply)
            rejected += sum(r.outcome != "accepted" for r in reply.results)
        submit_s = time.perf_counter() - t0
        try:
            await asyncio.wait_for(done.wait(), timeout=600)
        except TimeoutError:
            pass
        first = min(submitted.values())
        last = max(bound.values()) if bound else first
        lat = sorted(bound[j] - submitted[j] for j in bound if j in submitted)
    finally:
        await nc.close()
        plane.stop()
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [0.0] * 99
    return {
        "nodes": nodes, "cards": nodes * 8, "pods": count, "chunk": chunk, "bound": len(bound),
        "rate": rate,
        "rejected": rejected, "startup_s": up_s, "submit_s": submit_s, "span_s": last - first,
        "pods_per_s": len(bound) / (last - first) if last > first else 0.0,
        "p50_s": q[49], "p99_s": q[98], "max_s": lat[-1] if lat else 0.0,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=200, help="pods per apply request")
    parser.add_argument("--store", default="disk,tmpfs", help="where NATS keeps the stream")
    parser.add_argument("--rates", default="0,200",
                        help="offered pods/s (0 = all at once); latency is measured per rate")  # fmt: skip
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    rows = []
    for store in args.store.split(","):
        for rate in (float(x) for x in args.rates.split(",")):
            base = "/dev/shm" if store == "tmpfs" and os.path.isdir("/dev/shm") else None
            with tempfile.TemporaryDirectory(prefix="tessera-e2e-", dir=base) as tmp:
                r = asyncio.run(run(args.nodes, args.pods, args.chunk, Path(tmp), rate))
            r["store"] = store
            rows.append(r)
            print(f"{store:6s} offered {rate or 'burst'}: {r['bound']}/{r['pods']} bound in {r['span_s']:.2f}s → "
                  f"{r['pods_per_s']:.0f} pods/s; submit→bound p50 {r['p50_s']:.3f}s "
                  f"p99 {r['p99_s']:.3f}s max {r['max_s']:.3f}s (apply took {r['submit_s']:.2f}s)")  # fmt: skip
    write(rows, Path(args.output))


def write(rows: list[dict], path: Path) -> None:
    lines = [
        "# End-to-end: submit → bound through the five services",
        "",
        f"`python -m benchmarks.e2e` on {platform.node()} ({os.cpu_count()} cores, Python "
        f"{platform.python_version()}); NATS + admission, queue, scheduler, allocator and one node "
        "agent as separate processes; pods submitted through the admission service in requests "
        f"of {rows[0]['chunk']} pods. Goal: ≥ 300 pods/s and p99 ≤ 2 s (anchor: kube-scheduler "
        "with an HTTP extender, the HAMi deployment, ≈ 111 pods/s at 500 nodes).",
        "",
        "| NATS store | offered pods/s | nodes × cards | pods bound | span s | pods/s | p50 s | p99 s | max s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        offered = f"{r['rate']:g}" if r["rate"] else "all at once"
        lines.append(f"| {r['store']} | {offered} | {r['nodes']} × 8 | {r['bound']}/{r['pods']} | "
                     f"{r['span_s']:.2f} | {r['pods_per_s']:.0f} | {r['p50_s']:.3f} | "
                     f"{r['p99_s']:.3f} | {r['max_s']:.3f} |")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
