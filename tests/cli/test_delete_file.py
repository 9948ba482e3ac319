"""`tessera delete -f` of a file holding a running Volcano Job and its Queue, against a running
`tessera up` (test_delete_targets.py mocks the commands, so it checks only their order): the
Job is deleted, then the Queue, which the queue service refuses while it holds jobs. Both go:
the queue service folds the Job's `JobDeleted` under its command lock before it answers, so
the Queue's delete, sent after that answer, finds it empty — even while the Job's pods stop."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_control import run, system  # noqa: F401  (the fixture)

FILE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: qfile}
spec: {weight: 1}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: default}
spec:
  queue: qfile
  minAvailable: 1
  tasks:
    - name: w
      replicas: 1
      template:
        spec:
          containers:
            - name: c
              image: busybox
              resources: {limits: {huawei.com/Ascend910B3: "1"}}
"""


def test_delete_f_of_a_running_job_and_its_queue_deletes_both(system: Path, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "all.yaml"
    manifest.write_text(FILE)
    applied = run(system, "apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    for _ in range(200):  # the job runs: its pod holds a card
        jobs = json.loads(run(system, "get", "jobs", "-o", "records").stdout)
        if any(j["name"] == "train" and j["phase"] == "Running" for j in jobs):
            break
    else:
        raise AssertionError(jobs)
    deleted = run(system, "delete", "-f", str(manifest))
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert deleted.stdout.splitlines() == ["job default/train deleted", "queue qfile deleted"], deleted.stdout
    queues = json.loads(run(system, "get", "queues", "-o", "records").stdout)
    assert "qfile" not in {q["name"] for q in queues}, queues
