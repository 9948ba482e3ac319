"""The fix a waiting gang is told names what keeps the scheduler from making room itself, when
it is a setting someone can change: the pods' `preemptionPolicy: Never`, or a queue over its
deserved share that reclaim may not touch (`reclaimable: false`). It said "free 4 cards (their
pods finish or are evicted)" of a job no eviction would ever be made for (a user review)."""

from __future__ import annotations

import msgspec

from contracts.events import JobUnschedulable
from tests.core.scheduling.test_pipelined_shares import conf, job_doc, queue_doc, simulate

CONF = conf("proportion", actions="enqueue, allocate, backfill, preempt, reclaim")


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
        queue_doc("qa", "weight: 1, reclaimable: false"),
        queue_doc("qb", "weight: 1"),
        job_doc("ja", "qa", 8, pc="p"),
        job_doc("jb", "qb", 4, min_available=4, at=10, pc="p"),
    ])  # fmt: skip
    unblock = last_unblock(docs, "jb")
    assert "queue qa holds 4 Ascend910B3 over its deserved share but is not reclaimable" in unblock, unblock


def test_a_job_whose_pods_never_preempt_is_told_so() -> None:
    docs = "\n---\n".join([
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10}",
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: never}, value: 1000, "
        "preemptionPolicy: Never}",
        job_doc("low", "default", 8, pc="low"),
        job_doc("hi", "default", 2, min_available=2, at=10, pc="never"),
    ])  # fmt: skip
    unblock = last_unblock(docs, "hi")
    assert "preemptionPolicy is Never: preempt takes no running pod's cards for them" in unblock, unblock
