"""What a waiting job is told would unblock it is what would, under the configured plugins (a
platform lead's review of preemption, reclaim and fair share, on two nodes of 8 Ascend 910B3):

- a job its own queue's share holds, in a queue that already deserves every card of the cluster,
  was told "raise its capability or weight" to a deserved larger than the cluster; it is now
  told that no setting gives that, and why preempt makes no room in the queue — the running pods
  are of its own priority, or marked `volcano.sh/preemptable: "false"`;
- under capacity, a queue held by another queue's guarantee (realCapability = cluster − the
  others' guarantees) was told to raise a capability it does not set; it is now told whose
  guarantee holds it and by how much;
- a gang waiting for cards that no eviction frees, with no deviceshare (cards counted whole by
  the node, Volcano's usual Ascend setup), was told "free 1 … on node-a": it now hears the whole
  gang's count, the queue that is over its share but `reclaimable: false`, and gang's rule that
  keeps a job at its minAvailable from reclaim.

Scenario in, the recorded verdict's words out; the facts are asserted, not the paragraphs.
"""

from __future__ import annotations

import msgspec

from contracts.events import EvictionRequested, JobUnschedulable
from services.core.devices import build_vendors
from services.core.scheduling.config import parse_conf
from services.core.scheduling.record import configured
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.story import story
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.runtime.eventlog.model import StoredMessage

CARD = "huawei.com/Ascend910B3"
INVENTORY = {"nodes": [{"name": f"node-{n}", "cpu": 192, "memory": "1536Gi",
                        "devices": [{"type": "Ascend910B3", "count": 8}]} for n in "ab"]}  # fmt: skip


def helm_conf(queue_plugin: str = "proportion", one_tier: bool = False) -> str:
    """Volcano's Helm-chart tiers (no deviceshare: cards are the node's counted scalar), with
    preempt and reclaim; `one_tier`: every plugin in one tier."""
    first = """
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance"""
    second = f"""
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: {queue_plugin}
  - name: nodeorder
  - name: binpack"""
    tiers = f"- plugins:{first}{second}" if one_tier else f"- plugins:{first}\n- plugins:{second}"
    return f'actions: "enqueue, allocate, preempt, reclaim, backfill"\ntiers:\n{tiers}\n'


def priority_class(name: str, value: int) -> str:
    return f"{{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {{name: {name}}}, value: {value}}}"


def queue_doc(name: str, spec: str) -> str:
    return f"{{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {{name: {name}}}, spec: {{{spec}}}}}"


def job_doc(name: str, queue: str, replicas: int, min_available: int, at: float = 0, pc: str = "",
            annotations: str = "") -> str:  # fmt: skip
    """A Volcano Job of `replicas` one-card pods arriving at `at`; `annotations`: its pods'."""
    klass = f"priorityClassName: {pc}, " if pc else ""
    meta = f"metadata: {{annotations: {{{annotations}}}}}, " if annotations else ""
    return (f"{{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {{name: {name}, annotations: "
            f"{{tessera.io/arrive-at: '{at:g}'}}}}, spec: {{minAvailable: {min_available}, queue: {queue}, {klass}"
            f"tasks: [{{name: w, replicas: {replicas}, template: {{{meta}spec: {{restartPolicy: Never, "
            f"containers: [{{name: c, image: x, resources: {{limits: {{{CARD}: '1', cpu: '8', "
            f"memory: 64Gi}}}}}}]}}}}}}]}}}}")  # fmt: skip


def run(conf_text: str, *docs: str, until: float = 300) -> list[StoredMessage]:
    reg = build_vendors()
    work = admit(load_documents("\n---\n".join(docs)), hami_parser(reg), reg.resource_names())
    assert not work.rejections, [r.message() for r in work.rejections]
    sim = load_simulation(parse_conf(conf_text), reg, load_inventory(INVENTORY, reg.catalogue), work,
                          until=until, config=configured(conf_text, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    return sim.log.messages()


def last_verdict(messages: list[StoredMessage], job: str) -> JobUnschedulable:
    verdicts = [msgspec.json.decode(m.data, type=JobUnschedulable) for m in messages
                if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    mine = [v for v in verdicts if v.name == job]
    assert mine, [v.name for v in verdicts]
    return mine[-1]


# --- finding 5: a job its own queue's share holds -------------------------------------------------


def same_queue(high: int, annotations: str = "") -> list[str]:
    """One queue; low-job (priority 10, 16 pods, minAvailable 4) takes all 16 cards; high-job
    (priority `high`, a gang of 4) arrives at 60 s in the same queue."""
    return [priority_class("high", high), priority_class("low", 10), queue_doc("training", "weight: 1"),
            job_doc("low-job", "training", 16, 4, pc="low", annotations=annotations),
            job_doc("high-job", "training", 4, 4, at=60, pc="high")]  # fmt: skip


def test_a_queue_deserving_the_whole_cluster_is_not_told_to_raise_its_share() -> None:
    verdict = last_verdict(run(helm_conf(), *same_queue(high=10)), "high-job")
    assert "deserved 16" in verdict.why and verdict.plugin == "proportion", verdict.why
    assert "raise its capability or weight" not in verdict.unblock, verdict.unblock
    assert "more than the cluster's 16" in verdict.unblock, verdict.unblock
    # the real reason: the running pods are of the job's own priority (priority's rule)
    assert "priority takes only pods of jobs with a lower priority than the job's 10" in verdict.unblock
    assert "default/low-job-w-0" in verdict.unblock and "their jobs' priority is 10" in verdict.unblock


def test_pods_marked_not_preemptable_are_named_for_a_job_its_queue_holds() -> None:
    messages = run(helm_conf(), *same_queue(high=1000, annotations="volcano.sh/preemptable: 'false'"))
    verdict = last_verdict(messages, "high-job")
    assert "raise its capability or weight" not in verdict.unblock, verdict.unblock
    assert "(and 13 more) are marked volcano.sh/preemptable: false" in verdict.unblock, verdict.unblock


def test_a_victim_of_preempt_hears_why_it_does_not_preempt_back() -> None:
    """Its verdict comes from the session that placed the preemptor (its pods not running yet);
    explain's words as a session would give them now name the preemptor's running pods."""
    messages = run(helm_conf(), *same_queue(high=1000))
    evicted = [msgspec.json.decode(m.data, type=EvictionRequested).task for m in messages
               if m.headers.get("Tessera-Type") == "EvictionRequested"]  # fmt: skip
    assert len(evicted) == 4, evicted
    got = story(messages, "pod", evicted[0], fresh=True)
    assert got is not None and "waiting" in got, got
    unblock = got["waiting"]["unblock"]
    assert "raise its capability or weight" not in unblock and "more than the cluster's 16" in unblock, unblock
    assert "default/high-job-w-0" in unblock and "their jobs' priority is 1000" in unblock, unblock


def test_a_queue_under_other_queues_demand_is_still_told_its_weight() -> None:
    """Where the share is split with another queue's demand, weight does move it."""
    docs = [queue_doc("qa", "weight: 1"), queue_doc("qb", "weight: 1"),
            job_doc("a", "qa", 16, 1), job_doc("b", "qb", 16, 1)]  # fmt: skip
    verdict = last_verdict(run(helm_conf(), *docs, until=10), "b")
    assert verdict.unblock.startswith("queue qb must deserve 9 Ascend910B3: raise its weight"), verdict.unblock


# --- finding 6: capacity, a queue held by another queue's guarantee -------------------------------


def test_capacity_names_the_guarantee_that_holds_a_queue_without_capability() -> None:
    docs = [queue_doc("training", f"weight: 1, deserved: {{{CARD}: '12'}}, guarantee: {{resource: {{{CARD}: '12'}}}}"),
            queue_doc("inference", f"weight: 1, deserved: {{{CARD}: '8'}}"),
            job_doc("train", "training", 16, 1), job_doc("infer", "inference", 8, 1, at=60)]  # fmt: skip
    verdict = last_verdict(run(helm_conf("capacity"), *docs), "infer")
    assert verdict.plugin == "capacity", verdict
    assert "capability" not in verdict.unblock, verdict.unblock
    assert "limit 4: the cluster's 16 less the guarantees of other queues (training 12)" in verdict.why, verdict.why
    assert "lower the guarantee of queue training on Ascend910B3 by 1" in verdict.unblock, verdict.unblock


def test_capacity_still_names_a_queues_own_capability_when_it_binds() -> None:
    docs = [queue_doc("training", f"weight: 1, capability: {{{CARD}: '6'}}"), job_doc("train", "training", 8, 1)]
    verdict = last_verdict(run(helm_conf("capacity"), *docs, until=10), "train")
    assert "capability 6, allocated 6 (capacity)" in verdict.why, verdict.why
    assert verdict.unblock.startswith("raise queue training's capability of Ascend910B3 to 7"), verdict.unblock


# --- finding 8: no deviceshare, a wait reclaim cannot resolve --------------------------------------


def test_a_gang_is_told_its_whole_count_and_the_queue_that_is_not_reclaimable() -> None:
    """training (reclaimable: false) runs 16 pods of an elastic job; an inference gang of 4
    arrives: training is 4 over its deserved 12, and reclaim may not touch it."""
    docs = [queue_doc("training", "weight: 1, reclaimable: false"), queue_doc("inference", "weight: 1"),
            job_doc("train-elastic", "training", 16, 4), job_doc("infer-burst", "inference", 4, 4, at=60)]  # fmt: skip
    verdict = last_verdict(run(helm_conf(), *docs), "infer-burst")
    assert verdict.unblock.startswith(f"free 4 {CARD} for the gang: its 4 pods still missing ask 1 each"), verdict.unblock
    assert "free 1 " not in verdict.unblock, verdict.unblock
    assert ("queue training holds 4 Ascend910B3 over its deserved share but is not reclaimable "
            "(spec.reclaimable: false)") in verdict.unblock, verdict.unblock  # fmt: skip


def test_gangs_rule_that_keeps_reclaim_from_a_job_at_its_minavailable_is_named() -> None:
    """gang and proportion in one tier: training's two gangs of 8 at minAvailable 8 are over
    training's share, and gang's reclaimable rule keeps every one of their pods."""
    docs = [queue_doc("training", "weight: 1"), queue_doc("inference", "weight: 1"),
            job_doc("train-a", "training", 8, 8), job_doc("train-b", "training", 8, 8),
            job_doc("infer-burst", "inference", 4, 4, at=60)]  # fmt: skip
    messages = run(helm_conf(one_tier=True), *docs)
    assert not [m for m in messages if m.headers.get("Tessera-Type") == "EvictionRequested"]
    verdict = last_verdict(messages, "infer-burst")
    assert verdict.unblock.startswith(f"free 4 {CARD} for the gang"), verdict.unblock
    assert "gang's rule keeps a job at its minAvailable: reclaim takes only the pods a job has ready beyond it" \
        in verdict.unblock, verdict.unblock
    assert "8 ready, minAvailable 8" in verdict.unblock and "enableReclaimable: false on gang" in verdict.unblock
