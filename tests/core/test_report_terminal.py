"""The report's pod phase: a pod in a terminal phase keeps it whatever ends it again."""

from __future__ import annotations

from contracts.events import (
    JobSubmitted,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.core.simulate.report import build_report
from services.runtime.eventlog import MemoryLog
from tests.allocator.scenario import put


async def test_a_succeeded_pod_stays_succeeded_after_a_late_node_lost() -> None:
    """`tessera up` after nats-server was frozen a minute: `get pods` showed 34 of 45 pods
    Failed "exit code -1" though they had exited 0 — the node monitor's late "node lost" over
    their real end. Succeeded stays Succeeded (k8s: a terminal phase is final)."""
    log = MemoryLog()
    subject = log.subjects.job("ns", "c")
    spec = JobSpec(namespace="ns", name="c", queue="default", tasks=(TaskSpec(name="w", replicas=1),))
    for event in (JobSubmitted(spec=spec),
                  PlacementCommitted(namespace="ns", name="c", placements=(TaskPlacement(task="c-w-0", node="a"),)),
                  TaskStarted(namespace="ns", name="c", task="c-w-0", node="a"),
                  TaskFinished(namespace="ns", name="c", task="c-w-0", node="a", exit_code=0),
                  TaskFinished(namespace="ns", name="c", task="c-w-0", node="a", exit_code=-1,
                               reason="node lost")):  # fmt: skip
        await put(log, subject, event)
    pods = {p["name"]: p for p in build_report(log.messages())["pods"]}
    assert (pods["c-w-0"]["phase"], pods["c-w-0"]["reason"]) == ("Succeeded", "")
