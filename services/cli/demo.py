"""`tessera demo` (what `make run` runs): the article's scenario on a simulated cluster.

Today it (1) starts the embedded nats-server and proves the event log round trip, then (2) runs
the article's manifests plus 8 inference pods and one invalid pod through the scheduling cores
in-process (`tessera simulate`'s engine: the same decide/evolve code the services run, over the
in-memory log), prints placements, a per-card ledger view, and the same workload under
whole-card exclusive placement. The multi-process version (admission → queue → scheduler →
allocator → node-agent over JetStream) is not wired up yet, and the demo says so.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def nats_round_trip(data_dir: Path) -> bool:
    from contracts.events import NodeLost
    from contracts.registry import default_registry
    from services.runtime.eventlog import Appended, Entry
    from services.runtime.eventlog.jetstream import JetStreamLog
    from services.runtime.natsserver import NatsServer

    with NatsServer(data_dir=data_dir) as server:
        print(f"[1/4] embedded nats-server (JetStream) on {server.url} (pid {server.pid})")
        log = await JetStreamLog.connect(server.url)
        reg = default_registry()
        probe = NodeLost(node="demo-probe", reason="log round-trip check")
        entry = Entry(
            log.subjects.node("demo-probe"), reg.encode(probe), reg.envelope(probe).to_headers()
        )
        result = await log.append(entry)
        back = await log.last(log.subjects.node("demo-probe"))
        await log.close()
    ok = isinstance(result, Appended) and back is not None and back.data == entry.data
    print(
        f"      stream {log.stream}: append + read back {'ok' if ok else 'FAILED'}; server stopped"
    )
    return ok


def whole_card(docs: list[dict]) -> list[dict]:
    """The same workload as operators run it without sharing: every device ask a whole card."""
    out = []
    for doc in docs:
        text = yaml.safe_dump(doc)
        doc = yaml.safe_load(text)
        for container in _containers(doc):
            limits = container.get("resources", {}).get("limits", {})
            for key in [k for k in limits if k.endswith(("-memory", "-core"))]:
                del limits[key]
        doc.get("metadata", {}).get("annotations", {}).pop("huawei.com/vnpu-mode", None)
        out.append(doc)
    return out


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    if doc.get("kind") == "Pod":
        return spec.get("containers", [])
    return [
        c
        for t in spec.get("tasks", [])
        for c in t.get("template", {}).get("spec", {}).get("containers", [])
    ]


def simulate(inventory: Path, docs: list[dict], tmp: Path, name: str) -> dict[str, Any]:
    from services.cli.simulate import _build
    from services.core.simulate.report import build_report

    workload = tmp / f"{name}.yaml"
    workload.write_text(yaml.safe_dump_all(docs))
    args = argparse.Namespace(inventory=str(inventory), workload=str(workload), scheduler_conf=None,
                              device_config=None, cycles=None, until=None)  # fmt: skip
    sim = _build(args)
    sim.run()
    return build_report(sim.log.messages())


def print_placements(report: dict[str, Any]) -> None:
    print(f"      {'POD':28s} {'PHASE':9s} {'NODE':7s} DEVICES / REASON")
    for p in report["pods"]:
        devices = ", ".join(
            f"{d['uuid'].rsplit('-', 1)[-1] and d['uuid']} {d['memory']}MB"
            + (f" {d['template']}" if d.get("template") else f" {d['cores']}c")
            for d in p["devices"]
        )
        print(
            f"      {p['name']:28s} {p['phase']:9s} {p['node'] or '-':7s} {devices or p['reason']}"
        )


def print_cards(report: dict[str, Any]) -> None:
    print(f"      {'CARD':24s} {'MEMORY MB':>15s} {'CORES':>7s} {'SLICES':>7s}")
    for c in report["cards"]:
        if c["slices_used"]:
            mem = f"{c['memory_used']}/{c['memory_total']}"
            cores = f"{c['cores_used']}/{c['cores_total']}"
            print(
                f"      {c['uuid']:24s} {mem:>15s} {cores:>7s} {c['slices_used']:>3d}/{c['slices_total']}"
            )


def cmd_demo(args: argparse.Namespace) -> int:
    inventory = EXAMPLES / "inventory.yaml"
    docs = [
        d
        for f in ("article.yaml", "inference.yaml")
        for d in yaml.safe_load_all((EXAMPLES / f).read_text())
        if d
    ]
    with tempfile.TemporaryDirectory(prefix="tessera-demo-") as tmp_name:
        tmp = Path(tmp_name)
        ok = asyncio.run(nats_round_trip(tmp / "nats"))
        print(
            f"[2/4] simulating {len(docs)} objects from examples/ on {inventory.name} (shared placement)"
        )
        shared = simulate(inventory, docs, tmp, "shared")
        print_placements(shared)
        print("[3/4] per-card ledger (cards with slices)")
        print_cards(shared)
        valid = [d for d in docs if d["metadata"]["name"] != "bad-typo"]
        whole = simulate(inventory, whole_card(valid), tmp, "whole")
    print("[4/4] the same workload under whole-card exclusive placement")
    for label, rep in (("shared (Tessera)", shared), ("whole-card", whole)):
        m = rep["metrics"]
        running = m["pods_by_phase"].get("Running", 0)
        print(f"      {label:18s} pods running {running:2d}  cards in use {m['cards_in_use']:2d}/{m['cards_total']}"
              f"  card memory allocated {100 * m['card_memory_allocated_ratio']:5.1f}%")  # fmt: skip
    pending = [p for p in shared["pods"] if p["phase"] == "Pending"]
    if pending:
        print("\nStill pending in the shared run, with the scheduler's reason:")
        for p in pending:
            print(f"  {p['name']}: {p['reason']}")
    print(
        "\nNot yet built: the multi-process demo (admission → queue → scheduler → allocator →\n"
        "node-agent over JetStream) and `tessera apply`; this demo runs the same cores in-process."
    )
    return 0 if ok else 1


def add_parsers(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="the article's scenario on a simulated cluster (make run)")
    demo.set_defaults(func=cmd_demo)
