"""A Queue's `dequeueStrategy` (Volcano's allocate): `fifo` — the head job of the queue that
cannot be placed blocks the rest of the queue; `traverse` (the default) goes on to the next.
The strategy was accepted and ignored (every queue traversed)."""

from __future__ import annotations

import pytest

from contracts.events import JobSubmitted, NodeRegistered, QueueCreated
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.devices import build_vendors
from services.core.scheduling import snapshot as st
from services.core.scheduling.decide import decide
from services.core.workload import admit
from services.core.workload.devicerequests import hami_parser
from services.kube import volcano

REG = build_vendors()


def projection(strategy: str) -> st.ClusterProjection:
    """A 2-cpu node; in one queue, `big` (10 cpu, first) then `small` (1 cpu)."""
    p = st.ClusterProjection()
    events: list[object] = [QueueCreated(spec=QueueSpec(name="root")),
                            QueueCreated(spec=QueueSpec(name="q", parent="root", dequeue_strategy=strategy)),
                            NodeRegistered(node="n1", cpu_milli=2000, memory_mib=4096)]  # fmt: skip
    for name, cpu in (("big", 10_000), ("small", 1000)):
        task = TaskSpec(name="main", replicas=1, cpu_milli=cpu, min_available=1)
        events.append(JobSubmitted(spec=JobSpec(namespace="default", name=name, queue="q", min_available=1,
                                                tasks=(task,), phase="Inqueue")))  # fmt: skip
    for seq, e in enumerate(events, 1):
        p.apply(seq, e)  # type: ignore[arg-type]
    return p


def placed(strategy: str) -> list[str]:
    return sorted(pl.name for pl in decide(projection(strategy).snapshot()).placements)


def test_fifo_blocks_behind_its_head_and_traverse_goes_on() -> None:
    assert placed("traverse") == ["small"]
    assert placed("fifo") == []


@pytest.mark.parametrize(("spec", "annotations", "want"), [
    ({"dequeueStrategy": "fifo"}, {}, "fifo"),
    ({}, {"volcano.sh/dequeue-strategy": "fifo"}, "fifo"),  # Volcano's earlier annotation
    ({}, {"volcano.sh/dequeue-strategy": "sideways"}, "traverse"),  # an invalid one: the default
    ({}, {}, "traverse"),
])  # fmt: skip
def test_the_strategy_is_admitted_and_written_back(spec: dict, annotations: dict, want: str) -> None:
    doc = {"apiVersion": volcano.SCHEDULING, "kind": "Queue", "metadata": {"name": "q", "annotations": annotations},
           "spec": {"weight": 1, **spec}}  # fmt: skip
    (q,) = admit([doc], hami_parser(REG), REG.resource_names()).queues
    assert q.dequeue_strategy == want
    assert admit([volcano.queue_object(q)], hami_parser(REG), REG.resource_names()).queues == (q,)


def test_a_job_behind_a_blocked_fifo_head_is_told_so() -> None:
    why = {u.name: u.why for u in decide(projection("fifo").snapshot()).unschedulable}
    assert why["small"] == "queue q takes its jobs in order (dequeueStrategy: fifo): default/big before it cannot be placed yet"
    assert "cpu" in why["big"]
