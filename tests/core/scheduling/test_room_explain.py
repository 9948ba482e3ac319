"""The fix a waiting gang is told names what keeps the scheduler from making room itself, when
it is a setting someone can change: the pods' `preemptionPolicy: Never`, or a queue over its
deserved share that reclaim may not touch (`reclaimable: false`). It said "free 4 cards (their
pods finish or are evicted)" of a job no eviction would ever be made for (a user review)."""

from __future__ import annotations

import msgspec

from contracts.events import JobUnschedulable
from tests.core.scheduling.test_pipelined_shares import CARD, simulate

CONF = """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
"""
JOB = ("{{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {{name: {name}, annotations: "
       "{{tessera.io/arrive-at: '{at}'}}}}, spec: {{minAvailable: {min}, queue: {queue}, tasks: [{{name: w, "
       "replicas: {n}, template: {{spec: {{priorityClassName: {pc}, containers: [{{name: c, image: x, "
       "resources: {{limits: {{{card}: '1'}}}}}}]}}}}}}]}}}}")  # fmt: skip


def last_unblock(docs: str, job: str) -> str:
    sim = simulate(CONF, docs)
    verdicts = [msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    mine = [v for v in verdicts if v.name == job]
    assert mine, [v.name for v in verdicts]
    return mine[-1].unblock


def test_a_queue_over_its_share_that_is_not_reclaimable_is_named() -> None:
    docs = "\n---\n".join([
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: p}, value: 1}",
        "{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: qa}, spec: {weight: 1, reclaimable: false}}",
        "{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: qb}, spec: {weight: 1}}",
        JOB.format(name="ja", at=0, min=1, queue="qa", n=8, pc="p", card=CARD),
        JOB.format(name="jb", at=10, min=4, queue="qb", n=4, pc="p", card=CARD),
    ])  # fmt: skip
    unblock = last_unblock(docs, "jb")
    assert "queue qa holds 4 Ascend910B3 over its deserved share but is not reclaimable" in unblock, unblock


def test_a_job_whose_pods_never_preempt_is_told_so() -> None:
    docs = "\n---\n".join([
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10}",
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: never}, value: 1000, "
        "preemptionPolicy: Never}",
        JOB.format(name="low", at=0, min=1, queue="default", n=8, pc="low", card=CARD),
        JOB.format(name="hi", at=10, min=2, queue="default", n=2, pc="never", card=CARD),
    ])  # fmt: skip
    unblock = last_unblock(docs, "hi")
    assert "preemptionPolicy is Never: preempt takes no running pod's cards for them" in unblock, unblock
