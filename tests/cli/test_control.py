"""The vcctl-like commands against a running `tessera up`: apply (exit 1 on rejection, reasons
printed), get pods/jobs/queues (simulate report records), queue close/open, job suspend/resume,
delete — each observable in the next `get`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_up_down import tessera
from tests.processes import ROOT

LATE_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: late
  annotations: {scheduling.volcano.sh/queue-name: team-a}
spec:
  containers:
    - name: c
      image: busybox
      resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "8192"}}
"""
SIMULATE_CARD_KEYS = {"node", "uuid", "type", "index", "memory_total", "memory_used", "cores_total",
                      "cores_used", "slices_used", "slices_total"}  # fmt: skip
SIMULATE_POD_KEYS = {"namespace", "name", "job", "phase", "node", "devices", "reason"}


@pytest.fixture
def system(tmp_path: Path) -> Iterator[Path]:
    inventory = str(ROOT / "examples" / "inventory.yaml")
    up = tessera("up", "--detach", "--state-dir", str(tmp_path), "--inventory", inventory)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield tmp_path
    finally:
        tessera("down", "--state-dir", str(tmp_path))


def run(state: Path, *args: str):  # type: ignore[no-untyped-def]
    return tessera(*args, "--state-dir", str(state))


def pods(state: Path) -> dict[str, dict]:
    out = run(state, "get", "pods", "-o", "records")
    assert out.returncode == 0, out.stderr
    return {p["name"]: p for p in json.loads(out.stdout)}


def wait_for(state: Path, name: str, phase: str, tries: int = 200) -> dict:
    """Poll `get pods` (the observable outcome) until `name` is in `phase`."""
    for _ in range(tries):
        got = pods(state).get(name)
        if got is not None and got["phase"] == phase:
            return got
    raise AssertionError(f"{name} never reached {phase}: {pods(state).get(name)}")


def test_apply_get_suspend_resume_close_delete(system: Path) -> None:
    inference = str(ROOT / "examples" / "inference.yaml")
    applied = run(system, "apply", "-f", inference)
    assert applied.returncode == 1  # bad-typo is rejected ...
    assert "pod/default/bad-typo rejected" in applied.stdout
    assert "huawei.com/Ascend910B3-memroy: unknown device resource" in applied.stdout  # its typo
    assert "pod/default/infer-0 accepted" in applied.stdout  # ... the rest is accepted
    again = run(system, "apply", "-f", inference)
    assert "pod/default/infer-0 unchanged" in again.stdout

    infer = wait_for(system, "infer-0", "Running")
    assert set(infer) == SIMULATE_POD_KEYS
    assert infer["devices"][0]["memory"] == 16384 and infer["devices"][0]["template"] == "vir05_1c_16g"
    jobs = json.loads(run(system, "get", "pg", "-o", "records").stdout)
    assert {j["name"] for j in jobs} >= {f"infer-{i}" for i in range(8)}
    cards = json.loads(run(system, "get", "cards", "-o", "records").stdout)
    assert set(cards[0]) == SIMULATE_CARD_KEYS and len(cards) == 16
    assert sum(c["memory_used"] for c in cards) >= 16384  # infer-0 runs: its slice is booked
    table = run(system, "get", "pods").stdout
    assert table.splitlines()[0].split()[:3] == ["NAME", "PHASE", "NODE"]  # kubectl: no NAMESPACE …
    every = run(system, "get", "pods", "-A").stdout
    assert every.splitlines()[0].split()[:3] == ["NAMESPACE", "NAME", "PHASE"]  # … but with -A
    assert every.splitlines()[1].split()[0] == "default"

    assert run(system, "job", "suspend", "infer-1").returncode == 0
    wait_for(system, "infer-1", "Evicted")
    assert run(system, "job", "suspend", "infer-1").returncode == 1  # not live any more
    assert run(system, "job", "resume", "infer-1").returncode == 0
    wait_for(system, "infer-1", "Running")

    assert run(system, "queue", "create", "team-a", "--weight", "2").returncode == 0
    again = run(system, "queue", "create", "team-a")  # kubectl create's answer, not a silent reset
    assert again.returncode == 1 and "AlreadyExists" in again.stdout
    assert run(system, "queue", "close", "team-a").returncode == 0
    queues = {q["name"]: q for q in json.loads(run(system, "get", "queues", "-o", "records").stdout)}
    assert queues["team-a"]["state"] == "Closed"
    closed = system / "to-closed.yaml"
    closed.write_text(LATE_POD)
    refused = run(system, "apply", "-f", str(closed))
    assert refused.returncode == 1 and "state `Open`" in refused.stdout
    assert run(system, "queue", "open", "team-a").returncode == 0
    assert run(system, "apply", "-f", str(closed)).returncode == 0

    assert run(system, "delete", "pod", "infer-2").returncode == 0
    for _ in range(200):  # poll `get pods` until the deleted pod is no longer listed
        if "infer-2" not in pods(system):
            break
    assert "infer-2" not in pods(system)
    assert run(system, "delete", "pod", "infer-2").returncode == 1  # already gone
    quiet = run(system, "delete", "pod", "infer-2", "--ignore-not-found")  # kubectl's flag
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", ""), quiet
    assert run(system, "delete", "pod", "nope").returncode == 1


def test_events_explain_a_pending_job_and_export_for_replay(system: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(TOO_BIG)
    assert run(system, "apply", "-f", str(big)).returncode == 0
    for _ in range(200):  # poll the job's history until the scheduler has said why it waits
        history = run(system, "events", "--job", "too-big")
        if "JobUnschedulable" in history.stdout:
            break
    assert "JobSubmitted" in history.stdout and "tasks=[w×3]" in history.stdout
    # the gang is larger than the cluster: its reason says so, not that its queue is full
    assert "whole Ascend910B3 cards, the cluster has" in history.stdout, history.stdout
    assert "queue resource quota insufficient" not in history.stdout
    out = tmp_path / "log.jsonl"
    assert run(system, "events", "--output-file", str(out)).returncode == 0
    report = tmp_path / "r.json"
    replay = tessera("simulate", "--replay", str(out), "--report", str(report))
    assert replay.returncode == 0, replay.stderr
    pods = {p["name"]: p for p in json.loads(report.read_text())["pods"]}
    assert pods["too-big-w-0"]["phase"] == "Pending"
    assert "the cluster has" in pods["too-big-w-0"]["reason"]  # the gang, not a quota, is why


TOO_BIG = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: too-big}
spec:
  minAvailable: 3
  tasks:
    - name: w
      replicas: 3
      template:
        spec:
          containers:
            - name: c
              image: busybox
              resources: {limits: {huawei.com/Ascend910B3: "8"}}
"""
