"""Volcano's `cdp` (cooldown protection): a running pod labelled or annotated
`volcano.sh/cooldown-time` is no victim until that long after it started, so an elastic job's
pods brought back are not preempted again at once. The start is the log's (`TaskStarted.at`),
kept across a snapshot of the projection; the clock is the session's."""

from __future__ import annotations

import dataclasses

import msgspec

from contracts.events import (
    JobSubmitted,
    NodeRegistered,
    PlacementCommitted,
    QueueCreated,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, QueueSpec, TaskSpec
from services.core.scheduling import record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.projection_state import projection_of, state_of
from tests.core.scheduling.scenarios import PREEMPT_CONF

CONF = parse_conf(PREEMPT_CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: cdp\n"))
STARTED = 1000.0


def job(name: str, priority: int, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> JobSpec:  # fmt: skip
    task = TaskSpec(name="main", replicas=1, cpu_milli=2000, min_available=1, labels=labels or {},
                    annotations=annotations or {})  # fmt: skip
    return JobSpec(namespace="default", name=name, kind="PodGroup", min_available=1, tasks=(task,),
                   priority=priority)  # fmt: skip


def cluster(*lows: JobSpec) -> st.ClusterProjection:
    """One 2-cpu node per low-priority job, each filled by its pod (started at STARTED), and an
    urgent job that needs one of them."""
    p, seq = st.ClusterProjection(), 0

    def add(*events: object) -> None:
        nonlocal seq
        for e in events:
            seq += 1
            p.apply(seq, e)  # type: ignore[arg-type]

    add(QueueCreated(spec=QueueSpec(name="default")))
    for i, low in enumerate(lows):
        node, pod = f"n{i}", f"{low.name}-main-0"
        add(NodeRegistered(node=node, cpu_milli=2000, memory_mib=4096), JobSubmitted(spec=low),
            PlacementCommitted(namespace="default", name=low.name, placements=(TaskPlacement(task=pod, node=node),)),
            TaskStarted(namespace="default", name=low.name, task=pod, node=node, at=STARTED))  # fmt: skip
    add(JobSubmitted(spec=job("urgent", 1000)))
    return p


def evicted(p: st.ClusterProjection, now: float) -> list[str]:
    snap = dataclasses.replace(p.snapshot(), now=now)
    return sorted(e.name for e in decide(snap, CONF).evictions)


def test_a_pod_in_its_cooldown_time_is_no_victim_until_it_has_passed() -> None:
    p = cluster(job("cool", 10, labels={st.COOLDOWN_TIME: "10m"}))
    assert evicted(p, STARTED + 599) == []
    assert evicted(p, STARTED + 600) == ["cool"]


def test_the_victim_is_the_pod_out_of_its_cooldown() -> None:
    """Of two equal victims, the protected one is spared (by annotation, as a Volcano Job's
    annotation reaches its pods); the other goes even though the protected one comes first."""
    p = cluster(job("a-cool", 10, annotations={st.COOLDOWN_TIME: "1h"}), job("b-plain", 10))
    assert evicted(p, STARTED + 60) == ["b-plain"]


def test_the_start_survives_a_restored_projection_and_leaves_with_the_pod() -> None:
    p = cluster(job("cool", 10, labels={st.COOLDOWN_TIME: "90s"}))
    assert p.started == {"default/cool/cool-main-0": STARTED}
    again = projection_of(msgspec.msgpack.decode(msgspec.msgpack.encode(state_of(p)), type=type(state_of(p))))
    assert evicted(again, STARTED + 30) == [] and evicted(again, STARTED + 90) == ["cool"]
    p.apply(99, TaskFinished(namespace="default", name="cool", task="cool-main-0", node="n0", exit_code=0))
    assert p.started == {}


def test_without_a_cooldown_nothing_is_kept_and_the_session_inputs_are_as_before() -> None:
    """Pods without the label leave no start time: the session records of logs without
    cooldown pods keep their input digests (no `started` input)."""
    p = cluster(job("plain", 10))
    assert p.started == {} and evicted(p, STARTED) == ["plain"]
    digests = record.input_digests(p.snapshot(), record.configured())
    assert "started" not in digests


def test_an_invalid_duration_protects_nothing() -> None:
    p = cluster(job("odd", 10, labels={st.COOLDOWN_TIME: "ten minutes"}))
    assert evicted(p, STARTED + 1) == ["odd"]


def test_the_waiting_job_is_told_which_pod_cools_down() -> None:
    p = cluster(job("cool", 10, labels={st.COOLDOWN_TIME: "10m"}))
    words = {u.name: u.unblock for u in decide(dataclasses.replace(p.snapshot(), now=STARTED + 1), CONF).unschedulable}
    assert "preemption held back: cool-main-0 is within its cooldown time (volcano.sh/cooldown-time: 10m" \
        in words["urgent"], words  # fmt: skip


def test_the_decisions_say_when_the_first_cooldown_ends() -> None:
    """Until then the same cluster is decided the same (the scheduler opens no session on an
    unchanged log before it); once it has passed, no time rule is left to wait for."""
    p = cluster(job("long", 10, labels={st.COOLDOWN_TIME: "1h"}), job("short", 10, labels={st.COOLDOWN_TIME: "10m"}))

    def revisit(now: float) -> float | None:
        return decide(dataclasses.replace(p.snapshot(), now=now), CONF).revisit_at

    assert revisit(STARTED + 1) == revisit(STARTED + 599) == STARTED + 600
    assert revisit(STARTED + 600) == STARTED + 3600  # short may be taken now, long still cools
    assert revisit(STARTED + 3600) is None
    plain = cluster(job("plain", 10))
    assert decide(dataclasses.replace(plain.snapshot(), now=STARTED), CONF).revisit_at is None


def test_a_job_held_for_its_refused_pods_takes_no_victim_until_its_retry() -> None:
    """A job whose pods the API server refused (its tasks given back, `Refused.until`) is no
    preemptor either: its pods cannot be made, so a victim's cards would go to nothing — every
    retry evicted another job's pod (under Volcano a job with no pods preempts nothing)."""
    p = cluster(job("plain", 10))
    held = {"default/urgent": st.Refused(until=STARTED + 10, held="pods refused")}

    def victims(now: float) -> list[str]:
        snap = dataclasses.replace(p.snapshot(), now=now, refused=held)
        return sorted(e.name for e in decide(snap, CONF).evictions)

    assert victims(STARTED + 9) == []
    assert victims(STARTED + 10) == ["plain"]
