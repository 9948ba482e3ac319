"""Preemption for a card pod through the five services as processes (NATS + admission, queue,
scheduler with preempt on, allocator, node agent): a low-priority pod runs on the only
Ascend910B3 card; a high-priority whole-card pod arrives, the scheduler evicts the holder, the
node agent stops it, the allocator releases its slice and then commits the preemptor on that very
card. The whole log audits clean (`services.core.audit`: no card over committed at any
sequence, nothing doubled, ledgers = running pods)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from contracts.events import EvictionRequested, PlacementCommitted, SliceReleased, SliceReserved
from contracts.owners import owner_key
from contracts.registry import default_registry
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.core.audit import audit
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.core.scheduling.test_preempt_devices import CONF  # preempt and reclaim, deviceshare on
from tests.e2e.test_system import apply
from tests.processes import wait_until

CARD = "n1-Ascend910B3-0"
HOLDER = """
{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high-priority}, value: 100000}
---
{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low-priority}, value: 10}
---
{apiVersion: v1, kind: Pod, metadata: {name: holder, namespace: default}, spec: {priorityClassName: low-priority, containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: '1'}}}]}}
"""
URGENT = """
{apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup, metadata: {name: urgent, namespace: default}, spec: {minMember: 1, priorityClassName: high-priority}}
---
{apiVersion: v1, kind: Pod, metadata: {name: preemptor, namespace: default, annotations: {scheduling.k8s.io/group-name: urgent}}, spec: {priorityClassName: high-priority, containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: '1'}}}]}}
"""


@pytest.fixture
def one_card_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"nodes": [
        {"name": "n1", "cpu": 16, "memory": "64Gi", "devices": [{"type": "Ascend910B3", "count": 1}]},
    ]}))  # fmt: skip
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    cp = ControlPlane(tmp_path / "state", inventory=str(inventory), scheduler_conf=str(conf))
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


def _pods(report: dict) -> dict[str, dict]:
    return {p["name"]: p for p in report["pods"] if p["namespace"] == "default"}


async def test_a_card_pod_preempts_the_holder_of_the_only_card(one_card_plane: ControlPlane) -> None:
    url = one_card_plane.url
    reply = await apply(url, HOLDER)
    assert {r.outcome for r in reply.results} == {"accepted"}, [r.reasons for r in reply.results]
    report: dict = {}

    async def phase_is(pod: str, phase: str) -> bool:
        nonlocal report
        report = await fetch_report(url, "tessera")
        return _pods(report).get(pod, {}).get("phase") == phase

    await wait_until(lambda: phase_is("holder", "Running"), timeout=60, what="the holder to run")
    reply = await apply(url, URGENT)
    assert {r.outcome for r in reply.results} == {"accepted"}, [r.reasons for r in reply.results]
    await wait_until(lambda: phase_is("preemptor", "Running"), timeout=60, what="the preemptor to run")
    pods = _pods(report)
    # the node agent stops it as evicted: recreated, it waits (lower priority) rather than runs
    assert pods["holder"]["phase"] in ("Evicted", "Pending"), pods["holder"]
    assert [d["uuid"] for d in pods["preemptor"]["devices"]] == [CARD]

    registry = default_registry()
    log = await JetStreamLog.connect(url)
    events: list = []

    async def settled() -> bool:
        nonlocal events, report
        events = [(m.seq, registry.decode(m.headers["Tessera-Type"], m.data))
                  async for m in log.replay()]  # fmt: skip
        report = await fetch_report(url, "tessera")
        findings = audit(events, report["pods"])
        assert not findings.broken, findings.broken
        return not findings.unsettled

    try:
        await wait_until(settled, timeout=60, what="the log to settle (ledgers = running pods)")
    finally:
        await log.close()
    holder, preemptor = owner_key("default", "holder", "holder"), owner_key("default", "urgent", "preemptor")
    steps = [(type(e).__name__, e.owner) for _, e in events
             if isinstance(e, SliceReserved | SliceReleased) and e.card == CARD]  # fmt: skip
    assert steps == [("SliceReserved", holder), ("SliceReleased", holder), ("SliceReserved", preemptor)]
    evicted = [e.task for _, e in events if isinstance(e, EvictionRequested)]
    assert set(evicted) == {"holder"}, evicted
    commits = [e for _, e in events if isinstance(e, PlacementCommitted) and e.name == "urgent"]
    assert len(commits) == 1 and [s.card for s in commits[0].placements[0].slices] == [CARD]
