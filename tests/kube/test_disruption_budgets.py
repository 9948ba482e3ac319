"""PodDisruptionBudgets on a cluster: admission mirrors them onto the log (their selector,
`status.disruptionsAllowed` as the disruption controller writes it) and the `pdb` plugin keeps
preemption within them. Two low-priority `web` pods fill the only node; a PDB allows none of
them to go; a high-priority pod waits — until the budget allows one, and then exactly one goes.
The harness has no disruption controller: the test writes the PDB's status as it would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from contracts.envelope import TYPE
from contracts.events import (
    DisruptionBudgetChanged,
    DisruptionBudgetDeleted,
    EvictionRequested,
    JobUnschedulable,
)
from contracts.registry import default_registry
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube.client import PRIORITY_CLASSES, pdbs_path
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.core.scheduling.scenarios import PREEMPT_CONF
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod
from tests.processes import wait_until

#: no `enqueue`: on a full cluster proportion's enqueue would keep the urgent pod Pending, where
#: preempt never looks (Volcano's too); without it allocate admits it
CONF = PREEMPT_CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: pdb\n").replace(
    '"enqueue, allocate, preempt, reclaim, backfill"', '"allocate, preempt, backfill"')


def cpu_pod(name: str, priority_class: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
                   "spec": {"priorityClassName": priority_class, "containers": [{"name": "c", "resources": {
                       "requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}})  # fmt: skip


def budget(allowed: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2 - allowed,
                       "expectedPods": 2, "observedGeneration": 1}}  # fmt: skip


async def logged(cp: ControlPlane) -> list[tuple[int, Any]]:
    log, registry = await JetStreamLog.connect(cp.url), default_registry()
    try:
        return [(m.seq, registry.decode(m.headers[TYPE], m.data)) async for m in log.replay()
                if m.headers.get(TYPE) in registry]  # fmt: skip
    finally:
        await log.close()


async def test_preemption_waits_for_the_budget_and_takes_no_more_than_it_allows(cluster: Cluster, tmp_path: Path) -> None:
    for name, value in (("low", 10), ("high", 100000)):
        await cluster.kube.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                     "metadata": {"name": name}, "value": value})  # fmt: skip
    await cluster.create_node("n1", cpu="4", memory="16Gi")
    made = await cluster.kube.create(pdbs_path("default"), budget(0))
    await cluster.kube.patch(pdbs_path("default", "web") + "/status", {"status": budget(0)["status"]})
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig), scheduler_conf=str(conf))
    async with Kubelet(cluster):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            for i in range(2):
                await cluster.create_pod(cpu_pod(f"web-{i}", "low", {"app": "web"}))

            async def webs_run() -> bool:
                return sum(kpods.phase(p) == "Running" for p in await cluster.pods()) == 2

            await wait_until(webs_run, 60, "both web pods Running")
            await cluster.create_pod(cpu_pod("urgent", "high"))

            async def refused_once() -> bool:  # a session decided on it: allocate, then preempt
                return any(isinstance(e, JobUnschedulable) and e.name == "urgent" for _, e in await logged(cp))

            await wait_until(refused_once, 60, "a session leaving urgent waiting")
            await cluster.kube.patch(pdbs_path("default", "web") + "/status", {"status": budget(1)["status"]})

            async def urgent_runs() -> bool:
                pod = await cluster.pod("default", "urgent")
                return pod is not None and kpods.phase(pod) == "Running"

            await wait_until(urgent_runs, 90, "urgent Running once the budget allows one disruption")
            events = await logged(cp)
        finally:
            await asyncio.to_thread(cp.stop)
    budgets = [(seq, e.allowed) for seq, e in events if isinstance(e, DisruptionBudgetChanged)]
    assert [a for _, a in budgets] == [0, 1], budgets
    evictions = [(seq, e.name) for seq, e in events if isinstance(e, EvictionRequested)]
    assert len(evictions) == 1 and evictions[0][1] in ("web-0", "web-1"), evictions
    assert evictions[0][0] > budgets[1][0], "a pod was evicted while the budget allowed none"
    assert made["metadata"]["name"] == "web" and not [e for _, e in events if isinstance(e, DisruptionBudgetDeleted)]


async def test_a_budget_deleted_while_admission_was_away_is_deleted_in_the_log(
    cluster: Cluster, event_log: Any
) -> None:
    """Nothing but this source writes the budgets' subjects, so one the log holds that the
    first list after a restart lacks was deleted meanwhile (a budget left in the log would
    protect its pods for good); one whose status changed meanwhile is written again."""
    from services.kube.budgetsource import BudgetSource

    async def run_until(source: BudgetSource, done: Any) -> None:
        await source.recover()
        stopping = asyncio.Event()
        task = asyncio.create_task(source.run(stopping))
        try:
            await wait_until(done, 30, "the source caught up")
        finally:
            stopping.set()
            await task

    async def last() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in await event_log.last_per_subject(event_log.subjects.all_budgets()):
            e = default_registry().decode(m.headers[TYPE], m.data)
            out[e.name] = e
        return out

    for name in ("kept", "gone"):
        await cluster.kube.create(pdbs_path("default"), {**budget(1), "metadata": {"name": name, "namespace": "default"}})
        await cluster.kube.patch(pdbs_path("default", name) + "/status", {"status": budget(1)["status"]})
    first = BudgetSource(event_log, cluster.kube)

    async def both() -> bool:
        return {n: getattr(e, "allowed", None) for n, e in (await last()).items()} == {"kept": 1, "gone": 1}

    await run_until(first, both)
    await cluster.kube.delete(pdbs_path("default", "gone"))
    await cluster.kube.patch(pdbs_path("default", "kept") + "/status", {"status": {"disruptionsAllowed": 0}})
    again = BudgetSource(event_log, cluster.kube)

    async def caught_up() -> bool:
        now = await last()
        return isinstance(now.get("gone"), DisruptionBudgetDeleted) and getattr(now.get("kept"), "allowed", None) == 0

    await run_until(again, caught_up)
