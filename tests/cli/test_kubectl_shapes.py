"""kubectl's shapes (issue 26, items 6–8), through the CLI against one running `tessera up`:
`describe` of every kind in people's units, `get -o json|yaml` as Kubernetes objects, `-o wide`,
`-l`, `-w`, NotFound in kubectl's words, and `get vcjob|pg` listing Volcano's objects by the
names Volcano gives them."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.test_kubectl_habits import run
from tests.cli.test_up_down import running
from tests.processes import ROOT

# Every test here shares the module's `up`: one xdist worker runs them all, so it starts once
# (unmarked, `--dist loadgroup` dealt them to both workers and each started its own).
pytestmark = pytest.mark.xdist_group("kubectl_shapes")

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: shapes}
spec: {weight: 1, capability: {cpu: "64", memory: 256Gi, huawei.com/Ascend910B3: "8"}}
"""
JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: trainjob}
spec:
  queue: shapes
  minAvailable: 2
  schedulerName: volcano
  tasks:
    - name: worker
      replicas: 2
      template:
        metadata: {labels: {app: train}}
        spec:
          containers:
            - name: c
              image: busybox
              resources: {limits: {cpu: "1", huawei.com/Ascend910B3: "1"}}
"""
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {labels}
  annotations: {{scheduling.volcano.sh/queue-name: shapes}}
spec:
  containers: [{{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}]
"""
DEADLINE = 60.0
FIXTURE_PODS = {"trainjob-worker-0", "trainjob-worker-1", "web-a", "web-b", "db"}
#: Seconds since the epoch, as a float or a ten-digit integer: never in what people read.
EPOCH = re.compile(r"(?<![\w.-])1\d{9}(\.\d+)?(?![\w.-])")
RFC3339_AGO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((\d+[smhdy])+ ago\)")


def pod_yaml(name: str, labels: dict[str, str]) -> str:
    return POD.format(name=name, labels=json.dumps(labels))


def records(state: Path, kind: str) -> list[dict]:
    got = run(state, "get", kind, "-A", "-o", "records")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def wait_running(state: Path, names: set[str]) -> list[dict]:
    """Poll `get pods` (the observable outcome) until every one of `names` runs."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        pods = records(state, "pods")
        if names <= {p["name"] for p in pods if p["phase"] == "Running"}:
            return pods
    raise AssertionError(f"{names} never all ran: {pods}")


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with running(tmp_path_factory.mktemp("shapes")) as state:
        manifests = state / "m"
        manifests.mkdir()
        (manifests / "1-queue.yaml").write_text(QUEUE)
        (manifests / "2-job.yaml").write_text(JOB)
        (manifests / "3-a.yaml").write_text(pod_yaml("web-a", {"app": "web", "tier": "front"}))
        (manifests / "4-b.yaml").write_text(pod_yaml("web-b", {"app": "web", "tier": "back"}))
        (manifests / "5-c.yaml").write_text(pod_yaml("db", {"app": "db"}))
        applied = run(state, "apply", "-f", str(manifests))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        wait_running(state, FIXTURE_PODS)
        yield state


def cell(table: str, row_name: str, column: str) -> str:
    """One cell of a plain table, by the header's column offsets (an empty cell stays empty)."""
    header, *rows = table.splitlines()
    tokens = list(re.finditer(r"\S+", header))
    names, starts = [t.group() for t in tokens], [t.start() for t in tokens]
    i = names.index(column)
    row = next(r for r in rows if r.split()[names.index("NAME")] == row_name)
    end = starts[i + 1] if i + 1 < len(starts) else None
    return row[starts[i]:end].strip()


def test_describe_every_kind_in_peoples_units(system: Path) -> None:
    pg = json.loads(run(system, "get", "pg", "trainjob", "-o", "json").stdout)
    card = records(system, "cards")[0]["uuid"]
    queues_table = run(system, "get", "q").stdout
    targets = {
        "pod": ("po", "web-a"), "vcjob": ("vcjob", "trainjob"), "pg": ("pg", pg["metadata"]["name"]),
        "queue": ("q", "shapes"), "node": ("nodes", "node-a"), "card": ("card", card),
    }  # fmt: skip
    out = {}
    for what, (kind, name) in targets.items():
        got = run(system, "describe", kind, name)
        assert got.returncode == 0, (what, got.stderr)
        out[what] = got.stdout
        assert "Events:" in got.stdout, what
        assert "{'" not in got.stdout and "': " not in got.stdout, (what, got.stdout)  # no dict reprs
        assert not EPOCH.search(got.stdout), (what, EPOCH.search(got.stdout))
    for what in ("pod", "vcjob", "pg", "queue", "node"):
        created = next(line for line in out[what].splitlines() if line.startswith("Created:"))
        assert RFC3339_AGO.search(created), (what, created)
    capability = next(line for line in out["queue"].splitlines() if line.startswith("Capability:"))
    assert capability.split(None, 1)[1] == cell(queues_table, "shapes", "CAPABILITY")  # as `get q` prints it
    assert "memory=256Gi" in capability
    assert "Owner:" in out["pg"] and "Job/trainjob" in out["pg"] and "trainjob-worker-0" in out["pg"]
    assert "TaskStarted" in out["vcjob"] and "trainjob-worker-1" in out["vcjob"]
    assert re.search(r"Labels:\s+app=web,tier=front", out["pod"]), out["pod"]
    assert "NodeRegistered" in out["node"] and "cards=8×Ascend910B3" in out["node"]
    missing = run(system, "describe", "pg", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): podgroups.scheduling.volcano.sh "nope" not found'


def test_get_prints_kubernetes_objects(system: Path) -> None:
    pods = {p["name"]: p for p in records(system, "pods")}
    listed = json.loads(run(system, "get", "po", "-o", "json").stdout)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    by_name = {o["metadata"]["name"]: o for o in listed["items"]}
    assert set(by_name) == {n for n, p in pods.items() if p["namespace"] == "default"}
    for name in FIXTURE_PODS:
        obj = by_name[name]
        assert (obj["apiVersion"], obj["kind"]) == ("v1", "Pod")
        assert obj["metadata"]["namespace"] == pods[name]["namespace"]
        assert obj["status"]["phase"] == pods[name]["phase"] == "Running"
        assert obj["spec"]["nodeName"] == pods[name]["node"]
        assert {"type": "PodScheduled", "status": "True"} in obj["status"]["conditions"]
    one = yaml.safe_load(run(system, "get", "pod", "web-b", "-o", "yaml").stdout)
    assert one["kind"] == "Pod" and one["metadata"]["labels"] == {"app": "web", "tier": "back"}
    job = json.loads(run(system, "get", "vcjob", "trainjob", "-o", "json").stdout)
    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    assert job["spec"]["queue"] == "shapes" and job["status"]["state"]["phase"] == "Running"
    assert job["status"]["running"] == 2
    groups = yaml.safe_load(run(system, "get", "pg", "-o", "yaml").stdout)
    assert groups["kind"] == "List"
    assert {(g["apiVersion"], g["kind"]) for g in groups["items"]} == {("scheduling.volcano.sh/v1beta1", "PodGroup")}
    queue_obj = json.loads(run(system, "get", "q", "shapes", "-o", "json").stdout)
    assert (queue_obj["apiVersion"], queue_obj["kind"]) == ("scheduling.volcano.sh/v1beta1", "Queue")
    assert queue_obj["spec"]["capability"]["memory"] == "256Gi" and queue_obj["status"]["state"] == "Open"

    wide = run(system, "get", "po", "-o", "wide")
    assert {"NODE", "DEVICES", "JOB", "PODGROUP", "LABELS"} <= set(wide.stdout.splitlines()[0].split())
    assert "trainjob" in cell(wide.stdout, "trainjob-worker-0", "JOB")
    jobs_wide = run(system, "get", "vcjob", "-o", "wide").stdout
    assert cell(jobs_wide, "trainjob", "CARDS") == "2" and cell(jobs_wide, "trainjob", "PODS") == "2/2"

    def selected(selector: str) -> set[str]:
        got = run(system, "get", "po", "-l", selector, "-o", "json")
        assert got.returncode == 0, got.stderr
        return {o["metadata"]["name"] for o in json.loads(got.stdout)["items"]}

    assert selected("app=web") == {"web-a", "web-b"}
    assert selected("app=web,tier!=back") == {"web-a"}
    assert selected("tier") == {"web-a", "web-b"}
    assert selected("app!=web") & FIXTURE_PODS == {"db", "trainjob-worker-0", "trainjob-worker-1"}
    assert selected("volcano.sh/job-name=trainjob") == {"trainjob-worker-0", "trainjob-worker-1"}
    assert run(system, "get", "po", "-l", "a=b=c").returncode == 1

    some = run(system, "get", "po", "web-a", "db", "missing")
    assert some.returncode == 1
    assert [line.split()[0] for line in some.stdout.splitlines()[1:]] == ["web-a", "db"]
    assert some.stderr.strip() == 'Error from server (NotFound): pods "missing" not found'


def test_a_second_delete_is_not_found(system: Path) -> None:
    (system / "gone.yaml").write_text(pod_yaml("gone", {"app": "gone"}))
    assert run(system, "apply", "-f", str(system / "gone.yaml")).returncode == 0
    first = run(system, "delete", "pod", "gone")
    assert first.returncode == 0 and first.stdout.strip() == "pod default/gone deleted"
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:  # poll until the queue service folded the deletion
        second = run(system, "delete", "pod", "gone")
        if second.returncode == 1:
            break
    assert second.returncode == 1
    assert second.stderr.strip() == 'Error from server (NotFound): pods "gone" not found'
    assert run(system, "get", "po", "gone").stderr.strip() == 'Error from server (NotFound): pods "gone" not found'


def test_delete_a_podgroup_by_the_name_get_pg_prints(system: Path) -> None:
    (system / "grouped.yaml").write_text(pod_yaml("grouped", {"app": "grouped"}))
    assert run(system, "apply", "-f", str(system / "grouped.yaml")).returncode == 0
    name = json.loads(run(system, "get", "pg", "grouped", "-o", "json").stdout)["metadata"]["name"]
    assert name.startswith("podgroup-")
    deleted = run(system, "delete", "pg", name)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"podgroup default/{name} deleted", deleted.stderr
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and run(system, "get", "po", "grouped").returncode == 0:
        pass  # poll until the deletion is in the log
    assert run(system, "get", "po", "grouped").returncode == 1


def test_vcjob_and_pg_list_volcano_objects_and_root_has_no_parent(system: Path) -> None:
    jobs = run(system, "get", "vcjob")
    assert [line.split()[0] for line in jobs.stdout.splitlines()[1:]] == ["trainjob"]  # no plain pods
    pod = json.loads(run(system, "get", "po", "db", "-o", "json").stdout)
    job = json.loads(run(system, "get", "vcjob", "trainjob", "-o", "json").stdout)
    groups = {g["metadata"]["name"]: g for g in json.loads(run(system, "get", "pg", "-o", "json").stdout)["items"]}
    # Volcano's names: `podgroup-<pod uid>` for a plain pod, `<job>-<job uid>` for a Job
    implied = groups[f"podgroup-{pod['metadata']['uid']}"]
    assert implied["metadata"]["ownerReferences"][0]["name"] == "db"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == implied["metadata"]["name"]
    assert f"trainjob-{job['metadata']['uid']}" in groups
    table = run(system, "get", "pg").stdout
    assert f"podgroup-{pod['metadata']['uid']}" in table and "trainjob-" in table
    queues = run(system, "get", "q").stdout
    assert cell(queues, "root", "PARENT") == ""
    assert cell(queues, "shapes", "PARENT") == "root"


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """The process's stdout, line by line, read by a thread (a pipe read has no timeout)."""
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return out


def _until(lines: queue.Queue[str], seen: list[str], done: object) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done(seen):  # type: ignore[operator]
        try:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"watch never printed it: {seen}") from None


def test_watch_prints_the_list_then_each_change(system: Path) -> None:
    # Ctrl-C as a terminal's foreground command gets it: a process started with SIGINT ignored
    # (a background job of a non-interactive shell, as CI may run the suite) keeps it ignored,
    # and then no Ctrl-C ends `get -w` — nor should it
    launch = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
              "sys.argv[0] = 'tessera'; runpy.run_module('services.cli.main', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", launch, "get", "po", "-w",
                             "--state-dir", str(system)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        lines, seen = _lines(proc), []
        _until(lines, seen, lambda s: any(line.split()[0:1] == ["db"] for line in s))
        assert seen[0].split()[:3] == ["NAME", "PHASE", "NODE"]
        (system / "late.yaml").write_text(pod_yaml("late", {"app": "late"}))
        assert run(system, "apply", "-f", str(system / "late.yaml")).returncode == 0
        _until(lines, seen, lambda s: any(line.split()[0:2] == ["late", "Running"] for line in s))
        changes = [line for line in seen if line.split()[0:1] == ["late"]]
        assert changes and "PHASE" not in "".join(seen[1:])  # rows only after the first table
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # where it hangs: faulthandler's dump on SIGABRT
            proc.send_signal(signal.SIGABRT)
            try:
                proc.wait(timeout=30)
            finally:
                proc.kill()  # never left behind
            raise AssertionError(f"Ctrl-C did not end the watch:\n{proc.stderr.read() if proc.stderr else ''}") from None
    assert code == 0, proc.stderr.read() if proc.stderr else ""


def test_get_o_yaml_applied_again_is_unchanged(system: Path) -> None:
    """The printed objects carry their whole admitted spec (a Pod's containers and the
    schedulerName it names — none here, so the API server's `default-scheduler`; a Job's task
    templates), and applying that output is `unchanged`, as `kubectl get -o yaml | kubectl
    apply -f -` is."""
    pod = yaml.safe_load(run(system, "get", "po", "web-a", "-o", "yaml").stdout)
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}
    assert pod["spec"]["schedulerName"] == "default-scheduler" and pod["spec"]["nodeName"]
    job = yaml.safe_load(run(system, "get", "vcjob", "trainjob", "-o", "yaml").stdout)
    assert job["spec"]["tasks"][0]["template"]["metadata"] == {"labels": {"app": "train"}}
    assert job["spec"]["schedulerName"] == "volcano"
    for kind, name in (("po", "web-a"), ("vcjob", "trainjob")):
        printed = system / f"printed-{name}.yaml"
        printed.write_text(run(system, "get", kind, name, "-o", "yaml").stdout)
        again = run(system, "apply", "-f", str(printed))
        assert again.returncode == 0 and again.stdout.splitlines()[0].endswith(f"/{name} unchanged"), again.stdout
