"""`tessera simulate` end to end: scenario tables through the CLI, replay determinism, input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from services.cli.main import main
from tests.core.scheduling.scenarios import Scenario, check_report, load_tables
from tests.core.scheduling.test_scenarios import TABLES

CASES = load_tables(*TABLES)
MIXED_INVENTORY = {"nodes": [{"name": "npu", "count": 2, "cpu": 64, "memory": "256Gi",
                              "devices": [{"type": "Ascend910B3", "count": 8}]}]}  # fmt: skip
MIXED_WORKLOAD = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 2
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: c
          image: busybox
          resources: {limits: {cpu: 8, memory: 32Gi, huawei.com/Ascend910B3: "4"}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: too-big}
spec:
  minAvailable: 3
  tasks:
  - name: worker
    replicas: 3
    template:
      spec:
        containers:
        - name: c
          image: busybox
          resources: {limits: {cpu: 8, memory: 32Gi, huawei.com/Ascend910B3: "8"}}
"""


def _write(tmp: Path, sc_inventory: object, workload: str, conf: str | None) -> list[str]:
    (tmp / "inv.yaml").write_text(yaml.safe_dump(sc_inventory))
    (tmp / "w.yaml").write_text(workload)
    args = ["simulate", "--inventory", str(tmp / "inv.yaml"), "--workload", str(tmp / "w.yaml")]
    if conf:
        (tmp / "conf.yaml").write_text(conf)
        args += ["--scheduler-conf", str(tmp / "conf.yaml")]
    return args


@pytest.mark.parametrize("sc", CASES, ids=[f"{c.table}-{c.name}" for c in CASES])
def test_scenario_through_cli(sc: Scenario, tmp_path: Path) -> None:
    """Single-session tables run with `--cycles 1`; the e2e table runs to the end."""
    args = _write(tmp_path, sc.inventory, sc.workload, sc.conf)
    if not sc.multi_step:
        args += ["--cycles", "1"]
    elif sc.until is not None:
        args += ["--until", str(sc.until)]
    assert main([*args, "--report", str(tmp_path / "r.json")]) == 0
    check_report(sc, json.loads((tmp_path / "r.json").read_text()))


def test_gang_whole_cards_and_replay_is_identical(tmp_path: Path) -> None:
    args = _write(tmp_path, MIXED_INVENTORY, MIXED_WORKLOAD, None)
    out, ev = tmp_path / "r.json", tmp_path / "e.jsonl"
    assert main([*args, "--report", str(out), "--events", str(ev)]) == 0
    report = json.loads(out.read_text())
    pods = {p["name"]: p for p in report["pods"]}
    # the 4-card gang is bound whole; the 3×8-card gang never partially
    assert {pods[f"train-worker-{i}"]["phase"] for i in range(2)} == {"Running"}
    assert {pods[f"too-big-worker-{i}"]["phase"] for i in range(3)} == {"Pending"}
    for c in report["cards"]:
        assert c["memory_used"] <= c["memory_total"] and c["slices_used"] <= c["slices_total"]
    assert main(["simulate", "--replay", str(ev), "--report", str(tmp_path / "r2.json")]) == 0
    assert (tmp_path / "r2.json").read_text() == out.read_text()


def test_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--inventory", str(tmp_path / "missing.yaml"), "--workload", "x"])
    assert code == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and len(err.strip().splitlines()) == 1


def test_unknown_field_is_rejected_with_its_path(tmp_path: Path) -> None:
    workload = MIXED_WORKLOAD.replace(
        "resources: {limits", "resoures: {}\n          resources: {limits", 1
    )
    args = _write(tmp_path, MIXED_INVENTORY, workload, None)
    assert main([*args, "--report", str(tmp_path / "r.json")]) == 0
    jobs = {j["name"]: j for j in json.loads((tmp_path / "r.json").read_text())["jobs"]}
    assert jobs["train"]["phase"] == "Rejected"
    assert (
        "spec.tasks[0].template.spec.containers[0].resoures: unknown field"
        in jobs["train"]["reason"]
    )


def test_a_refused_queue_and_job_are_said_in_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The article's Queue as written (a `policy` field Volcano's Queue does not have) and its
    Job naming it: nothing of it became a pod, and the summary printed an empty table, exit 0."""
    workload = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: test}
spec: {weight: 1, policy: binpack}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  queue: test
  minAvailable: 1
  tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""
    assert main(_write(tmp_path, SLA_INVENTORY, workload, None)) == 0
    out = capsys.readouterr().out
    assert "queue test rejected: Queue: spec.policy: unknown field" in out, out
    assert ('Job default/j rejected: Job: spec.queue: queue does not exist (unable to find job queue: '
            'queues.scheduling.volcano.sh "test" not found) (value: test)') in out, out


def test_a_refused_job_is_said_with_every_rule_it_broke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rev-examples F9: Volcano's job-policy guide, example 3, writes `events: PodFailed` and
    `events: PodEvicted` as strings; `apply` named both, `simulate` only the last (one
    JobRejected per rule, the report keeping the last). The README promises every broken rule."""
    workload = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: tf}
spec:
  minAvailable: 1
  tasks:
  - name: ps
    replicas: 1
    policies:
    - {events: PodFailed, action: RestartPod}
    - {events: PodEvicted, action: RestartJob, timeout: 10m}
    template: {spec: {containers: [{name: c, image: busybox}]}}
"""
    assert main([*_write(tmp_path, SLA_INVENTORY, workload, None), "--report", str(tmp_path / "r.json")]) == 0
    (job,) = json.loads((tmp_path / "r.json").read_text())["jobs"]
    assert job["phase"] == "Rejected"
    assert job["reason"] == ("Job: spec.tasks[0].policies[0].events: must be a list, not a string (value: "
                             "PodFailed); Job: spec.tasks[0].policies[1].events: must be a list, not a string "
                             "(value: PodEvicted)")  # fmt: skip
    assert f"Job default/tf rejected: {job['reason']}" in capsys.readouterr().out


SLA_INVENTORY = {"nodes": [{"name": "cpu", "count": 1, "cpu": 64, "memory": "256Gi"}]}
SLA_CONF = """actions: "enqueue, allocate"
tiers:
- plugins:
  - {name: sla, arguments: {sla-waiting-time: 60s}}
- plugins:
  - {name: proportion}
  - {name: predicates}
"""
SLA_WORKLOAD = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: big, namespace: default}
spec: {minMember: 1, minResources: {cpu: "100", memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: big-0, namespace: default, annotations: {scheduling.k8s.io/group-name: big}}
spec:
  schedulerName: volcano
  containers:
  - {name: c, image: busybox, resources: {limits: {cpu: 1, memory: 1Gi}}}
"""


def test_the_virtual_clock_stops_where_a_waiting_time_runs_out(tmp_path: Path) -> None:
    """proportion keeps a group asking more than the cluster Pending; sla lets it in 60 s after
    it arrived. Nothing else happens in this simulation, and its clock moved only to arrivals
    and ends: the pod was left Pending for good. It stops at the session's `revisit_at` too."""
    args = _write(tmp_path, SLA_INVENTORY, SLA_WORKLOAD, SLA_CONF)
    out, ev = tmp_path / "r.json", tmp_path / "e.jsonl"
    assert main([*args, "--report", str(out), "--events", str(ev)]) == 0
    assert [(p["name"], p["phase"]) for p in json.loads(out.read_text())["pods"]] == [("big-0", "Running")]
    events = [json.loads(line)["data"] for line in ev.read_text().splitlines()]
    assert [e["at"] for e in events if e["type"] == "TaskStarted"] == [60.0]
    assert main(["simulate", "--replay", str(ev), "--report", str(tmp_path / "r2.json")]) == 0
    assert (tmp_path / "r2.json").read_text() == out.read_text()


SPACED_WORKLOAD = "".join(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: p{i}
  annotations: {{tessera.io/arrive-at: "{100 * i}", tessera.io/duration: "10"}}
spec:
  schedulerName: volcano
  containers:
  - {{name: c, image: busybox, resources: {{limits: {{cpu: 1, memory: 1Gi}}}}}}
""" for i in range(3))


def test_no_session_runs_while_nothing_waits(tmp_path: Path) -> None:
    """Pods arriving one at a time, each ending long before the next: the live scheduler opens
    a session only when something waits; simulate opened one after every placement and at every
    end as well (2.9 sessions per pod on the openb trace at its own times, ~65 % over a cluster
    where nothing waited), each walking every node. The outcome is the same either way."""
    args = _write(tmp_path, SLA_INVENTORY, SPACED_WORKLOAD, None)
    out, ev = tmp_path / "r.json", tmp_path / "e.jsonl"
    assert main([*args, "--report", str(out), "--events", str(ev)]) == 0
    report = json.loads(out.read_text())
    assert [(p["name"], p["phase"]) for p in report["pods"]] == [(f"p{i}", "Succeeded") for i in range(3)]
    lines = [json.loads(line) for line in ev.read_text().splitlines()]
    sessions = {(e["headers"]["Tessera-Session"], e["headers"]["Tessera-Time"])
                for e in lines if "Tessera-Session" in e["headers"]}  # fmt: skip
    assert sorted(sessions) == [("1", "0.0"), ("2", "100.0"), ("3", "200.0")]
    assert report["metrics"]["cycles"] == 3
