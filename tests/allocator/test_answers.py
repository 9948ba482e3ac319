"""The allocator's record of answered proposals is bounded by `--keep-finished` and stays right
after forgetting: an old proposal delivered again is still never committed twice."""

from __future__ import annotations

from contracts.events import JobDeleted, PlacementCommitted, PlacementRejected, TaskFinished
from services.allocator.answers import ANSWERED, OPEN, Answers
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from services.runtime.snapshot import Retention
from tests.allocator.scenario import ascend_node, decoded, proposal, put
from tests.allocator.test_allocator import drain


def _committed(name: str, proposal_seq: int) -> PlacementCommitted:
    placed = proposal(name, "n1", [0]).placements
    return PlacementCommitted(namespace="default", name=name, proposal_seq=proposal_seq, placements=placed)


def test_finished_jobs_fall_out_oldest_first_and_live_ones_stay() -> None:
    a = Answers(keep=2)
    a.apply(1, _committed("live", 0))
    seq = 10
    for i in range(5):
        a.apply(seq, _committed(f"j{i}", seq - 1))
        a.apply(seq + 1, JobDeleted(namespace="default", name=f"j{i}"))
        seq += 10
    assert sorted(a.jobs) == [("default", "j3"), ("default", "j4"), ("default", "live")]
    assert a.verdict("default", "live", 0) == ANSWERED
    assert a.verdict("default", "j0", 9) == OPEN  # forgotten: the commit's OCC check decides


def test_a_forgotten_job_seen_again_without_a_commit_is_not_kept_for_ever() -> None:
    """Late `TaskFinished`s of ended runs arriving after their jobs were forgotten."""
    a = Answers(keep=2)
    for i in range(6):
        a.apply(10 * i + 1, _committed(f"j{i}", 10 * i))
        a.apply(10 * i + 2, JobDeleted(namespace="default", name=f"j{i}"))
    for i in range(6):
        a.apply(100 + i, TaskFinished(namespace="default", name=f"j{i}", task="worker-0", node="n1", exit_code=0))
    assert len(a.jobs) <= 2


def test_a_job_submitted_again_after_forgetting_is_live_and_its_old_releases_stale() -> None:
    a = Answers(keep=1)
    a.apply(2, _committed("j", 1))
    a.apply(3, JobDeleted(namespace="default", name="j"))
    a.apply(5, _committed("k", 4))
    a.apply(6, JobDeleted(namespace="default", name="k"))  # j falls out
    assert ("default", "j") not in a.jobs
    a.apply(8, _committed("j", 7))  # the name runs again
    for i in range(3):
        a.apply(20 + 2 * i, _committed(f"x{i}", 19 + 2 * i))
        a.apply(21 + 2 * i, JobDeleted(namespace="default", name=f"x{i}"))
    assert ("default", "j") in a.jobs
    assert not a.release_applies("default", "j", "worker-0", 3)  # the first run's release
    assert a.release_applies("default", "j", "worker-0", 9)


async def test_a_new_durable_replaying_history_with_little_memory_commits_nothing_again(
    event_log: EventLog,
) -> None:
    """Three jobs proposed, committed and deleted; a new allocator (another durable: it is
    delivered every proposal again) that keeps one finished job forgets the older ones while it
    reads, and still commits none of them a second time."""
    s = event_log.subjects
    first = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    for name in ("a", "b", "c"):
        await put(event_log, s.job("default", name), proposal(name, "n1", [0]))
        await drain(first)
        await put(event_log, s.job("default", name), JobDeleted(namespace="default", name=name))
        await drain(first)
    before = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    assert sum(isinstance(e, PlacementCommitted) for e in before) == 3

    again = Allocator(event_log)
    again.service.durable = "allocator-again"
    again.retain(Retention(keep_finished=1))
    await again.recover()
    await drain(again)
    after = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    assert sum(isinstance(e, PlacementCommitted) for e in after) == 3
    assert all(c.usage.slices_used == 0 for c in again.cards.values())
    assert len(again.answers.jobs) <= 1
    late = [e for e in after[len(before):] if isinstance(e, PlacementRejected)]
    assert all("stale" in r.reason or "answered" in r.reason or "already" in r.reason for r in late)
