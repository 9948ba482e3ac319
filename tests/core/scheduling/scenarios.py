"""Scenario tables (STYLE §12): YAML fixtures of cluster + workload + conf → expected outcome.

One helper runs a scenario through the pure core (admission → events → projection → `decide`),
the CLI test runs the very same fixture through `tessera simulate --cycles 1`. Multi-step
tables (`steps: all`, volcano.md §4 H) run the whole simulation instead: in-process through the
engine, and through the CLI; both are checked against the same report expectations.

Fixture keys: `conf` (volcano-scheduler.conf text; per table or per scenario), `ut_switches:
true` (Volcano's unit tests enable only the switches they set — every other `enable*` switch of
a listed plugin is written as false), `inventory`, `workload` (with optional `replace`),
`expect`: `bound`/`pipelined` {ns/pod: node}, `evicted` [ns/pod], `phases` {ns/job: PodGroup
phase after the session}, `rejected` [ns/name] (admission refused them), `pods` {ns/pod: phase}
and `jobs` {ns/job: phase} (report view, multi-step tables), `devices` {ns/pod: ["<card uuid>
<template or -> <memory> <cores>"]}, `cards` {uuid: {memory_used, cores_used, slices_used}}
after the session, `reasons` {ns/job: text the unschedulable reason contains}. Without `conf`
a scenario runs Tessera's built-in configuration; `until` (multi-step) stops the virtual clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import yaml

from services.core.devices import build_vendors
from services.core.scheduling.config import DEFAULT_CONF, SWITCHES, parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Decisions, Unschedulable
from services.core.scheduling.record import configured
from services.core.simulate.engine import Simulation, load_simulation
from services.core.simulate.inventory import load_hypernodes, load_inventory
from services.core.simulate.report import build_report
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.runtime.eventlog.model import StoredMessage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"

#: Volcano's Helm tiers with preempt and reclaim (gang and drf do not vote on victims: priority
#: decides), deviceshare on with HAMi vNPU templates, binpack
PREEMPT_CONF = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - {name: gang, enablePreemptable: false}
  - name: conformance
- plugins:
  - {name: drf, enablePreemptable: false}
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments: {deviceshare.AscendHAMiVNPUEnable: true, deviceshare.SchedulePolicy: binpack}
"""


@dataclass(frozen=True)
class Scenario:
    table: str
    name: str
    conf: str
    inventory: dict[str, Any]
    workload: str
    expect: dict[str, Any]
    multi_step: bool = False
    until: float | None = None  # multi-step tables: stop the virtual clock here


@dataclass(frozen=True)
class CoreResult:
    decisions: Decisions
    initial_phases: dict[str, str]
    card_usage: dict[str, dict[str, int]]  # before the session


@cache
def vendors():  # type: ignore[no-untyped-def]
    return build_vendors()


def only_listed_switches(conf: str) -> str:
    """Volcano's unit tests build tiers in Go where an unset `Enabled*` pointer means *off*
    (the file loader's ApplyPluginConfDefaults is not applied): write those offs explicitly."""
    raw = yaml.safe_load(conf)
    for tier in raw.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            for switch in SWITCHES:
                plugin.setdefault(switch, False)
    return yaml.safe_dump(raw, sort_keys=False)


def load_table(table: str) -> list[Scenario]:
    doc = yaml.safe_load((FIXTURES / f"{table}.yaml").read_text())
    out = []
    for name, sc in doc["scenarios"].items():
        workload = sc["workload"]
        for k, v in (sc.get("replace") or {}).items():
            workload = workload.replace(k, str(v))
        conf = sc.get("conf", doc.get("conf")) or DEFAULT_CONF
        if sc.get("ut_switches", doc.get("ut_switches", False)):
            conf = only_listed_switches(conf)
        out.append(Scenario(table, name, conf, sc["inventory"], workload, sc["expect"],
                            doc.get("steps") == "all", sc.get("until")))  # fmt: skip
    return out


def load_tables(*tables: str) -> list[Scenario]:
    return [sc for t in tables for sc in load_table(t)]


def _admit(sc: Scenario) -> Workload:
    reg = vendors()
    workload = admit(load_documents(sc.workload), hami_parser(reg), reg.resource_names())
    rejected = sorted(f"{r.namespace}/{r.name}".lstrip("/") for r in workload.rejections)
    assert rejected == sorted(sc.expect.get("rejected", [])), [
        r.message() for r in workload.rejections
    ]
    return workload


def _simulation(sc: Scenario, cycles: int | None, admits_in_proposal: bool = True) -> Simulation:
    """`admits_in_proposal` False: sessions as a scheduler before it recorded them (its own
    Inqueue events)."""
    reg = vendors()
    workload = _admit(sc)
    if hypernodes := load_hypernodes(sc.inventory):  # the inventory's HyperNodes (simulate's key)
        workload = dataclasses.replace(workload, hypernodes=(*hypernodes, *workload.hypernodes))
    return load_simulation(
        parse_conf(sc.conf), reg, load_inventory(sc.inventory, reg.catalogue), workload,
        cycles=cycles, until=sc.until,
        config=msgspec.structs.replace(configured(sc.conf, scheduler="simulate", mode="simulate"),
                                       admits_in_proposal=admits_in_proposal),
    )  # fmt: skip


def run_core(sc: Scenario) -> CoreResult:
    """One session through the pure core over the snapshot the simulator's log builds."""
    sim = _simulation(sc, cycles=0)
    sim.run()  # submits the workload (and pre-existing placements) without running a session
    snap = sim.projection.snapshot()
    phases = {f"{j.spec.namespace}/{j.spec.name}": j.phase for j in snap.jobs}
    usage = {
        c.spec.uuid: {"memory_used": c.usage.memory_used, "cores_used": c.usage.cores_used,
                      "slices_used": c.usage.slices_used}
        for n in snap.nodes for c in n.cards
    }  # fmt: skip
    return CoreResult(decide(snap, parse_conf(sc.conf)), phases, usage)


def run_engine(sc: Scenario) -> dict[str, Any]:
    """The whole simulation in-process (multi-step tables); the report as the CLI writes it."""
    return build_report(engine_log(sc))


def engine_log(sc: Scenario, admits_in_proposal: bool = True) -> list[StoredMessage]:
    sim = _simulation(sc, cycles=None, admits_in_proposal=admits_in_proposal)
    sim.run()
    return sim.log.messages()


def bound_of(d: Decisions) -> dict[str, str]:
    return {
        f"{jp.namespace}/{p.task}": p.node
        for jp in d.placements
        if not jp.pipelined
        for p in jp.placements
    }


def pipelined_of(d: Decisions) -> dict[str, str]:
    return {
        f"{jp.namespace}/{p.task}": p.node for jp in d.placements if jp.pipelined
        for p in jp.placements
    }  # fmt: skip


def evicted_of(d: Decisions) -> list[str]:
    return sorted(f"{e.namespace}/{e.task}" for e in d.evictions)


def phases_of(r: CoreResult) -> dict[str, str]:
    phases = dict(r.initial_phases)
    for ph in r.decisions.phases:
        phases[f"{ph.namespace}/{ph.name}"] = ph.phase
    return phases


def _same(what: str, got: object, want: object) -> None:
    """The helper module is not assertion-rewritten by pytest: say what differed."""
    assert got == want, f"{what}: got {got!r}, want {want!r}"


def _dev(uuid: str, template: str | None, memory: int, cores: int) -> str:
    return f"{uuid} {template or '-'} {memory} {cores}"


def check_core(sc: Scenario, r: CoreResult) -> None:
    d = r.decisions
    if "devices" in sc.expect:
        got_dev = {
            f"{jp.namespace}/{p.task}": [
                _dev(s.card, s.slice.template if s.slice.kind == "template" else None,
                     s.slice.memory, s.slice.cores)
                for s in p.slices
            ]
            for jp in d.placements for p in jp.placements
        }  # fmt: skip
        _same("devices", {k: got_dev.get(k) for k in sc.expect["devices"]}, sc.expect["devices"])
    if "cards" in sc.expect:
        usage = {k: dict(v) for k, v in r.card_usage.items()}
        for jp in d.placements:
            for p in jp.placements:
                for s in p.slices:
                    u = usage[s.card]
                    u["memory_used"] += s.slice.memory
                    u["cores_used"] += s.slice.cores
                    u["slices_used"] += 1
        _same("cards", {k: usage.get(k) for k in sc.expect["cards"]}, sc.expect["cards"])
    if "reasons" in sc.expect:
        why = {f"{u.namespace}/{u.name}": u.reason for u in d.unschedulable}
        for job, text in sc.expect["reasons"].items():
            assert text in why.get(job, ""), f"reason of {job}: {why.get(job)!r} lacks {text!r}"
    if "bound" in sc.expect:
        _same("bound", bound_of(d), sc.expect["bound"])
    if "pipelined" in sc.expect:
        _same("pipelined", pipelined_of(d), sc.expect["pipelined"])
    if "evicted" in sc.expect:
        _same("evicted", evicted_of(d), sorted(sc.expect["evicted"]))
    if "phases" in sc.expect:
        got = phases_of(r)
        _same("phases", {k: got.get(k) for k in sc.expect["phases"]}, sc.expect["phases"])


def _placed(sc: Scenario) -> set[str]:
    """Pods the workload places itself (`spec.nodeName`): already on their node, not bound."""
    return {
        f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{d['metadata']['name']}"
        for d in yaml.safe_load_all(sc.workload)
        if isinstance(d, dict) and d.get("kind") == "Pod" and (d.get("spec") or {}).get("nodeName")
    }


def check_report(sc: Scenario, report: dict[str, Any]) -> None:
    """The same expectations read from a `tessera simulate` report."""
    pods = {f"{p['namespace']}/{p['name']}": p for p in report["pods"]}
    jobs = {f"{j['namespace']}/{j['name']}": j for j in report["jobs"]}
    exp = sc.expect
    if "bound" in exp:
        got = {k: p["node"] for k, p in pods.items() if p["phase"] in ("Bound", "Running")}
        if sc.multi_step:
            got = {k: v for k, v in got.items() if k in exp["bound"]}
        else:  # the core's decisions bind no pod the workload placed itself (spec.nodeName)
            got = {k: v for k, v in got.items() if k not in _placed(sc)}
        _same("bound", got, exp["bound"])
    if "pipelined" in exp:
        got = {k: p["node"] for k, p in pods.items() if p["phase"] == "Pipelined"}
        _same("pipelined", got, exp["pipelined"])
    if "evicted" in exp:
        got_ev = sorted(f"{e['namespace']}/{e['name']}" for e in report["evictions"])
        _same("evicted", got_ev, sorted(exp["evicted"]))
    if "phases" in exp:
        got_ph = {k: jobs[k]["phase"] if k in jobs else None for k in exp["phases"]}
        _same("phases", got_ph, exp["phases"])
    for job, text in (exp.get("warnings") or {}).items():  # the report's job warnings
        said = " | ".join((jobs.get(job) or {}).get("warnings") or ())
        assert text in said, f"warnings of {job}: {said!r} lack {text!r}"
    if "pods" in exp:
        _same(
            "pods", {k: pods[k]["phase"] if k in pods else None for k in exp["pods"]}, exp["pods"]
        )
    if "jobs" in exp:
        _same(
            "jobs", {k: jobs[k]["phase"] if k in jobs else None for k in exp["jobs"]}, exp["jobs"]
        )
    if "devices" in exp:
        got_dev = {
            k: [_dev(x["uuid"], x["template"], x["memory"], x["cores"]) for x in pods[k]["devices"]]
            if k in pods and pods[k]["phase"] in ("Bound", "Running", "Pipelined") else None
            for k in exp["devices"]
        }  # fmt: skip
        _same("devices", got_dev, exp["devices"])
    if "cards" in exp:
        keys = ("memory_used", "cores_used", "slices_used")
        cards = {c["uuid"]: {k: c[k] for k in keys} for c in report["cards"]}
        _same("cards", {k: cards.get(k) for k in exp["cards"]}, exp["cards"])
    if "reasons" in exp:
        for job, text in exp["reasons"].items():
            got_r = jobs[job]["reason"] if job in jobs else ""
            assert text in got_r, f"reason of {job}: {got_r!r} lacks {text!r}"
    for c in report["cards"]:
        assert c["memory_used"] <= c["memory_total"], c
        assert c["slices_used"] <= c["slices_total"], c


def unschedulable_of(sc: Scenario, job: str) -> Unschedulable:
    """One job's `JobUnschedulable` after the scenario's session (explain's words, per table)."""
    got = {f"{u.namespace}/{u.name}": u for u in run_core(sc).decisions.unschedulable}
    return got[job]
