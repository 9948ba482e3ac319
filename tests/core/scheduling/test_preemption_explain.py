"""A pod waiting for cpu a lower-priority pod holds is told why the scheduler makes no room for
it, where a user from kube-scheduler expects the lower-priority pod to be evicted: Volcano's
default actions have no preempt; preempt acts only for a PodGroup enqueue admitted; and with
preempt on, gang's preemptable rule keeps a job at its minAvailable — a plain pod's job of
minAvailable 1 with its pod running included (plugins/gang.py, as Volcano's gang.go). explain
said only "free 2 cpu in the cluster, or raise overcommit's overcommit-factor" (a user review).
"""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.events import JobUnschedulable
from services.core.devices import build_vendors
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.record import configured
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser

ONE_NODE = {"nodes": [{"name": "p1", "cpu": 4, "memory": "8Gi"}]}

PODS = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata: {name: low}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: hi, annotations: {tessera.io/arrive-at: "10"}}
spec:
  priorityClassName: high
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
"""


def preempt_conf(gang: str = "", actions: str = "allocate, preempt, backfill") -> str:
    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang{gang}
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: nodeorder
"""


def verdicts(conf_text: str, docs: str, inventory: dict[str, Any] = ONE_NODE) -> dict[str, JobUnschedulable]:
    reg = build_vendors()
    work = admit(load_documents(docs), hami_parser(reg), reg.resource_names())
    assert not work.rejections, [r.message() for r in work.rejections]
    sim = load_simulation(parse_conf(conf_text), reg, load_inventory(inventory, reg.catalogue), work,
                          config=configured(conf_text, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    out = {}
    for m in sim.log.messages():
        if m.headers.get("Tessera-Type") == "JobUnschedulable":
            v = msgspec.json.decode(m.data, type=JobUnschedulable)
            out[v.name] = v
    return out


GANG_KEEPS = "the pods that could make room are not preemptable: gang's rule keeps a job at its minAvailable"


def test_without_preempt_in_the_actions_the_fix_says_preemption_is_off() -> None:
    hi = verdicts(DEFAULT_CONF, PODS)["hi"]
    assert hi.unblock.startswith("free 2 cpu in the cluster, or raise overcommit's overcommit-factor; "), hi.unblock
    assert ("preemption is off: the scheduler conf's actions have no preempt (kube-scheduler would evict "
            "lower-priority pods; add preempt to actions)") in hi.unblock  # fmt: skip
    # adding preempt alone would not do: enqueue holds the PodGroup, and gang keeps `low`
    assert "preempt makes room only for a PodGroup enqueue has admitted, and overcommit holds this one" in hi.unblock
    assert GANG_KEEPS in hi.unblock and "default/low: 1 ready, minAvailable 1" in hi.unblock


def test_with_preempt_gangs_rule_keeping_a_plain_pod_is_named_with_its_switch() -> None:
    hi = verdicts(preempt_conf(), PODS)["hi"]
    assert hi.unblock.startswith("free 2 cpu on p1; " + GANG_KEEPS), hi.unblock
    assert "enablePreemptable: false on gang" in hi.unblock
    assert "preemption is off" not in hi.unblock and "conformance" not in hi.unblock


def test_nothing_is_added_where_preempt_takes_the_pod_or_kube_would_not_preempt() -> None:
    # gang's check off: preempt evicts `low` and `hi` is placed, no verdict left for it
    assert "hi" not in verdicts(preempt_conf("\n    enablePreemptable: false"), PODS)
    # an equal priority: kube-scheduler would not preempt either, the fix stays as it was
    equal = PODS.replace("priorityClassName: high", "priorityClassName: \"\"")
    assert verdicts(preempt_conf(), equal)["hi"].unblock == "free 2 cpu on p1"
    assert verdicts(preempt_conf(actions="allocate, backfill"), equal)["hi"].unblock == "free 2 cpu on p1"


def test_the_verdict_key_does_not_move_with_the_new_words() -> None:
    """The words are the fix's (`unblock`), which `unschedulable_key` does not read: a waiting
    job's verdict is appended once, not again with every placement elsewhere."""
    docs = PODS + "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: filler-{i}, annotations: {{tessera.io/arrive-at: "{20 + i}"}}}}
spec:
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "100m"}}}}}}]
""" for i in range(3))  # fmt: skip
    reg = build_vendors()
    work = admit(load_documents(docs), hami_parser(reg), reg.resource_names())
    conf_text = preempt_conf()
    sim = load_simulation(parse_conf(conf_text), reg, load_inventory(ONE_NODE, reg.catalogue), work,
                          config=configured(conf_text, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    mine = [m for m in sim.log.messages() if m.headers.get("Tessera-Type") == "JobUnschedulable"
            and msgspec.json.decode(m.data, type=JobUnschedulable).name == "hi"]  # fmt: skip
    assert len(mine) == 1


def test_a_pod_marked_not_preemptable_is_named() -> None:
    docs = PODS.replace("metadata: {name: low}", "metadata: {name: low, annotations: {volcano.sh/preemptable: \"false\"}}")
    hi = verdicts(preempt_conf("\n    enablePreemptable: false"), docs)["hi"]
    assert hi.unblock == (
        "free 2 cpu on p1; the pods that could make room are not preemptable: default/low is marked "
        "volcano.sh/preemptable: false"
    )


def test_the_words_look_at_a_bounded_number_of_nodes(monkeypatch: Any) -> None:
    """Every session explains every waiting job: a pass over every node per pod shape doubled
    a session over a full 2,000-node cluster (the end-of-session review). The words need
    whether room could be made and a few places; the pass stops there."""
    from services.core.scheduling import explain
    from services.core.scheduling.session import Session

    nodes = 120
    inventory = {"nodes": [{"name": f"p{i:03}", "cpu": 4, "memory": "8Gi"} for i in range(nodes)]}
    low = "".join(f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: low-{i:03}}}
spec:
  nodeName: p{i:03}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "3"}}}}}}]
status: {{phase: Running}}""" for i in range(nodes))  # fmt: skip
    docs = PODS.replace("metadata: {name: low}\nspec:\n", "metadata: {name: low}\nspec:\n  nodeName: p000\n") + low
    asked: list[str] = []
    real = Session.predicate_for_preempt

    def counted(self: Session, task: Any, node: Any) -> Any:
        asked.append(node.name)
        return real(self, task, node)

    monkeypatch.setattr(Session, "predicate_for_preempt", counted)
    hi = verdicts(DEFAULT_CONF, docs, inventory)["hi"]
    assert "preemption is off" in hi.unblock and "(and " in hi.unblock  # named some, said there are more
    assert 0 < len(asked) <= 64  # per session that explained it; the default conf has no preempt
    assert len(set(asked)) <= explain.ROOM_TRIES
