"""A hard network-topology gang whose running pods are on four nodes was said to "run on node-0,
node-1, node-2" (rev-examples F8, Volcano's network-topology guide, hard, tier 1): the fourth
node was left out with no word that there were more. The words now say how many more; they are
recorded in JobUnschedulable (rules generation 3, `config.TOPOLOGY_NODES_WORDS`), so a log of
generation 2 keeps its own on `replay --verify`."""

from __future__ import annotations

import dataclasses

import msgspec

from contracts.events import JobUnschedulable, SchedulerConfigured
from services.core.devices import build_vendors
from services.core.scheduling.config import TOPOLOGY_NODES_WORDS, parse_conf
from services.core.scheduling.record import configured
from services.core.scheduling.verify import decoded, verify
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_hypernodes, load_inventory
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
"""
#: 8 nodes of 4 cpu; s0 = node-0..3 and s1 = node-4..7 at tier 1, s2 above both
INVENTORY = {
    "nodes": [{"name": "node", "count": 8, "cpu": 4, "memory": "16Gi"}],
    "hypernodes": [
        {"metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[0-3]$"}}}]}},
        {"metadata": {"name": "s1"}, "spec": {"tier": 1, "members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[4-7]$"}}}]}},
        {"metadata": {"name": "s2"}, "spec": {"tier": 2, "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}]}},
    ],
}  # fmt: skip
#: Volcano's docs/user-guide network-topology example, hard mode, tier 1: 8 pods of 4 cpu, 4 a gang
JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: network-topology-job}
spec:
  minAvailable: 4
  networkTopology: {mode: hard, highestTierAllowed: 1}
  tasks:
  - name: t0
    replicas: 8
    template:
      spec:
        containers: [{name: c0, image: nginx, resources: {requests: {cpu: "4"}, limits: {cpu: "4"}}}]
"""
OLD = "4 pods of the gang run on node-0, node-1, node-2: no HyperNode of tier <= 1"
NOW = "4 pods of the gang run on node-0, node-1, node-2 (and 1 more node): no HyperNode of tier <= 1"


def _waits() -> tuple[list[str], list[object]]:
    reg = build_vendors()
    work = admit(load_documents(JOB), hami_parser(reg), reg.resource_names())
    assert not work.rejections, [r.message() for r in work.rejections]
    work = dataclasses.replace(work, hypernodes=(*load_hypernodes(INVENTORY), *work.hypernodes))
    sim = load_simulation(parse_conf(CONF), reg, load_inventory(INVENTORY, reg.catalogue), work,
                          config=configured(CONF, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    messages = list(sim.log.messages())
    whys = [msgspec.json.decode(m.data, type=JobUnschedulable).why for m in messages
            if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    return whys, messages


def test_the_wait_says_how_many_nodes_it_does_not_name() -> None:
    whys, _ = _waits()
    running = [w for w in whys if "pods of the gang run on" in w]
    assert running and all(w.startswith(NOW) for w in running), whys


def test_a_log_of_generation_2_keeps_its_words() -> None:
    _, messages = _waits()
    stored, poisoned = decoded(messages)
    assert not poisoned
    older = [(s, h, msgspec.structs.replace(e, rules=TOPOLOGY_NODES_WORDS - 1) if isinstance(e, SchedulerConfigured)
              else e) for s, h, e in stored]  # fmt: skip
    d = verify(older).divergence
    assert d is not None and isinstance(d.rederived, JobUnschedulable), d
    assert d.rederived.why.startswith(OLD), d.rederived.why
    assert verify(stored).ok
