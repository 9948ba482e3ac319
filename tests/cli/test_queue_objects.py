"""`tessera get queue -o yaml|json` prints the Queue as the API server holds it: every field of
its spec (get-then-apply changed a queue: reclaimable, priority, deserved and guarantee were
dropped, so applying the printed object reset them), quantities as a manifest writes them (`4`
cards, not `4000m`), and the PodGroup counts Volcano's queue controller writes into its status
(`vcctl queue list`: Inqueue, Pending, Running, Unknown, Completed), which `get queues` prints."""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml

from services.cli import kubeobjects as ko
from services.cli.get import GET_QUEUE_COLUMNS, listing_of
from services.cli.main import main
from services.cli.tables import render
from services.core.simulate.jsonl import read_jsonl
from services.core.workload import admit, load_documents
from services.runtime.eventlog import StoredMessage
from tests.processes import ROOT

QFULL = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: qfull, annotations: {team: vision}}
spec:
  weight: 3
  reclaimable: false
  priority: 5
  capability: {cpu: "32", memory: 256Gi, huawei.com/Ascend910B3: "4"}
  deserved: {cpu: "16", huawei.com/Ascend910B3: "2"}
  guarantee:
    resource: {cpu: "8"}
"""


def _job(name: str, replicas: int, cards: int, duration: str = "") -> str:
    annotations = f"{{annotations: {{tessera.io/duration: '{duration}'}}}}" if duration else "{}"
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
  queue: qfull
  minAvailable: {replicas}
  tasks:
    - name: worker
      replicas: {replicas}
      template:
        metadata: {annotations}
        spec:
          containers:
            - name: c
              image: busybox
              resources: {{limits: {{cpu: "1", huawei.com/Ascend910B3: "{cards}"}}}}
"""


def _pod(name: str, duration: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{scheduling.volcano.sh/queue-name: qfull, tessera.io/duration: '{duration}'}}
spec:
  containers: [{{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}]
"""


def _log(tmp_path: Path, *docs: str) -> list[StoredMessage]:
    work = tmp_path / "work.yaml"
    work.write_text("---".join(docs))
    log = tmp_path / "log.jsonl"
    assert main(["simulate", "--inventory", str(ROOT / "examples" / "inventory.yaml"), "--workload", str(work),
                 "--events", str(log), "--until", "600", "-o", "json"]) == 0  # fmt: skip
    return read_jsonl(log)


def _queue(messages: list[StoredMessage], name: str) -> tuple[dict, dict]:
    got, _ = listing_of(messages, "queues", None)
    i = next(i for i, o in enumerate(got.objects) if o["metadata"]["name"] == name)
    return got.objects[i], got.rows[i]


def test_get_queue_yaml_applied_again_is_the_same_queue(tmp_path: Path) -> None:
    obj, _ = _queue(_log(tmp_path, QFULL), "qfull")
    assert obj["spec"]["reclaimable"] is False and obj["spec"]["priority"] == 5
    assert obj["spec"]["capability"] == {"cpu": "32", "huawei.com/Ascend910B3": "4", "memory": "256Gi"}
    assert obj["spec"]["deserved"] == {"cpu": "16", "huawei.com/Ascend910B3": "2"}
    assert obj["spec"]["guarantee"] == {"resource": {"cpu": "8"}}
    assert obj["metadata"]["annotations"] == {"team": "vision"}
    printed = yaml.safe_dump(obj)  # what `get -o yaml` prints, applied again
    again = admit(load_documents(printed))
    assert not again.rejections
    assert again.queues == admit(load_documents(QFULL)).queues


def test_queue_status_and_table_count_podgroups_as_volcano(tmp_path: Path) -> None:
    messages = _log(tmp_path, QFULL,
                    _job("runs", 2, 1),  # 2 of the queue's 4 cards: Running
                    _job("too-big", 1, 8),  # more than the capability: never enqueued, Pending
                    _job("short", 1, 1, "30"),  # ends by itself: Volcano's kill deletes its group
                    _pod("done", "30"))  # a pod's group stays, Completed  # fmt: skip
    obj, row = _queue(messages, "qfull")
    want = {"inqueue": 0, "pending": 1, "running": 1, "unknown": 0, "completed": 1}
    assert {k: obj["status"][k] for k in ko.QUEUE_COUNTS} == want
    table = render([row], GET_QUEUE_COLUMNS, "table").splitlines()
    header = table[0].split()
    assert header[:9] == ["NAME", "STATE", "WEIGHT", "PARENT", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN", "COMPLETED"]
    assert table[1].split()[:9] == ["qfull", "Open", "3", "root", "0", "1", "1", "0", "1"]


def test_queue_update_keeps_every_other_field() -> None:
    """`tessera queue update --weight` writes the stored spec back with the new weight; it left
    out affinity and dequeueStrategy, so an update reset them."""
    from services.cli.control import queue_manifest

    text = QFULL + """  dequeueStrategy: fifo
  affinity:
    nodeGroupAffinity:
      requiredDuringSchedulingIgnoredDuringExecution: [group-a]
"""
    (spec,) = admit(load_documents(text)).queues
    assert spec.node_groups is not None and spec.dequeue_strategy == "fifo"
    updated = admit(load_documents(yaml.safe_dump(queue_manifest(spec, weight=5))))
    assert not updated.rejections
    assert updated.queues == (msgspec.structs.replace(spec, weight=5),)
