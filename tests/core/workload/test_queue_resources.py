"""Issue 13 item 5: a Queue limit naming a resource no vendor reads is a typo, refused with the
same "did you mean" as a container's; one naming a real resource no node of the cluster reports
is accepted, and `tessera get queues` says so (the report's queue record carries a warning)."""

from __future__ import annotations

from services.cli.get import QUEUE_COLUMNS, render
from services.core.scheduling.config import DEFAULT_CONF
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from tests.core.scheduling.scenarios import Scenario, run_engine, vendors

TYPO = "huawei.com/Ascend910B2-npu"


def _queue(capability: str, field: str = "capability") -> str:
    return f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: q1}}
spec: {{{field}: {{cpu: 4, {capability}: 4}}}}
"""


def _pod(resource: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: p1}}
spec: {{containers: [{{name: c, image: busybox, resources: {{limits: {{{resource}: 1}}}}}}]}}
"""


def _rules(text: str) -> list[str]:
    reg = vendors()
    work = admit(load_documents(text), hami_parser(reg), reg.resource_names())
    return [r.message() for r in work.rejections]


def test_a_queue_capability_typo_gets_the_same_did_you_mean_as_a_pod() -> None:
    (queue,) = _rules(_queue(TYPO))
    (pod,) = _rules(_pod(TYPO))
    assert queue == (f"Queue: spec.capability.{TYPO}: unknown device resource; "
                     "did you mean huawei.com/Ascend910B2?")  # fmt: skip
    assert queue.split(": ", 2)[2] == pod.split(": ", 2)[2]


def test_deserved_is_checked_too_and_known_names_pass() -> None:
    (deserved,) = _rules(_queue(TYPO, "deserved"))
    assert deserved.startswith(f"Queue: spec.deserved.{TYPO}: unknown device resource")
    assert _rules(_queue("huawei.com/Ascend910B2")) == []
    assert _rules(_queue("example.com/widget")) == []  # not a device domain: not ours to judge


def _report_queues(capability: str) -> dict[str, dict]:  # type: ignore[type-arg]
    inventory = {"nodes": [{"name": "n1", "cpu": 8, "memory": "64Gi",
                            "devices": [{"type": "Ascend910B3", "count": 2}]}]}  # fmt: skip
    sc = Scenario("queues", "x", DEFAULT_CONF, inventory, _queue(capability), {}, multi_step=True)
    return {q["name"]: q for q in run_engine(sc)["queues"]}


def test_get_queues_says_when_a_capability_names_a_resource_no_node_reports() -> None:
    q1 = _report_queues("huawei.com/Ascend910B2")["q1"]
    assert q1["warning"] == "capability names huawei.com/Ascend910B2, which no node reports"
    assert "which no node reports" in render([q1], QUEUE_COLUMNS, "table")
    for reported in ("huawei.com/Ascend910B3", "huawei.com/Ascend910B", "huawei.com/Ascend910"):
        assert "warning" not in _report_queues(reported)["q1"], reported
