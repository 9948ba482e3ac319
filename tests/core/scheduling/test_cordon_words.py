"""A cordoned node (`spec.unschedulable`, held as the node.kubernetes.io/unschedulable taint) is
refused in kube-scheduler's NodeUnschedulable words, which Volcano's predicates check before
node affinity and taints: it read as an untolerated taint; a pod tolerating the taint may go."""

from __future__ import annotations

import dataclasses

from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.decide import decide
from tests.core.scheduling.scenarios import Scenario, _simulation, check_core, run_core

CORDONED = {"name": "n1", "cpu": 4, "memory": "8Gi",
            "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}  # fmt: skip
POD = ("{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}, spec: {containers:"
       " [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]%s}}")  # fmt: skip


def scenario(tolerations: str, expect: dict) -> Scenario:
    return Scenario("inline", "cordon", DEFAULT_CONF, {"nodes": [CORDONED]}, POD % tolerations, expect)


def test_a_cordoned_node_reads_as_unschedulable() -> None:
    sc = scenario("", {"bound": {}, "reasons": {"default/p": "1 node(s) were unschedulable"}})
    check_core(sc, run_core(sc))


def test_a_pod_tolerating_the_cordon_may_go_there() -> None:
    tolerate = ", tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]"
    sc = scenario(tolerate, {"bound": {"default/p": "n1"}})
    check_core(sc, run_core(sc))


def test_a_taint_without_a_value_is_said_as_kube_scheduler_says_it() -> None:
    """kube-scheduler's TaintToleration writes `{key: value}` whatever the value: a taint
    without one reads `{gpu: }` (it read `{gpu}`, which an alert rule for kube's words missed)."""
    tainted = {"name": "n1", "cpu": 4, "memory": "8Gi", "taints": [{"key": "gpu", "effect": "NoSchedule"}]}
    sc = Scenario("inline", "taint", DEFAULT_CONF, {"nodes": [tainted]}, POD % "", {})
    (u,) = run_core(sc).decisions.unschedulable
    assert u.node_reasons == {"n1": "node(s) had untolerated taint {gpu: }"}, u.node_reasons
    # a log recorded before rules generation 2 re-runs with the words it ran with
    sim = _simulation(sc, cycles=0)
    sim.run()
    older = dataclasses.replace(parse_conf(sc.conf), rules=1)
    (u,) = decide(sim.projection.snapshot(), older).unschedulable
    assert u.node_reasons == {"n1": "node(s) had untolerated taint {gpu}"}, u.node_reasons
