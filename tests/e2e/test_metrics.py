"""Scraping a running `tessera up` with the demo workload (issue 17 item 4's acceptance).

`tessera up --detach` on `examples/inventory.yaml` prints and records a loopback metrics port
per service; after `tessera apply` of the article and the inference pods, the allocator's
`/metrics` carries HAMi's card gauges with the demo's card usage, and the scheduler's carries
Volcano's queue gauges. Every expected number comes from the workload and the log: the pods'
card slices as `tessera get pods` replays them, the inventory's card count, the Queue's
capability as written in the manifest — nothing is a constant of this test.
"""

from __future__ import annotations

import json
import math
import re
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from services.cli.up import read_state
from services.core.workload.quantity import to_units
from tests.cli.test_up_down import tessera
from tests.processes import ROOT, wait_until

EXAMPLES = ROOT / "examples"
MIB = 2**20
READY = re.compile(r"^\s+(\w+)\s+ready \(pid (\d+), metrics http://127\.0\.0\.1:(\d+)/metrics\)$", re.M)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def series(samples: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(labels), v) for (n, labels), v in samples.items() if n == name]


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    inventory = str(EXAMPLES / "inventory.yaml")
    started = tessera("up", "--detach", "--state-dir", str(tmp_path), "--inventory", inventory)
    try:
        assert started.returncode == 0, started.stderr
        yield started.stdout, tmp_path
    finally:
        tessera("down", "--state-dir", str(tmp_path))  # by the PIDs in the state file


async def test_scraping_the_demo_returns_hami_card_metrics_with_its_card_usage(
    up: tuple[str, Path],
) -> None:
    stdout, state_dir = up
    printed = {m[0]: int(m[2]) for m in READY.findall(stdout)}
    state = read_state(state_dir)
    assert printed == state["metrics"], stdout  # what up prints is what it records
    assert set(printed) == {"admission", "queue", "scheduler", "allocator", "nodeagent"}
    assert len(set(printed.values())) == len(printed)  # a port of its own each

    applied = tessera("apply", "-f", str(EXAMPLES / "article.yaml"), "-f",
                      str(EXAMPLES / "inference.yaml"), "--state-dir", str(state_dir))  # fmt: skip
    assert applied.returncode == 1 and "bad-typo" in applied.stdout + applied.stderr
    expected = yaml.safe_load((EXAMPLES / "expected.yaml").read_text())["pods"]
    running = {name for name, want in expected.items() if want["phase"] == "Running"}
    pods: dict[str, dict] = {}

    async def all_running() -> bool:
        got = tessera("get", "pods", "-o", "records", "--state-dir", str(state_dir))
        pods.clear()
        pods.update({p["name"]: p for p in json.loads(got.stdout)})
        return all(pods.get(n, {}).get("phase") == "Running" for n in running)

    await wait_until(all_running, timeout=90, what="every demo pod Running")

    # what the pods hold, per card: the usage HAMi's gauges must show
    memory: Counter[str] = Counter()
    cores: Counter[str] = Counter()
    holders: Counter[str] = Counter()
    node_of: dict[str, str] = {}
    for name in running:
        for device in pods[name]["devices"]:
            memory[device["uuid"]] += device["memory"]
            cores[device["uuid"]] += device["cores"]
            holders[device["uuid"]] += 1
            node_of[device["uuid"]] = pods[name]["node"]
    inventory = yaml.safe_load((EXAMPLES / "inventory.yaml").read_text())
    card_count = sum(d["count"] for n in inventory["nodes"] for d in n["devices"])
    allocator = printed["allocator"]

    async def scraped_usage() -> bool:  # the allocator's view follows the log: await it
        got = {labels["device_uuid"]: v
               for labels, v in series(scrape(allocator), "hami_gpu_memory_allocated_bytes")}  # fmt: skip
        return got == {u: memory.get(u, 0) * MIB for u in got} and len(got) == card_count

    await wait_until(scraped_usage, timeout=30, what="the allocator's gauges to show the slices")
    samples = scrape(allocator)
    allocated = series(samples, "hami_gpu_memory_allocated_bytes")
    assert sum(v for _, v in allocated) == sum(memory.values()) * MIB > 0
    for labels, _ in allocated:
        uuid = labels["device_uuid"]
        assert labels["zone"] == "vGPU" and labels["device_type"] == "Ascend910B3"
        assert labels["device_cores"] == str(cores.get(uuid, 0))
        if uuid in node_of:
            assert labels["node"] == node_of[uuid]
    cards = json.loads(tessera("get", "cards", "-o", "records", "--state-dir", str(state_dir)).stdout)
    total_cores = {c["uuid"]: c["cores_total"] for c in cards}
    # % of the card, as current HAMi normalizes it: ceil(used / total × 100) (a template card's
    # total is its AI cores, 20 on a 910B3)
    assert {ls["device_uuid"]: v for ls, v in series(samples, "hami_gpu_core_allocated_ratio")} == \
        {(u := ls["device_uuid"]): math.ceil(cores.get(u, 0) / total_cores[u] * 100) for ls, _ in allocated}  # fmt: skip
    assert {ls["device_uuid"]: v for ls, v in series(samples, "hami_gpu_shared_count")} == \
        {ls["device_uuid"]: holders.get(ls["device_uuid"], 0) for ls, _ in allocated}  # fmt: skip
    limits = {ls["device_uuid"]: v for ls, v in series(samples, "hami_gpu_memory_limit_bytes")}
    assert limits == {c["uuid"]: c["memory_total"] * MIB for c in cards}
    # each inference pod asked 8192 MB of one card, and holds at least that (template rounding)
    requests = [d for d in yaml.safe_load_all((EXAMPLES / "inference.yaml").read_text()) if d]
    for pod in requests:
        asks = pod["spec"]["containers"][0]["resources"].get("limits", {})
        if pod["metadata"]["name"] in running and "huawei.com/Ascend910B3-memory" in asks:
            asked = int(pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910B3-memory"])
            assert [d["memory"] >= asked for d in pods[pod["metadata"]["name"]]["devices"]] == [True]

    # the scheduler: Volcano's queue gauges, the session histogram, pods scheduled
    sched = scrape(printed["scheduler"])
    queue = next(d for d in yaml.safe_load_all((EXAMPLES / "article.yaml").read_text())
                 if d and d["kind"] == "Queue")  # fmt: skip
    name = queue["metadata"]["name"]
    cap = {k: to_units(k, v) for k, v in queue["spec"]["capability"].items()}
    assert sched[("volcano_queue_capacity_milli_cpu", frozenset({("queue_name", name)}))] == cap["cpu"]
    assert sched[("volcano_queue_capacity_memory_bytes", frozenset({("queue_name", name)}))] == cap["memory"] * MIB
    assert sched[("volcano_queue_weight", frozenset({("queue_name", name)}))] == queue["spec"]["weight"]
    jobs = json.loads(tessera("get", "pg", "-o", "records", "--state-dir", str(state_dir)).stdout)
    queue_of = {(j["namespace"], j["name"]): j["queue"] for j in jobs}
    by_queue: defaultdict[str, int] = defaultdict(int)
    for n in running:
        by_queue[queue_of[(pods[n]["namespace"], pods[n]["job"])]] += 1
    for q in by_queue:  # every queue with running device pods has card shares allocated
        held = [v for ls, v in series(sched, "volcano_queue_allocated_scalar_resources")
                if ls["queue_name"] == q and ls["resource"] == "huawei.com/Ascend910B3"]  # fmt: skip
        assert held and held[0] > 0, q
    assert sched[("volcano_schedule_attempts_total", frozenset({("result", "scheduled")}))] >= len(running)
    assert sched[("volcano_e2e_scheduling_latency_milliseconds_count", frozenset())] >= 1
    assert sched[("volcano_unschedule_job_count", frozenset())] == 0
    # events processed on every service
    for service, port in printed.items():
        handled = [v for ls, v in series(scrape(port), "tessera_events_processed_total")
                   if ls["outcome"] == "handled"]  # fmt: skip
        assert sum(handled) > 0, service
