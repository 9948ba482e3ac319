"""The CLI people expect (issue 13, items 13–14): kubectl/vcctl names and verbs against one
running `tessera up`, and the command-line hygiene checks that need no system (help on every
flag, a closed pipe, simulate's summary)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.main import build_parser
from tests.cli.test_up_down import running, tessera
from tests.processes import ROOT

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-x}
spec: {weight: 2, capability: {cpu: "64"}}
"""
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  annotations: {scheduling.volcano.sh/queue-name: team-x}
spec:
  containers:
    - name: c
      image: busybox
      resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "8192"}}
"""


# The tests on the module's `up` go to one xdist worker, so it starts once (unmarked, `--dist
# loadgroup` dealt them to both workers and each started its own); the rest need no system.
SHARED = pytest.mark.xdist_group("kubectl_habits")


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with running(tmp_path_factory.mktemp("habits")) as state:
        yield state


def run(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tessera(*args, "--state-dir", str(state))


def wait_pod(state: Path, name: str, phase: str | None, tries: int = 200) -> None:
    """Poll `get pod NAME` until it is in `phase` (None: until it is gone)."""
    for _ in range(tries):
        got = run(state, "get", "po", name, "-o", "records")
        if phase is None and got.returncode == 1:
            return
        if phase is not None and got.returncode == 0 and json.loads(got.stdout)[0]["phase"] == phase:
            return
    raise AssertionError(f"{name} never became {phase}: {got.stdout} {got.stderr}")


@SHARED
def test_kubectl_and_vcctl_verbs(system: Path, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "1-queue.yaml").write_text(QUEUE)
    (manifests / "2-pod.yml").write_text(POD)
    (manifests / "notes.txt").write_text("not a manifest")
    applied = run(system, "apply", "-f", str(manifests))  # a directory: every YAML in it
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "queue/team-x accepted" in applied.stdout and "pod/default/trainer accepted" in applied.stdout
    wait_pod(system, "trainer", "Running")

    one = run(system, "get", "pod", "trainer", "-o", "records")
    assert [p["name"] for p in json.loads(one.stdout)] == ["trainer"]
    missing = run(system, "get", "pods", "nope")
    assert missing.returncode == 1 and 'pods "nope" not found' in missing.stderr
    for alias in ("vcjob", "job", "jobs"):  # a plain pod's job is no Volcano Job
        listed = run(system, "get", alias)
        assert listed.returncode == 0 and "trainer" not in listed.stdout
    assert "team-x" in run(system, "get", "q").stdout
    pg = run(system, "get", "pg", "-o", "wide")
    assert pg.stdout.splitlines()[0].split()[:6] == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]
    assert "trainer" in pg.stdout  # the OWNER of its implied group

    nodes = {n["node"]: n for n in json.loads(run(system, "get", "nodes", "-o", "records").stdout)}
    assert nodes["node-a"]["cpu"] == "192" and nodes["node-a"]["memory"] == "1536Gi"
    assert nodes["node-a"]["cards"] == "8×Ascend910B3"
    assert sum(int(n["cards_in_use"].split("/")[0]) for n in nodes.values()) == 1  # trainer's slice

    pod = run(system, "describe", "po", "trainer")
    assert pod.returncode == 0, pod.stderr
    assert "Name:" in pod.stdout and "Status:" in pod.stdout and "Running" in pod.stdout
    assert "Events:" in pod.stdout and "JobSubmitted" in pod.stdout and "PlacementCommitted" in pod.stdout
    job = run(system, "describe", "pg", "trainer")  # a plain pod's implied group, by its pod's name
    assert "Pods:" in job.stdout and "TaskStarted" in job.stdout
    assert run(system, "describe", "pod", "nope").returncode == 1

    updated = run(system, "queue", "update", "team-x", "--weight", "5", "--capability", "cpu=32")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "queue/team-x configured" in updated.stdout
    assert "capability is now cpu=32 (--capability replaces the whole capability)" in updated.stdout
    queue = run(system, "describe", "queue", "team-x")
    assert "Weight:" in queue.stdout and " 5" in queue.stdout.split("Weight:")[1].splitlines()[0]
    assert "cpu=32" in queue.stdout.split("Capability:")[1].splitlines()[0] and "QueueUpdated" in queue.stdout
    assert "trainer" in queue.stdout.split("Jobs:")[1]
    assert run(system, "queue", "update", "nope", "--weight", "2").returncode == 1

    refused = run(system, "queue", "delete", "team-x")
    assert refused.returncode == 1 and "it has 1 job(s) (default/trainer)" in refused.stderr
    assert run(system, "queue", "delete", "default").returncode == 1
    deleted = run(system, "delete", "pod", "trainer")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "pod default/trainer deleted"
    wait_pod(system, "trainer", None)
    for _ in range(200):  # poll until the queue service folded the job's deletion
        gone = run(system, "queue", "delete", "team-x")
        if gone.returncode == 0:
            break
    assert gone.stdout.strip() == "queue team-x deleted", gone.stderr
    assert run(system, "get", "queue", "team-x").returncode == 1


VCJOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: jc}
spec:
  minAvailable: 1
  schedulerName: volcano
  tasks:
    - name: w
      replicas: 1
      template:
        spec:
          containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


@SHARED
def test_apply_judges_each_file_and_object_on_its_own(system: Path, tmp_path: Path) -> None:
    """A file that is no YAML is named with its line and cause, a wrong shape names its file and
    field; the other files' objects are applied all the same (rev-newcomer findings 2, 3)."""
    good = tmp_path / "25-good.yaml"
    good.write_text(POD.replace("name: trainer", "name: shapes-good").replace(
        "scheduling.volcano.sh/queue-name: team-x", "tessera.io/duration: '1'"))  # fmt: skip
    tab = tmp_path / "16-tab.yaml"
    tab.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n\tname: tabbed\nspec: {}\n")
    dash = tmp_path / "20-dash.yaml"
    dash.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: dash}\nspec:\n  containers:\n    name: c\n")
    applied = run(system, "apply", "-f", str(good), "-f", str(tab), "-f", str(dash))
    assert applied.returncode == 1
    assert f"error: error parsing {tab}: line 4, column 1: found character that cannot start any token" in applied.stderr
    assert "pod/default/shapes-good accepted" in applied.stdout
    assert f"pod/default/dash rejected (from {dash})" in applied.stdout
    assert "spec.containers: must be a list, not a map" in applied.stdout


@SHARED
def test_a_finished_pod_applied_again_is_unchanged_and_stays_finished(system: Path, tmp_path: Path) -> None:
    """rev-newcomer finding 1: it ran a second time, booking a card again."""
    short = tmp_path / "short.yaml"
    short.write_text(POD.replace("name: trainer", "name: short-pod").replace(
        "scheduling.volcano.sh/queue-name: team-x", "tessera.io/duration: '1'"))  # fmt: skip
    assert run(system, "apply", "-f", str(short)).returncode == 0
    wait_pod(system, "short-pod", "Succeeded")
    again = run(system, "apply", "-f", str(short))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "pod/default/short-pod unchanged" in again.stdout
    assert "Warning: Pod default/short-pod is Succeeded: applying it again does not run it" in again.stdout
    history = run(system, "events", "--job", "short-pod").stdout
    assert history.count("JobSubmitted") == 1 and history.count("TaskStarted") == 1, history


@SHARED
def test_deleting_a_volcano_jobs_pod_is_answered_as_volcano_does(system: Path, tmp_path: Path) -> None:
    """`tessera delete pod jc-w-0`, a pod `get pods` lists Running, answered `Error from server
    (NotFound)` (the command took it for a job's name). Under Volcano kubectl deletes it and the
    job controller makes it again (PodEvicted, no policy): so here, and the words say so."""
    (tmp_path / "jc.yaml").write_text(VCJOB)
    assert run(system, "apply", "-f", str(tmp_path / "jc.yaml")).returncode == 0
    wait_pod(system, "jc-w-0", "Running")
    deleted = run(system, "delete", "pod", "jc-w-0")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith("pod default/jc-w-0 deleted; its Volcano Job default/jc answers PodEvicted")
    for _ in range(200):  # poll until the pod made again has started
        story = run(system, "events", "--job", "jc").stdout
        if story.count("TaskStarted") == 2:
            break
    assert "exit_code=137 reason=pod deleted" in story, story
    assert story.count("TaskStarted") == 2, story
    wait_pod(system, "jc-w-0", "Running")
    jobs = {j["name"]: j for j in json.loads(run(system, "get", "vcjob", "-o", "records").stdout)}
    assert not jobs["jc"].get("retries")  # SyncJob: no retry spent
    assert run(system, "delete", "job", "jc").returncode == 0


@SHARED
def test_events_output_matches_get(system: Path, tmp_path: Path) -> None:
    as_json = run(system, "events", "-o", "json")
    assert as_json.returncode == 0
    rows = json.loads(as_json.stdout)
    assert rows and {"seq", "subject", "type", "data"} <= set(rows[0])
    jsonl = run(system, "events", "-o", "jsonl").stdout.splitlines()
    assert len(jsonl) >= len(rows) and json.loads(jsonl[0])["seq"] == rows[0]["seq"]
    old = run(system, "events", "-o", str(tmp_path / "log.jsonl"))
    assert old.returncode == 2 and "use --output-file" in old.stderr
    written = run(system, "events", "--output-file", str(tmp_path / "log.jsonl"))
    assert written.returncode == 0 and (tmp_path / "log.jsonl").exists()


def closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `tessera ARGS` with stdout a pipe nobody reads (`… | head` after head exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "services.cli.main", *args], stdout=write,
                              stderr=subprocess.PIPE, cwd=ROOT, timeout=120)  # fmt: skip
    finally:
        os.close(write)


@SHARED
def test_a_closed_pipe_is_not_an_error(system: Path) -> None:
    for args in (("version",), ("get", "queues", "--state-dir", str(system))):  # root and default: rows
        out = closed_pipe(*args)
        assert b"BrokenPipeError" not in out.stderr and b"Traceback" not in out.stderr, out.stderr
        assert out.returncode == 141


def test_version() -> None:
    out = tessera("version")
    assert out.returncode == 0
    assert "tessera: 0.1.0" in out.stdout and "nats-server: v2." in out.stdout


def test_every_flag_has_help() -> None:
    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[str]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                yield f"{path} {'/'.join(action.option_strings) or action.dest}"

    assert list(walk(build_parser(), "tessera")) == []


def test_simulate_prints_a_summary_and_still_writes_the_report(tmp_path: Path) -> None:
    args = ("simulate", "--inventory", str(ROOT / "examples" / "inventory.yaml"),
            "--workload", str(ROOT / "examples" / "article.yaml"))  # fmt: skip
    plain = tessera(*args, "--report", str(tmp_path / "r.json"))
    assert plain.returncode == 0, plain.stderr
    first, header = plain.stdout.splitlines()[:2]
    assert "cycles; pods: 5 Running; cards in use 5/16" in first
    assert header.split()[:3] == ["NAMESPACE", "NAME", "PHASE"]
    assert "npu-train-job-worker-0" in plain.stdout
    assert json.loads((tmp_path / "r.json").read_text())["metrics"]["cards_in_use"] == 5
    as_json = tessera(*args, "-o", "json")
    assert json.loads(as_json.stdout)["metrics"]["cards_in_use"] == 5
