"""A restart round in `tessera simulate`: pods failing at one moment are one restart, as on a
cluster, where Volcano's Restarting state kills the second failed pod without counting a retry
(reviewer's t5: RestartPod, maxRetry 5, two pods failing together — Failed after 3 runs, not 5)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from services.cli.main import main
from services.core.simulate.jsonl import read_jsonl
from tests.processes import ROOT

T5 = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: t5}
spec:
  schedulerName: volcano
  maxRetry: 5
  policies:
  - {event: PodFailed, action: RestartPod}
  tasks:
  - name: a
    replicas: 2
    template:
      metadata: {annotations: {tessera.io/duration: "4", tessera.io/exit-code: "1"}}
      spec: {restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
  - name: b
    replicas: 1
    template:
      spec: {restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
"""


INVENTORY = "nodes:\n  - {name: n1, cpu: 4, memory: 64Gi}\n"

#: the reviewer's case: j's restart stops b-0, and k (higher priority, arrived at t=1) takes
#: its room; a-0 runs again alone (minAvailable 1) and fails every 4 s
ROOM_TAKEN = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  schedulerName: volcano
  minAvailable: 1
  maxRetry: 3
  policies: POLICIES
  tasks:
  - name: a
    replicas: 1
    template:
      metadata: {annotations: {tessera.io/duration: "4", tessera.io/exit-code: "1"}}
      spec: {restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}
  - name: b
    replicas: 1
    template:
      metadata: {annotations: {tessera.io/duration: "B_RUNS", tessera.io/exit-code: "3"}}
      spec: {restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: k, annotations: {tessera.io/arrive-at: "1"}}
spec:
  schedulerName: volcano
  minAvailable: 1
  priorityClassName: high
  tasks:
  - name: k
    replicas: 1
    template:
      metadata: {annotations: {tessera.io/duration: "200"}}
      spec: {restartPolicy: Never, priorityClassName: high, containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]}
"""


def simulate(tmp_path: Path, workload_text: str, inventory_text: str = INVENTORY) -> list[dict]:
    inventory, workload, log = tmp_path / "inv.yaml", tmp_path / "wl.yaml", tmp_path / "log.jsonl"
    inventory.write_text(inventory_text)
    workload.write_text(workload_text)
    assert main(["simulate", "--inventory", str(inventory), "--workload", str(workload), "--events", str(log),
                 "-o", "json"]) == 0  # fmt: skip
    return [msgspec.json.decode(m.data) for m in read_jsonl(log)]


def job_phases(events: list[dict], name: str) -> list[tuple[str, str]]:
    return [(e["phase"], e.get("reason", "")) for e in events
            if e.get("type") == "JobPhaseChanged" and e["name"] == name]  # fmt: skip


def test_a_pod_run_again_after_its_restart_fails_on_a_retry(tmp_path: Path) -> None:
    """a-0 runs again while b-0, stopped by the restart, waits for k's room: each of a-0's new
    failures is a retry — 3 runs, Failed at t=12. Before, a failure while b-0 waited was one
    more pod of the round: a-0 failed 53 times, every 4 s until k ended."""
    events = simulate(tmp_path, ROOM_TAKEN.replace("POLICIES", "[{event: PodFailed, action: RestartJob}]")
                      .replace("B_RUNS", "1000"))  # fmt: skip
    failures = [e["at"] for e in events if e.get("type") == "TaskFinished" and e["task"] == "j-a-0"
                and e["exit_code"] == 1 and not e.get("reason")]  # fmt: skip
    assert failures == [4.0, 8.0, 12.0]
    phases = job_phases(events, "j")
    assert [r for p, r in phases if p == "Restarting"] == ["RestartJob: retry 1/3", "RestartJob: retry 2/3"]
    assert phases[-1] == ("Failed", "RestartJob on PodFailed")


def test_a_failure_after_the_round_follows_its_own_policy(tmp_path: Path) -> None:
    """RestartPod for a-0; a-0 finds no room again (k took it), and b-0 — running all along —
    exits 3 at t=6, whose policy is AbortJob: the job aborts. Before, a failure while a-0
    waited was restarted with the round, whatever its exit code's policy said."""
    policies = "[{exitCode: 3, action: AbortJob}, {event: PodFailed, action: RestartPod}]"
    workload = ROOM_TAKEN.replace("POLICIES", policies).replace("B_RUNS", "6")
    workload = workload.replace('requests: {cpu: "1"}', 'requests: {cpu: "2"}', 1)  # a-0 needs k's room
    events = simulate(tmp_path, workload)
    phases = [p for p, _ in job_phases(events, "j")]
    assert "Aborted" in phases and phases[-1] == "Aborted"
    assert not [e for e in events if e.get("type") == "TaskFinished" and e["task"] == "j-b-0"
                and e.get("reason") == "restarted"]  # fmt: skip


def test_pods_failing_together_spend_one_retry(tmp_path: Path) -> None:
    events = simulate(tmp_path, T5, (ROOT / "examples" / "inventory.yaml").read_text())
    phases = job_phases(events, "t5")
    assert [r for p, r in phases if p == "Restarting"] == [f"RestartPod: retry {i}/5" for i in range(1, 5)]
    assert phases[-1] == ("Failed", "RestartPod on PodFailed")
    failures = [e for e in events if e.get("type") == "TaskFinished" and e["exit_code"] == 1 and not e.get("reason")]
    assert sorted({e["at"] for e in failures}) == [4.0, 8.0, 12.0, 16.0, 20.0]  # 5 runs of task a
