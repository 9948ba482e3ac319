"""What `get`, `describe`, `simulate` and the scheduler's gauges say of a cluster as a platform
lead moving from Volcano reads it (review rev-preempt findings 1, 3, 4, 7): two nodes of 8
Ascend910B3, Volcano's Helm-chart tiers (no deviceshare), reclaim between queues."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from contracts.events import TaskPlacement
from contracts.subjects import Subjects
from services.cli.describe import describe
from services.cli.get import columns_of, listing_of, node_events
from services.cli.main import main
from services.core.observe.volcano import session_series
from services.core.scheduling import record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PIPELINES_END, parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Decisions, JobPlacement, Unschedulable
from services.core.scheduling.lifecycle import gang_broken, podgroup_shown
from services.core.scheduling.verify import decoded, verify
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Entry, StoredMessage

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "replay" / "rules1" / "pipeline-kept.jsonl"

INVENTORY = """
nodes:
  - {name: node-a, cpu: 192, memory: 1536Gi, devices: [{type: Ascend910B3, count: 8}]}
  - {name: node-b, cpu: 192, memory: 1536Gi, devices: [{type: Ascend910B3, count: 8}]}
"""


def _conf(share: str) -> str:
    """Volcano's Helm-chart tiers with `share` (proportion, or capacity with hierarchy)."""
    return f"""actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - {share}
  - name: nodeorder
  - name: binpack
"""


HELM = _conf("name: proportion")
HIER = _conf("{name: capacity, enableHierarchy: true}")
DEVICESHARE = HELM + "  - name: deviceshare\n"


def _queue(name: str, spec: str) -> str:
    return f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def _job(name: str, queue: str, replicas: int, min_available: int, at: int = 0) -> str:
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}
  annotations: {{tessera.io/arrive-at: "{at}"}}
spec:
  schedulerName: volcano
  queue: {queue}
  minAvailable: {min_available}
  tasks:
  - name: w
    replicas: {replicas}
    template:
      spec:
        restartPolicy: Never
        containers:
        - {{name: c, image: x, resources: {{limits: {{huawei.com/Ascend910B3: "1", cpu: "8", memory: 64Gi}}}}}}
"""


#: eng{12} ⊃ training{8}, inference{4}; research{4}: research takes all 16 cards, training
#: reclaims 8 at t=60, inference 4 of training's at t=120 — and one of those goes back to
#: training's evicted pod, not to the inference pod pipelined on it
HIERARCHY = "---\n".join([
    _queue("eng", "{weight: 1, deserved: {huawei.com/Ascend910B3: '12'}}"),
    _queue("training", "{weight: 1, parent: eng, deserved: {huawei.com/Ascend910B3: '8'}}"),
    _queue("inference", "{weight: 1, parent: eng, deserved: {huawei.com/Ascend910B3: '4'}}"),
    _queue("research", "{weight: 1, deserved: {huawei.com/Ascend910B3: '4'}}"),
    _job("res", "research", 16, 1), _job("tr", "training", 8, 1, 60), _job("inf", "inference", 4, 1, 120),
])  # fmt: skip

#: two training gangs of 8 (minAvailable 8) fill the cluster; an inference burst of 4 reclaims
#: half of train-a (Volcano's tiers let it: see the review's finding 2)
GANG_CUT = "---\n".join([
    _queue("training", "{weight: 1, reclaimable: true}"), _queue("inference", "{weight: 1}"),
    _job("train-a", "training", 8, 8), _job("train-b", "training", 8, 8),
    _job("infer-burst", "inference", 4, 4, 60),
])  # fmt: skip


def _simulate(tmp_path: Path, conf: str, workload: str, until: int = 300) -> list[StoredMessage]:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "conf.yaml").write_text(conf)
    (tmp_path / "w.yaml").write_text(workload)
    log = tmp_path / "ev.jsonl"
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--scheduler-conf", str(tmp_path / "conf.yaml"),
                 "--workload", str(tmp_path / "w.yaml"), "--until", str(until), "--events", str(log),
                 "--report", str(tmp_path / "r.json"), "-o", "json"]) == 0  # fmt: skip
    return read_jsonl(log)


def _pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def _projection(messages: list[StoredMessage]) -> st.ClusterProjection:
    projection = st.ClusterProjection()
    for seq, _headers, ev in decoded(messages)[0]:
        projection.apply(seq, ev)
    return projection


# --- finding 1: a pipelined reservation lasts one session -----------------------------------


def test_a_pod_pipelined_on_room_another_pod_took_waits_again(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HIER, HIERARCHY)
    # the scenario: inf-w-3 was pipelined on node-a, then a later session placed the rest of
    # its job and left it out (its card went to training's evicted pod)
    proposals = [json.loads(m.data) for m in messages if m.headers.get("Tessera-Type") == "PlacementProposed"]
    of_inf = [{p["task"] for p in e["placements"]} for e in proposals if e["name"] == "inf"]
    assert any("inf-w-3" in tasks for tasks in of_inf) and "inf-w-3" not in of_inf[-1]
    pod = _pods(build_report(messages))["inf-w-3"]
    assert pod["phase"] == "Pending" and pod["node"] is None  # was: Pipelined on node-a, for good
    assert "free 0 of 8" in pod["reason"] or "Insufficient" in pod["reason"]
    assert build_report(messages)["metrics"]["pods_by_phase"].get("Pipelined", 0) == 0
    verdict = verify(decoded(messages)[0])  # the sessions that said so re-run to the same events
    assert verdict.ok and verdict.decisions > 0


def test_a_pipelined_pod_later_sessions_keep_reserving_stays_pipelined(tmp_path: Path) -> None:
    """The end of a reservation is only where a later session leaves it out: inference's gang
    pipelined behind reclaim, with nothing placed in between, reads Pipelined."""
    workload = "---\n".join([
        _queue("training", "{weight: 1, reclaimable: true}"), _queue("inference", "{weight: 1}"),
        _job("train", "training", 16, 1), _job("infer", "inference", 4, 4, 60),
    ])  # fmt: skip
    messages = _simulate(tmp_path, HELM, workload, until=60)
    report = build_report(messages)
    verdict = verify(decoded(messages)[0])
    assert verdict.ok
    pods = _pods(report)
    # whatever the sessions decided, no pod reads Pipelined unless the last decision on its job
    # reserved it: each pipelined pod is in its job's last proposal
    last: dict[str, set[str]] = {}
    for m in messages:
        if m.headers.get("Tessera-Type") in ("PlacementProposed", "JobUnschedulable"):
            e = json.loads(m.data)
            last[e["name"]] = {p["task"] for p in e.get("placements", [])}
    for name, p in pods.items():
        if p["phase"] == "Pipelined":
            assert name in last[p["job"]]


def test_a_log_of_the_older_rules_verifies_and_reads_as_it_did() -> None:
    """The review's own log (generation 1): replay re-runs it by its rules, and its report
    keeps what those rules' events say (no session of it said the pipeline ended)."""
    messages = read_jsonl(FIXTURE)
    stored = decoded(messages)[0]
    assert {e.rules for _, _, e in stored if type(e).__name__ == "SchedulerConfigured"} == {PIPELINES_END - 1}
    verdict = verify(stored)
    assert verdict.ok and verdict.decisions > 0
    assert main(["replay", "--verify", "--from", str(FIXTURE)]) == 0
    assert _pods(build_report(messages))["inf-w-3"]["phase"] == "Pipelined"


# --- finding 3: a gang cut below minAvailable is Unknown ------------------------------------


def test_a_running_gang_cut_below_min_available_shows_its_podgroup_unknown(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HELM, GANG_CUT)
    report = build_report(messages)
    running = [p for p in report["pods"] if p["job"] == "train-a" and p["phase"] == "Running"]
    assert 0 < len(running) < 8  # reclaim cut it (finding 2's mechanism)
    groups, _ = listing_of(messages, "podgroups", None)
    phases = {r["name"].split("-")[0] + "-" + r["name"].split("-")[1]: r["phase"] for r in groups.records}
    assert phases["train-a"] == "Unknown" and phases["train-b"] == "Running"
    queues, _ = listing_of(messages, "queues", None)
    training = next(o for o in queues.objects if o["metadata"]["name"] == "training")["status"]
    assert (training["running"], training["unknown"]) == (1, 1)
    # the scheduler's gauge, over the same state
    projection = _projection(messages)
    snap = projection.snapshot()
    series = session_series(snap, decide(snap, parse_conf(HELM)))
    unknown = {s.labels[0]: s.value for s in series if s.name == "volcano_queue_pod_group_unknown_count"}
    assert unknown["training"] == 1 and unknown["inference"] == 0


def test_unknown_needs_a_running_pod_and_too_few_ready() -> None:
    assert gang_broken(8, [st.RUNNING] * 4 + [st.PENDING] * 4)
    assert not gang_broken(8, [st.RUNNING] * 4 + [st.BOUND] * 4)  # placed, starting
    assert not gang_broken(8, [st.PENDING] * 8)  # never placed: Pending/Inqueue, not Unknown
    assert not gang_broken(1, [st.RUNNING] + [st.PENDING] * 3)  # elastic: at its minimum
    assert podgroup_shown("Running", "Job", 8, [st.RUNNING] * 4 + [st.PENDING] * 4) == "Unknown"
    assert podgroup_shown("Inqueue", "Job", 8, [st.RUNNING] * 4 + [st.PENDING] * 4) == "Inqueue"


# --- finding 4: cards held by count are in use ----------------------------------------------


def _in_memory_log(messages: list[StoredMessage]) -> MemoryLog:
    log = MemoryLog(Subjects("tessera"))

    async def fill() -> None:
        for m in messages:
            await log.append(Entry(m.subject, m.data, dict(m.headers)))

    asyncio.run(fill())
    return log


def test_a_full_cluster_without_deviceshare_reads_full(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HELM, GANG_CUT)
    report = build_report(messages)
    (tmp_path / "ds").mkdir()
    booked = build_report(_simulate(tmp_path / "ds", DEVICESHARE, GANG_CUT))
    assert report["metrics"]["cards_in_use"] == booked["metrics"]["cards_in_use"] == 16  # was 0/16
    assert report["metrics"]["card_memory_allocated_ratio"] == 1.0
    assert {c["held_by_count"] for c in report["cards"]} == {8}
    assert all("held_by_count" not in c for c in booked["cards"])  # deviceshare's rows as they were
    nodes = asyncio.run(node_events(_in_memory_log(messages)))
    assert {n.node.node: n.in_use for n in nodes} == {"node-a": 8, "node-b": 8}  # `get nodes`
    lines = describe("nodes", "node-a", "default", report, messages, Subjects("tessera"), nodes)
    assert lines is not None and any(line.startswith("Cards in use:") and line.endswith("8/8") for line in lines)
    cards, _ = listing_of(messages, "cards", None)
    assert {r["held_by_count"] for r in cards.rows} == {"8/8"}  # `get cards`
    assert "held_by_count" not in columns_of("cards", "table")  # added only for such rows


def test_an_idle_cluster_without_deviceshare_reads_idle(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HELM, _queue("training", "{weight: 1}"))
    report = build_report(messages)
    assert report["metrics"]["cards_in_use"] == 0
    assert {c["held_by_count"] for c in report["cards"]} == {0}


# --- finding 7: DESERVED is the configured plugin's -----------------------------------------


def test_queue_deserved_is_capacitys_when_the_scheduler_runs_capacity(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HIER, HIERARCHY)
    queues = {q["name"]: q for q in build_report(messages)["queues"]}
    card = "huawei.com/Ascend910B3"
    # spec.deserved, as capacity decides by (proportion's water-filling read 6 and 6)
    assert (queues["research"]["deserved"][card], queues["training"]["deserved"][card]) == (4000, 8000)
    snap = _projection(messages).snapshot()
    metrics = decide(snap, parse_conf(HIER)).queue_deserved  # what /metrics reports
    for name in ("research", "training", "inference", "eng"):
        assert queues[name]["deserved"] == dict(metrics[name])


def test_queue_deserved_is_proportions_under_proportion(tmp_path: Path) -> None:
    messages = _simulate(tmp_path, HELM, HIERARCHY.replace("parent: eng, ", ""))
    queues = {q["name"]: q for q in build_report(messages)["queues"]}
    snap = _projection(messages).snapshot()
    metrics = decide(snap, parse_conf(HELM)).queue_deserved
    for name in ("research", "training", "inference"):
        assert queues[name]["deserved"] == dict(metrics[name])


def _events(decisions: Decisions, proposed: dict[str, Any], last: dict[str, str], *, ends: bool) -> list[str]:
    out = record.decision_events(decisions, session=2, mode="simulate", outstanding={}, last_reasons=last,
                                 proposed=proposed, verdicts_by_words=True, pipelines_end=ends)  # fmt: skip
    return [f"{type(e).__name__} {e.name}" for e in out]


def test_a_session_that_ends_a_pipeline_says_so_even_with_an_unchanged_reason() -> None:
    """Session 1 pipelined job a's pod; session 2 reserves nothing for it and finds the same
    reason as before: from generation 2 it records that reason again (the reservation's end),
    and forgets the reservation so the next one is recorded; before, nothing was appended."""
    waits = Unschedulable("default", "a", "1/1 tasks unschedulable: no room")
    last = {"default/a": waits.key}
    reserved = (TaskPlacement(task="a-w-0", node="node-a"),)
    proposed: dict[str, Any] = {"default/a": reserved}
    ended = Decisions(based_on=9, unschedulable=(waits,))
    assert _events(ended, dict(proposed), last, ends=False) == []  # generation 1, as it ran
    assert _events(ended, proposed, last, ends=True) == ["JobUnschedulable a"]
    assert proposed == {}
    # an unchanged reservation renewed while the session records a new reason for the job's
    # other pods is recorded again: the reason alone would read as its end
    proposed = {"default/a": reserved}
    other = Unschedulable("default", "a", "1/2 tasks unschedulable: another reason")
    both = Decisions(based_on=9, placements=(JobPlacement("default", "a", reserved, True),), unschedulable=(other,))
    assert _events(both, dict(proposed), last, ends=False) == ["JobUnschedulable a"]
    assert _events(both, proposed, last, ends=True) == ["PlacementProposed a", "JobUnschedulable a"]
    # one renewed with nothing else said of its job stays left out, as before
    alone = Decisions(based_on=9, placements=(JobPlacement("default", "a", reserved, True),))
    assert _events(alone, {"default/a": reserved}, last, ends=True) == []
