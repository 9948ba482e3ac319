"""Scenario tables (STYLE §12): YAML fixtures of cluster + workload + conf → expected outcome.

One helper runs a scenario through the pure core (admission → events → projection → `decide`),
the CLI test runs the very same fixture through `tessera simulate --cycles 1`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from services.core.devices import build_vendors
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Decisions
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"


@dataclass(frozen=True)
class Scenario:
    table: str
    name: str
    conf: str
    inventory: dict[str, Any]
    workload: str
    expect: dict[str, Any]


@cache
def vendors():  # type: ignore[no-untyped-def]
    return build_vendors()


def load_table(table: str) -> list[Scenario]:
    doc = yaml.safe_load((FIXTURES / f"{table}.yaml").read_text())
    out = []
    for name, sc in doc["scenarios"].items():
        workload = sc["workload"]
        for k, v in (sc.get("replace") or {}).items():
            workload = workload.replace(k, str(v))
        out.append(
            Scenario(
                table,
                name,
                sc.get("conf", doc.get("conf")),
                sc["inventory"],
                workload,
                sc["expect"],
            )
        )
    return out


def run_core(sc: Scenario) -> Decisions:
    """One session through the pure core over the snapshot the simulator's log builds."""
    reg = vendors()
    conf = parse_conf(sc.conf)
    workload = admit(load_documents(sc.workload), hami_parser(reg), reg.resource_names())
    assert not workload.rejections, [r.message() for r in workload.rejections]
    sim = load_simulation(
        conf, reg, load_inventory(sc.inventory, reg.catalogue), workload, cycles=0
    )
    sim.run()  # submits the workload (and pre-existing placements) without running a session
    return decide(sim.projection.snapshot(), conf)


def bound_of(d: Decisions) -> dict[str, str]:
    return {
        f"{jp.namespace}/{p.task}": p.node
        for jp in d.placements
        if not jp.pipelined
        for p in jp.placements
    }


def evicted_of(d: Decisions) -> list[str]:
    return sorted(f"{e.namespace}/{e.task}" for e in d.evictions)
