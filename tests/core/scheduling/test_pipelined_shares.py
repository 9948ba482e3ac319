"""A pipelined task counts against its queue in the session, as Volcano's `Statement.Pipeline`
fires every plugin's AllocateFunc (proportion's and capacity's `allocated`); capacity's enqueue
takes the queue's elastic part off (minResources + allocated + inqueue − elastic), as Volcano's
`jobEnqueueable`; and every queue's guarantee is set aside, a queue without jobs too.

Uncounted, preempt pipelined a gang's pods one at a time, each finding its queue's share as
before the last: one victim per session, whose freed card the next session's allocate gave
straight back to the victim's job — an endless loop of evictions while the high-priority gang
never ran (a user review: 20 evictions at one instant on one 8-card node). And the simulator,
which stops after `MAX_SESSIONS_PER_INSTANT` sessions at one instant, says so when it does.
"""

from __future__ import annotations

import msgspec
import pytest

from contracts.events import EvictionRequested, JobUnschedulable, PlacementProposed
from services.core.devices import build_vendors
from services.core.scheduling.config import parse_conf
from services.core.scheduling.record import configured
from services.core.simulate import engine
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.simulate.report import build_report
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser

CARD = "huawei.com/Ascend910B3"
INVENTORY = {"nodes": [{"name": "node-a", "devices": [{"type": "Ascend910B3", "count": 8}]}]}


def conf(queue_plugin: str, actions: str = "enqueue, allocate, backfill, preempt") -> str:
    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: {queue_plugin}
  - name: nodeorder
  - name: deviceshare
"""


HIERARCHICAL = conf("capacity\n    enableHierarchy: true", "enqueue, allocate, backfill, reclaim")


def queue_doc(name: str, spec: str) -> str:
    return f"{{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {{name: {name}}}, spec: {{{spec}}}}}"


def job_doc(name: str, queue: str, replicas: int, min_available: int = 1, at: float = 0, pc: str = "") -> str:
    """A Volcano Job of `replicas` one-card pods arriving at `at` (virtual seconds), its pods of
    PriorityClass `pc` when given."""
    klass = f"priorityClassName: {pc}, " if pc else ""
    return (f"{{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {{name: {name}, annotations: "
            f"{{tessera.io/arrive-at: '{at:g}'}}}}, spec: {{minAvailable: {min_available}, queue: {queue}, "
            f"tasks: [{{name: w, replicas: {replicas}, template: {{spec: {{{klass}containers: [{{name: c, "
            f"image: x, resources: {{limits: {{{CARD}: '1'}}}}}}]}}}}}}]}}}}")  # fmt: skip


def workload(low_replicas: int = 6) -> str:
    """A queue capped at 6 cards; a low-priority elastic job (minAvailable 1) takes them, then a
    high-priority gang of 2 arrives in the same queue (2 cards of the node stay free)."""
    job = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, annotations: {{tessera.io/arrive-at: "{at}"}}}}
spec:
  minAvailable: {min}
  queue: team
  priorityClassName: {pc}
  tasks:
  - name: w
    replicas: {replicas}
    template:
      spec:
        priorityClassName: {pc}
        containers: [{{name: c, image: x, resources: {{limits: {{{card}: "1"}}}}}}]
"""
    return "\n---\n".join([
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: 10}",
        "{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}",
        f"{{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {{name: team}}, "
        f"spec: {{capability: {{{CARD}: '6'}}, deserved: {{{CARD}: '6'}}}}}}",
        job.format(name="lowjob", at=0, min=1, pc="low", replicas=low_replicas, card=CARD),
        job.format(name="hijob", at=10, min=2, pc="high", replicas=2, card=CARD),
    ])  # fmt: skip


def simulate(conf_text: str, docs: str) -> engine.Simulation:
    reg = build_vendors()
    work = admit(load_documents(docs), hami_parser(reg), reg.resource_names())
    assert not work.rejections, [r.message() for r in work.rejections]
    sim = load_simulation(parse_conf(conf_text), reg, load_inventory(INVENTORY, reg.catalogue), work,
                          config=configured(conf_text, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    return sim


@pytest.mark.parametrize("queue_plugin", ["proportion", "capacity"])
def test_a_gang_preempting_in_its_capped_queue_takes_one_victim_per_pod_and_runs(queue_plugin: str) -> None:
    sim = simulate(conf(queue_plugin), workload())
    evictions = [m for m in sim.log.messages() if m.headers.get("Tessera-Type") == "EvictionRequested"]
    victims = [msgspec.json.decode(m.data, type=EvictionRequested) for m in evictions]
    pods = {p["name"]: p["phase"] for p in build_report(sim.log.messages())["pods"]}
    assert [(v.name, v.for_job) for v in victims] == [("lowjob", "default/hijob")] * 2
    assert pods["hijob-w-0"] == pods["hijob-w-1"] == "Running"
    assert sum(phase == "Running" for name, phase in pods.items() if name.startswith("lowjob")) == 4
    assert sim.unsettled == []


def test_the_simulator_says_when_it_stopped_at_an_instant_unsettled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions are needed at t=10 (preempt, then the gang's allocate): allowed one per
    instant, the run moves on and records the instant."""
    monkeypatch.setattr(engine, "MAX_SESSIONS_PER_INSTANT", 1)
    sim = simulate(conf("proportion"), workload())
    assert 10.0 in sim.unsettled


def test_capacity_admits_a_gang_its_queue_holds_elastically_and_says_elastic_when_it_does_not() -> None:
    """lowjob holds 6 of the queue's 6 cards with minAvailable 1: 5 of them are elastic, so a
    gang of 2 fits the enqueue check (2 + 6 + 0 − 5 ≤ 6). A gang of 7 does not, and its words
    count the elastic part in."""
    sim = simulate(conf("capacity"), workload())
    pods = {p["name"]: p["phase"] for p in build_report(sim.log.messages())["pods"]}
    assert pods["hijob-w-0"] == "Running"
    big = workload().replace("minAvailable: 2", "minAvailable: 7").replace("replicas: 2", "replicas: 7")
    sim = simulate(conf("capacity"), big)
    verdicts = [msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    assert verdicts and verdicts[-1].name == "hijob"
    assert "minResources 7 + allocated 6 + inqueue 0 − elastic 5 exceeds its capability 6" in verdicts[-1].why


def test_a_queue_without_jobs_keeps_its_guarantee() -> None:
    """Volcano's proportion sums every queue's guarantee (ssn.Queues): another queue's jobs
    get the cluster less what an idle queue is guaranteed."""
    docs = "\n---\n".join([
        queue_doc("qg", f"weight: 1, guarantee: {{resource: {{{CARD}: '4'}}}}"),
        queue_doc("qb", "weight: 1"),
        job_doc("jb", "qb", 8),
    ])  # fmt: skip
    sim = simulate(conf("proportion"), docs)
    phases = [p["phase"] for p in build_report(sim.log.messages())["pods"]]
    assert phases.count("Running") == 4 and phases.count("Pending") == 4


def test_reclaim_under_a_parents_capability_evicts_the_sibling_over_its_deserved() -> None:
    """Hierarchical capacity: eng (capability 4) holds eng-a and eng-b (deserved 2 each). ja
    in eng-a takes all 4 (minAvailable 1); jb (gang of 2) arrives in eng-b. The node has 4
    free cards but eng has none: reclaim must evict ja's pods over eng-a's deserved until
    eng-b's queue can take the task — fitting the node alone, it evicted nothing and left jb
    pipelined on cards its queue could never take."""
    docs = "\n---\n".join([
        queue_doc("eng", f"capability: {{{CARD}: '4'}}, deserved: {{{CARD}: '4'}}"),
        queue_doc("eng-a", f"parent: eng, deserved: {{{CARD}: '2'}}"),
        queue_doc("eng-b", f"parent: eng, deserved: {{{CARD}: '2'}}"),
        job_doc("ja", "eng-a", 6),
        job_doc("jb", "eng-b", 2, min_available=2, at=10),
    ])  # fmt: skip
    sim = simulate(HIERARCHICAL, docs)
    evictions = [msgspec.json.decode(m.data, type=EvictionRequested) for m in sim.log.messages()
                 if m.headers.get("Tessera-Type") == "EvictionRequested"]  # fmt: skip
    pods = {p["name"]: p["phase"] for p in build_report(sim.log.messages())["pods"]}
    assert [(e.name, e.reason) for e in evictions] == [("ja", "reclaim")] * 2
    assert pods["jb-w-0"] == pods["jb-w-1"] == "Running"
    assert sum(phase == "Running" for name, phase in pods.items() if name.startswith("ja-")) == 2
    # before jb came, ja's waiting pods were held by eng's capability, not one eng-a has (a
    # child's above its parent's is refused): the words name eng
    first = next(msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                 if m.headers.get("Tessera-Type") == "JobUnschedulable")  # fmt: skip
    assert first.name == "ja" and first.why.startswith("queue eng: Ascend910B3 1 requested, capability 4, allocated 4")
    assert first.unblock.startswith("raise queue eng's capability of Ascend910B3 to 5")


def test_a_child_held_by_what_its_parent_leaves_it_is_told_to_look_at_the_parent() -> None:
    """eng (capability 4) guarantees eng-b 2: eng-a, with no capability of its own, may have 2.
    ja's third pod waits on eng-a's inherited 2 while eng itself holds 2 of 4: raising eng-a's
    capability is no fix (it is not eng-a's setting)."""
    docs = "\n---\n".join([
        queue_doc("eng", f"capability: {{{CARD}: '4'}}"),
        queue_doc("eng-a", "parent: eng"),
        queue_doc("eng-b", f"parent: eng, guarantee: {{resource: {{{CARD}: '2'}}}}"),
        job_doc("ja", "eng-a", 4),
    ])  # fmt: skip
    sim = simulate(HIERARCHICAL, docs)
    verdict = next(msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                   if m.headers.get("Tessera-Type") == "JobUnschedulable")  # fmt: skip
    assert verdict.why.startswith("queue eng-a: Ascend910B3 1 requested, capability 2, allocated 2"), verdict.why
    assert verdict.unblock.startswith("queue eng-a sets no Ascend910B3 capability of its own: 2 is what "
                                      "queue eng leaves it"), verdict.unblock


def test_a_running_elastic_jobs_waiting_pods_are_told_why() -> None:
    """Weights 1:3 over 8 cards: ja (minAvailable 1 of 8) runs 2 and its queue is then over
    its share, so the session never tries its other 6 — no node failed them. They were left
    without a word (no verdict: "no scheduling session has decided on it yet"); Volcano marks
    every pending task of a job it records, and so does the verdict here."""
    docs = "\n---\n".join([
        queue_doc("qa", "weight: 1"),
        queue_doc("qb", "weight: 3"),
        job_doc("ja", "qa", 8),
        job_doc("jb", "qb", 8),
    ])  # fmt: skip
    sim = simulate(conf("proportion"), docs)
    pods = {p["name"]: p for p in build_report(sim.log.messages())["pods"]}
    assert sum(p["phase"] == "Running" for n, p in pods.items() if n.startswith("ja-")) == 2
    verdicts = [msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    ja = [v for v in verdicts if v.name == "ja"]
    assert ja and ja[-1].reason.startswith("6/8 tasks unschedulable")
    assert "queue qa is overused" in ja[-1].why
    waiting = [p for n, p in pods.items() if n.startswith("ja-") and p["phase"] == "Pending"]
    assert len(waiting) == 6 and all("queue qa is overused" in p["reason"] for p in waiting)


def test_a_parent_counts_its_childrens_admitted_gangs_at_enqueue() -> None:
    """Two gangs of 3 in eng-a and eng-b under eng (capability 4) arrive together: Volcano adds
    an admitted job's minimum to every ancestor's inqueue, so the second is held at enqueue
    (3 + 3 > 4). Counted at the leaf only, both were admitted and the second sat Inqueue on an
    allocate-time refusal (helper-37's review)."""
    docs = "\n---\n".join([
        queue_doc("eng", f"capability: {{{CARD}: '4'}}"),
        queue_doc("eng-a", "parent: eng"),
        queue_doc("eng-b", "parent: eng"),
        job_doc("ja", "eng-a", 3, min_available=3),
        job_doc("jb", "eng-b", 3, min_available=3),
    ])  # fmt: skip
    sim = simulate(HIERARCHICAL, docs)
    admitted = [msgspec.json.decode(m.data, type=PlacementProposed).name for m in sim.log.messages()
                if m.headers.get("Tessera-Type") == "PlacementProposed"]  # fmt: skip
    assert admitted == ["ja"]
    verdicts = [msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                if m.headers.get("Tessera-Type") == "JobUnschedulable"]  # fmt: skip
    assert verdicts and verdicts[-1].name == "jb"
    assert verdicts[-1].why.startswith("queue eng: Ascend910B3 minResources 3 + allocated 0 + inqueue 3 exceeds "
                                      "its capability 4"), verdicts[-1].why


def test_a_leaf_as_tight_as_its_parent_is_not_the_one_told_to_raise() -> None:
    """eng and eng-a both cap at 4: raising eng-a's alone changes nothing (eng still holds it,
    and a child above its parent is refused); the words name eng."""
    docs = "\n---\n".join([
        queue_doc("eng", f"capability: {{{CARD}: '4'}}"),
        queue_doc("eng-a", f"parent: eng, capability: {{{CARD}: '4'}}"),
        job_doc("ja", "eng-a", 6),
    ])  # fmt: skip
    sim = simulate(HIERARCHICAL, docs)
    verdict = next(msgspec.json.decode(m.data, type=JobUnschedulable) for m in sim.log.messages()
                   if m.headers.get("Tessera-Type") == "JobUnschedulable")  # fmt: skip
    assert verdict.why.startswith("queue eng: Ascend910B3 1 requested, capability 4, allocated 4"), verdict.why
    assert verdict.unblock.startswith("raise queue eng's capability of Ascend910B3 to 5"), verdict.unblock
