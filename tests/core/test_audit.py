"""The chaos suite's judge: a sound log passes, and each invariant it checks catches its breach."""

from __future__ import annotations

from contracts.base import Event
from contracts.devices import CardUsage, OwnedSlice
from contracts.events import (
    CardRegistered,
    JobSubmitted,
    PlacementCommitted,
    SliceAssignment,
    SliceReleased,
    SliceReserved,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.core.audit import audit
from services.core.ledger import usage_of
from tests.allocator.scenario import VIR05, WHOLE, ascend_node

NODE = ascend_node("n", cards=2)
CARDS = [c.uuid for c in NODE.cards]


def usage(*owned: tuple[str, object]) -> CardUsage:
    return usage_of(tuple(OwnedSlice(owner=o, slice=s) for o, s in owned), healthy=True, retired=False)  # type: ignore[arg-type]


def submitted(job: str, replicas: int = 1, min_available: int = 1) -> JobSubmitted:
    return JobSubmitted(spec=JobSpec(namespace="ns", name=job, min_available=min_available,
                                     tasks=(TaskSpec(name="w", replicas=replicas),)))  # fmt: skip


def reserve(card: int, owner: str, s: object = VIR05, *held: tuple[str, object]) -> SliceReserved:
    return SliceReserved(card=CARDS[card], node="n", owner=owner, slice=s,  # type: ignore[arg-type]
                         usage=usage(*held, (owner, s)))  # fmt: skip


def release(card: int, owner: str, *rest: tuple[str, object]) -> SliceReleased:
    return SliceReleased(card=CARDS[card], node="n", owner=owner, usage=usage(*rest))


def commit(job: str, *tasks: tuple[str, int], s: object = VIR05) -> PlacementCommitted:
    return PlacementCommitted(namespace="ns", name=job, placements=tuple(
        TaskPlacement(task=t, node="n", slices=(SliceAssignment(card=CARDS[c], node="n", slice=s),))  # type: ignore[arg-type]
        for t, c in tasks))  # fmt: skip


def start(job: str, task: str) -> TaskStarted:
    return TaskStarted(namespace="ns", name=job, task=task, node="n")


def finish(job: str, task: str) -> TaskFinished:
    return TaskFinished(namespace="ns", name=job, task=task, node="n")


def registered() -> list[Event]:
    return [NODE, *(CardRegistered(card=c, usage=CardUsage()) for c in NODE.cards)]


def run_of(job: str = "a") -> list[Event]:
    return [submitted(job), reserve(0, f"ns/{job}/w-0"), commit(job, ("w-0", 0)),
            start(job, "w-0"), finish(job, "w-0"), release(0, f"ns/{job}/w-0")]  # fmt: skip


def judged(events: list[Event], pods: list[dict] | None = None):  # type: ignore[no-untyped-def]
    return audit(enumerate(events, 1), pods or [])


def test_a_sound_log_passes() -> None:
    f = judged([*registered(), *run_of("a"), *run_of("a")],
               [{"namespace": "ns", "name": "a", "phase": "Succeeded", "reason": ""}])  # fmt: skip
    assert f.clean, (f.broken, f.unsettled)
    assert f.commits == 2 and f.starts == 2


def test_a_card_over_capacity_at_any_sequence() -> None:
    big = [reserve(0, "ns/a/w-0", WHOLE), reserve(0, "ns/b/w-0", VIR05, ("ns/a/w-0", WHOLE))]
    f = judged([*registered(), *big, release(0, "ns/b/w-0", ("ns/a/w-0", WHOLE))])
    assert any("over capacity" in b and "exclusive" in b for b in f.broken), f.broken


def test_a_carried_usage_that_is_not_the_history() -> None:
    lying = SliceReserved(card=CARDS[0], node="n", owner="ns/a/w-0", slice=VIR05, usage=CardUsage())
    assert any("carried usage" in b for b in judged([*registered(), lying]).broken)


def test_a_gang_below_its_min_available() -> None:
    events = [*registered(), submitted("g", 2, 2), reserve(0, "ns/g/w-0"), commit("g", ("w-0", 0))]
    assert any("gang ns/g: 1 pods placed, minAvailable 2" in b for b in judged(events).broken)


def test_a_commit_without_its_ledger_writes() -> None:
    f = judged([*registered(), submitted("a"), commit("a", ("w-0", 1))])
    assert any("not on its ledger" in b for b in f.broken)


def test_committed_twice_in_one_run() -> None:
    events = [*registered(), submitted("a"), reserve(0, "ns/a/w-0"), commit("a", ("w-0", 0)),
              commit("a", ("w-0", 0))]  # fmt: skip
    assert any("committed again in one run" in b for b in judged(events).broken)


def test_started_twice_or_without_a_commit() -> None:
    twice = [*registered(), *run_of("a")[:4], start("a", "w-0")]
    assert any("started twice" in b for b in judged(twice).broken)
    assert any("without a commit" in b for b in judged([start("a", "w-0")]).broken)


def test_pods_must_end_or_wait_with_a_reason() -> None:
    pods = [{"namespace": "ns", "name": "p", "phase": "Pending", "reason": ""},
            {"namespace": "ns", "name": "q", "phase": "Bound", "reason": ""},
            {"namespace": "ns", "name": "r", "phase": "Pending", "reason": "0/2 nodes fit"}]  # fmt: skip
    f = judged([], pods)
    assert f.unsettled == ["pod ns/p: Pending without a reason", "pod ns/q: Bound"]


def test_ledgers_must_hold_exactly_the_running_slices() -> None:
    leaked = [*registered(), *run_of("a")[:5]]  # finished, never released
    assert judged(leaked).unsettled == [f"card {CARDS[0]}: slice of ns/a/w-0 held, the pod does not run"]
    lost = [*registered(), *run_of("a")[:4], release(0, "ns/a/w-0")]  # released while running
    assert judged(lost).unsettled == [f"card {CARDS[0]}: running ns/a/w-0 holds no slice there"]


def test_a_pod_that_ended_ending_again() -> None:
    """A lagging node monitor's "node lost" written after the pod's own exit 0: the pod turned
    Failed though it had Succeeded, and the audit said nothing. A terminal phase is final; a
    restart's end (back to Pending) and a new run's end are not a second end."""
    lost = TaskFinished(namespace="ns", name="a", task="w-0", node="n", exit_code=-1, reason="node lost")
    f = judged([*registered(), *run_of("a"), lost])
    assert [b for b in f.broken if "ended again" in b] == [
        "#10: ns/w-0 ended again after its end at #8 (exit code -1, node lost): "
        "a pod in a terminal phase changed phase"]  # fmt: skip
    restarted = TaskFinished(namespace="ns", name="a", task="w-0", node="", reason="restarted")
    again = [reserve(0, "ns/a/w-0"), commit("a", ("w-0", 0)), start("a", "w-0"), finish("a", "w-0")]
    f = judged([*registered(), *run_of("a"), restarted, *again, release(0, "ns/a/w-0")])
    assert f.clean, (f.broken, f.unsettled)
