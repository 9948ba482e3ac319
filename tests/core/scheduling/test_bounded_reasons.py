"""A pod no node of a large cluster can take: its `JobUnschedulable` keeps a sample of the
per-node reasons (every reason represented) and the exact count of nodes per reason, so the
event stays small whatever the cluster's size and the words still count every node."""

from __future__ import annotations

from typing import Any

from contracts.workloads import DeviceRequest, JobSpec, TaskSpec
from services.core.scheduling import podreasons as reasons
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import MAX_NODE_REASONS, bounded_reasons
from tests.core.scheduling.scenarios import Scenario, _simulation

B3 = "huawei.com/Ascend910B3"


def test_few_nodes_are_kept_whole_and_many_are_sampled_with_counts() -> None:
    few = {f"n{i}": "Insufficient cpu" for i in range(MAX_NODE_REASONS)}
    assert bounded_reasons(few) == (few, {})
    many = {f"n{i:04d}": ("Insufficient cpu" if i % 10 else "1/8 CardInsufficientMemory") for i in range(5000)}
    kept, counts = bounded_reasons(many)
    assert len(kept) == MAX_NODE_REASONS and set(kept.items()) <= set(many.items())
    assert counts == {"1/8 CardInsufficientMemory": 500, "Insufficient cpu": 4500}
    assert set(kept.values()) == set(counts)  # the rare reason is in the sample too
    assert bounded_reasons(dict(reversed(list(many.items())))) == (kept, counts)  # order-free


def test_a_pod_no_node_takes_on_a_large_cluster_counts_every_node() -> None:
    inventory: dict[str, Any] = {"nodes": [
        {"name": f"node-{i:03d}", "cpu": 2 if i < 70 else 192, "memory": "1536Gi",
         "devices": [{"type": "Ascend910B3", "count": 8 if i < 70 else 4}]} for i in range(100)]}  # fmt: skip
    workload = f"""
apiVersion: v1
kind: Pod
metadata: {{name: big, namespace: default}}
spec:
  containers:
    - {{name: c, image: x, resources: {{limits: {{cpu: "4", {B3}: "8"}}}}}}
---"""
    sim = _simulation(Scenario("bounded", "b", DEFAULT_CONF, inventory, workload, {}), cycles=0)
    sim.run()
    snap = sim.projection.snapshot()
    d = decide(snap, parse_conf(DEFAULT_CONF))
    waiting = {u.name: u for u in d.unschedulable}
    assert "big" in waiting, [p.name for p in d.placements]
    u = waiting["big"]
    assert len(u.node_reasons) <= MAX_NODE_REASONS
    assert sum(u.reason_counts.values()) == 100, u.reason_counts
    event = u.event(based_on=0, session=1)
    assert event.reason_counts == dict(u.reason_counts) and event.node_reasons == dict(u.node_reasons)
    spec = JobSpec(namespace="default", name="big", tasks=(TaskSpec(name="big", devices=(
        DeviceRequest(vendor="huawei", type="Ascend910B3", count=8),)),))  # fmt: skip
    line = reasons.message(u.reason, u.node_reasons, 100, spec, "", u.reason_counts)
    assert line == ("1/1 tasks in gang unschedulable: 0/100 nodes are available: 70 Insufficient cpu, "
                    "30 have fewer than 8 free Ascend910B3 cards."), line
