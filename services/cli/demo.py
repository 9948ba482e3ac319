"""`tessera demo` (what `make run` runs): the article's scenario on a Tessera it starts itself.

It starts the embedded nats-server and the five services as separate processes (simulated
nodes from examples/inventory.yaml), applies the article's manifests plus 8 inference pods and
one invalid pod through the admission service, follows the log until every object reached the
outcome examples/expected.yaml names for it, prints the placements and the per-card ledger, and
compares card use with the same workload under whole-card exclusive placement (simulated
in-process). Exit 0 only if every object reached its expected outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import yaml

from services.runtime.tasks import cancel_all

T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT_SECONDS = 90.0


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
    args = argparse.Namespace(inventory=str(inventory), workload=[str(workload)], scheduler_conf=None,
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
        if not devices and p["node"] and not p["reason"]:
            devices = "no card (cpu and memory only)"
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


def check(expected: dict[str, dict], replies: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """What is not yet as expected (empty = done): one line per object."""
    pods = {p["name"]: p for p in report["pods"]}
    missing = []
    for name, want in expected.items():
        if want["phase"] == "Rejected":
            r = replies.get(name)
            reasons = " ".join(r.reasons) if r else ""
            if r is None or r.outcome != "rejected" or want.get("reason", "") not in reasons:
                missing.append(f"{name}: expected Rejected ({want.get('reason', '')}), got "
                               f"{r.outcome if r else 'no reply'} {reasons}")  # fmt: skip
            continue
        got = pods.get(name)
        if got is None or got["phase"] != want["phase"]:
            phase = got["phase"] if got else ("rejected: " + " ".join(replies[name].reasons)
                                              if name in replies else "absent")  # fmt: skip
            why = f" ({got['reason']})" if got and got.get("reason") else ""
            missing.append(f"{name}: expected {want['phase']}, is {phase}{why}")
    return missing


async def follow(url: str, expected: dict[str, dict], replies: dict[str, Any]) -> tuple[dict, list[str]]:
    """Rebuild the report whenever the log grew, until nothing is missing or time is up."""
    from services.cli.get import fetch_report
    from services.runtime.eventlog.jetstream import JetStreamLog

    log = await JetStreamLog.connect(url)
    deadline = time.monotonic() + WAIT_SECONDS
    seen, shown = -1, ""
    try:
        while True:
            seq = await log.last_sequence()
            if seq != seen:
                seen = seq
                report = await fetch_report(url, log.subjects.root)
                missing = check(expected, replies, report)
                phases = report["metrics"]["pods_by_phase"]
                line = f"      log #{seq}: " + ", ".join(f"{k} {v}" for k, v in phases.items())
                if line != shown:
                    print(line, flush=True)
                    shown = line
                if not missing:
                    return report, []
            if time.monotonic() > deadline:
                return report, missing
            await asyncio.sleep(0.25)
    finally:
        await log.close()


def cmd_demo(args: argparse.Namespace) -> int:
    """The scenario; Ctrl-C, SIGTERM or the terminal closing (SIGHUP) stop every process it
    started and remove its directory, then end it with one line (exit 128 + the signal)."""
    from services.cli.up import Interrupted, catch_stop_signals, quiet_after_interrupt

    catch_stop_signals()
    try:
        return _demo()
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        quiet_after_interrupt()
        try:  # the terminal may be gone (SIGHUP): nobody to tell, and no traceback for it
            print(f"\ninterrupted ({signal.Signals(signum).name}): every process the demo started "
                  f"is stopped and its directory removed", file=sys.stderr, flush=True)  # fmt: skip
        except OSError:
            pass
        return 128 + signum


async def _watched(plane: Any, work: Coroutine[Any, Any, T]) -> T:
    """`work`, unless our nats-server exits meanwhile: then its end, said (a client connecting
    to a broker that is gone retries for ever)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)
            if done:
                return task.result()
            if gone := plane.nats_gone():
                raise SystemExit(gone)
    finally:
        if not task.done():
            await cancel_all([task])


def _demo() -> int:
    from services.cli.control import apply_text, print_apply
    from services.cli.get import fetch_cards
    from services.cli.up import ControlPlane

    inventory = EXAMPLES / "inventory.yaml"
    files = ("article.yaml", "inference.yaml")
    texts = [(EXAMPLES / f).read_text() for f in files]
    docs = [d for t in texts for d in yaml.safe_load_all(t) if d]
    expected = yaml.safe_load((EXAMPLES / "expected.yaml").read_text())["pods"]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tessera-demo-") as tmp_name:
        tmp = Path(tmp_name)
        print("[1/5] starting NATS (JetStream) and the five services as separate processes")
        plane = ControlPlane(tmp / "state", inventory=str(inventory))
        try:
            plane.start(lambda line: print("      " + line.strip(), flush=True))
            print(f"[2/5] tessera apply -f examples/{files[0]} -f examples/{files[1]}")
            reply = apply_text(plane.url, "tessera", "\n---\n".join(texts))
            print_apply(reply, "table")
            replies = {r.name: r for r in reply.results}
            print(f"[3/5] following the log until every object reaches its expected outcome "
                  f"(examples/expected.yaml, at most {WAIT_SECONDS:g}s)")  # fmt: skip
            shared, missing = asyncio.run(_watched(plane, follow(plane.url, expected, replies)))
            print("[4/5] placements (tessera get pods) and the per-card ledger (tessera get cards)")
            print_placements(shared)
            cards = asyncio.run(_watched(plane, fetch_cards(plane.url, "tessera")))
            print_cards({"cards": cards})
        finally:
            plane.stop()
        valid = [d for d in docs if replies.get(d["metadata"]["name"]) is None
                 or replies[d["metadata"]["name"]].outcome != "rejected"]  # fmt: skip
        whole = simulate(inventory, whole_card(valid), tmp, "whole")
    print("[5/5] the same workload under whole-card exclusive placement (simulated)")
    # What the pods need (their slices in the shared run, template-rounded; a whole-card pod
    # needs all of it) against the memory of the cards they occupy in each placement.
    held = sum(d["memory"] for p in shared["pods"] if p["phase"] == "Running" for d in p["devices"])
    used = [c for c in cards if c["slices_used"]]
    running = shared["metrics"]["pods_by_phase"].get("Running", 0)
    m = whole["metrics"]
    whole_used = [c for c in whole["cards"] if c["slices_used"]]
    for label, n_pods, occupied, total in (
        ("shared (Tessera)", running, used, len(cards)),
        ("whole-card", m["pods_by_phase"].get("Running", 0), whole_used, m["cards_total"]),
    ):
        busy = sum(c["memory_total"] for c in occupied)
        print(f"      {label:18s} pods running {n_pods:2d}  cards in use {len(occupied):2d}/{total}"
              f"  free whole cards {total - len(occupied):2d}"
              f"  pods need {100 * held / max(1, busy):4.1f}% of the occupied cards' memory")  # fmt: skip
    for p in whole["pods"]:
        if p["phase"] == "Pending":
            print(f"        whole-card: {p['name']} waits: {p['reason']}")
    took = time.monotonic() - started
    if missing:
        print(f"\nNOT as expected after {took:.0f}s:")
        for line in missing:
            print(f"  {line}")
        return 1
    print(f"\nevery object reached its expected outcome ({len(expected)} objects, {took:.0f}s)")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo", help="the article's scenario on a system of its own (make run); no `tessera up` first",
        description="Starts its own embedded nats-server and the five services as separate processes "
                    "(in a temporary directory, stopped at the end: no `tessera up` needed, and a running "
                    "one is left alone), applies the article's manifests, follows the log to "
                    "examples/expected.yaml and compares with whole-card placement.")  # fmt: skip
    demo.set_defaults(func=cmd_demo)
