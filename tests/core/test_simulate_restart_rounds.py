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


def test_pods_failing_together_spend_one_retry(tmp_path: Path) -> None:
    workload, log = tmp_path / "t5.yaml", tmp_path / "log.jsonl"
    workload.write_text(T5)
    assert main(["simulate", "--inventory", str(ROOT / "examples" / "inventory.yaml"), "--workload", str(workload),
                 "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    events = [msgspec.json.decode(m.data) for m in read_jsonl(log)]
    phases = [(e["phase"], e.get("reason", "")) for e in events if e.get("type") == "JobPhaseChanged"]
    assert [r for p, r in phases if p == "Restarting"] == [f"RestartPod: retry {i}/5" for i in range(1, 5)]
    assert phases[-1] == ("Failed", "RestartPod on PodFailed")
    failures = [e for e in events if e.get("type") == "TaskFinished" and e["exit_code"] == 1 and not e.get("reason")]
    assert sorted({e["at"] for e in failures}) == [4.0, 8.0, 12.0, 16.0, 20.0]  # 5 runs of task a
