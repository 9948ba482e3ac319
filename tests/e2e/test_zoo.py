"""The workload zoo through the running services (issue 27): NATS + the five service processes
on a simulated cluster of a template 910B3 node, a hami-core 910B3 node and an A100 node; the
zoo of `tests/zoo.py` (a cpu-only pod, a cpu-only gang, a Volcano Job with a cpu-only `ps` and
card `worker`s, an init container with a card, a whole card, a template slice, a soft slice, an
NVIDIA vGPU, a pod too big for any node) applied as `tessera apply` applies it.

Every pod ends where kube-scheduler + Volcano + HAMi would put it — phase, node where it
matters, the card slice it holds — and the one that cannot fit waits with a reason naming the
resource. The log stays small: at most a fixed number of events per pod on each job's subject,
and no proposal answered "already placed as proposed" (the loop a cpu-only pod set off, issue
27). Once everything settled a later pod is applied and run, a moment at which the waiting pod's
subject must not have grown past its bound either.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.processes import wait_until
from tests.zoo import (
    EXPECTED,
    INVENTORY,
    LATER,
    LATER_EXPECTED,
    LATER_POD,
    UNFITTABLE,
    Held,
    LogFacts,
    Outcome,
    apply,
    bound,
    log_facts,
    log_problems,
    manifest_text,
    manifests,
    outcome_problems,
)

SETTLE = 90.0  # settles in seconds (more under CI load); a cpu-only pod that never runs fails here
LATER_SETTLE = 60.0  # one more pod on an idle cluster


@pytest.fixture
def zoo_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(INVENTORY, sort_keys=False))
    cp = ControlPlane(tmp_path / "state", inventory=str(inventory))
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


def held(pod: dict) -> list[Held]:
    return [Held(kind=d["kind"], memory=d["memory"], cores=d["cores"], template=d.get("template"),
                 vendor="nvidia" if str(d.get("type", "")).startswith("NVIDIA") else "huawei")
            for d in pod["devices"]]  # fmt: skip


def problems_of(report: dict, expected: dict[str, Outcome]) -> list[str]:
    pods = {p["name"]: p for p in report["pods"] if p["namespace"] == "default"}
    out = []
    for name, want in expected.items():
        p = pods.get(name)
        if p is None:
            out.append(f"{name}: not in the report")
            continue
        out += outcome_problems(name, want, p["phase"], p["node"], held(p), p["reason"] or "")
    return out


async def facts_of(url: str) -> LogFacts:
    log = await JetStreamLog.connect(url)
    try:
        return log_facts([m async for m in log.replay()])
    finally:
        await log.close()


async def test_zoo_ends_where_kube_scheduler_volcano_and_hami_put_it(
    zoo_plane: ControlPlane,
) -> None:
    url = zoo_plane.url
    reply = await apply(url, manifest_text(manifests()))
    assert not reply.error and {r.outcome for r in reply.results} == {"accepted"}, reply
    ended: list[str] = []

    async def settled() -> bool:
        nonlocal ended
        ended = problems_of(await fetch_report(url, "tessera"), EXPECTED)
        return not ended

    try:
        await wait_until(settled, SETTLE, "every zoo pod where it belongs")
    except TimeoutError:
        pass  # `ended` says which pods are not; the log says why, below
    facts = await facts_of(url)
    problems = ended + log_problems(facts)
    assert not problems, "\n".join(problems)

    # later, with nothing else to do: one more pod is applied and runs; the waiting pod's
    # subject must not have grown past its bound meanwhile (its reason is written on change)
    before = facts.count(UNFITTABLE)
    reply = await apply(url, manifest_text([LATER]))
    assert {r.outcome for r in reply.results} == {"accepted"}, reply
    later: list[str] = []

    async def later_runs() -> bool:
        nonlocal later
        later = problems_of(
            await fetch_report(url, "tessera"), {**EXPECTED, LATER_POD: LATER_EXPECTED}
        )
        return not later

    try:
        await wait_until(later_runs, LATER_SETTLE, "the later pod Running, the zoo where it was")
    except TimeoutError:
        raise AssertionError("\n".join(later)) from None
    after = await facts_of(url)
    problems = log_problems(after)
    assert not problems, "\n".join(problems)
    assert after.count(UNFITTABLE) <= bound(UNFITTABLE), (before, after.per_job[UNFITTABLE])
