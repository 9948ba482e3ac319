"""Cardless placements (cpu, memory, other extended resources only) through the allocator: they
book no slice, so "every slice of the proposal is booked already" is vacuously true for them —
the log, not the ledgers, says whether such a task is placed (issue 27)."""

from __future__ import annotations

from contracts.events import (
    BindingFailed,
    PlacementCommitted,
    PlacementProposed,
    PlacementRejected,
    TaskFinished,
    TaskPlacement,
)
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import ascend_node, decoded, put
from tests.allocator.test_allocator import drain


def cardless(job: str, nodes: list[str]) -> PlacementProposed:
    return PlacementProposed(
        namespace="default", name=job, based_on=0,
        placements=tuple(TaskPlacement(task=f"{job}-{i}", node=n) for i, n in enumerate(nodes)),
    )  # fmt: skip


async def answers(event_log: EventLog, job: str) -> list[PlacementCommitted | PlacementRejected]:
    events = decoded([m async for m in event_log.replay(1, event_log.subjects.job("default", job))])
    return [e for e in events if isinstance(e, PlacementCommitted | PlacementRejected)]


async def test_a_cardless_proposal_commits_once(event_log: EventLog) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    seq = await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n1", "n1"]))
    await drain(alloc)
    got = await answers(event_log, "cpu")
    assert [type(a).__name__ for a in got] == ["PlacementCommitted"], got
    assert got[0].proposal_seq == seq and len(got[0].placements) == 2


async def test_a_cardless_task_proposed_again_while_placed_is_a_duplicate_then_free_after_its_end(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.node("n2"), ascend_node("n2"))
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n1"]))
    await drain(alloc)
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n1"]))  # the same again
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n2"]))  # elsewhere
    await drain(alloc)
    got = await answers(event_log, "cpu")
    assert [type(a).__name__ for a in got] == ["PlacementCommitted", "PlacementRejected", "PlacementRejected"]
    assert got[1].reason == "already placed as proposed"
    assert got[2].reason == "default/cpu/cpu-0 is already placed on node n1"
    # once its run ended (evicted: it waits again), the task may be placed anew, anywhere
    await put(event_log, s.job("default", "cpu"), TaskFinished(
        namespace="default", name="cpu", task="cpu-0", node="n1", exit_code=137, reason="evicted"))  # fmt: skip
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n2"]))
    await drain(alloc)
    got = await answers(event_log, "cpu")
    assert isinstance(got[-1], PlacementCommitted) and got[-1].placements[0].node == "n2"
    # a binding refused by the API server ends the placement too
    await put(event_log, s.job("default", "cpu"), BindingFailed(
        namespace="default", name="cpu", task="cpu-0", node="n2", reason="pod is being deleted"))  # fmt: skip
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n1"]))
    await drain(alloc)
    got = await answers(event_log, "cpu")
    assert isinstance(got[-1], PlacementCommitted) and got[-1].placements[0].node == "n1"
    # a restarted allocator knows it from the log as well
    await put(event_log, s.job("default", "cpu"), cardless("cpu", ["n2"]))
    fresh = Allocator(event_log)
    await fresh.recover()
    await drain(fresh)
    got = await answers(event_log, "cpu")
    assert isinstance(got[-1], PlacementRejected)
    assert got[-1].reason == "default/cpu/cpu-0 is already placed on node n1"
