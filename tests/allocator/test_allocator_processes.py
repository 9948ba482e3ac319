"""Allocator processes on real JetStream: a race between two, and a kill -9 mid-proposal."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from contracts.events import (
    CardRegistered,
    JobDeleted,
    PlacementCommitted,
    PlacementRejected,
    SliceReleased,
    SliceReserved,
    TaskFinished,
)
from services.core.ledger import check_invariants, fold
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.allocator.scenario import ascend_node, decoded, proposal, put
from tests.processes import ServiceProcess, wait_until


def allocator_args(log: JetStreamLog, url: str, durable: str) -> list[str]:
    return ["--nats", url, "--root", log.subjects.root, "--stream", log.stream,
            "--durable", durable, "--ack-wait", "2"]  # fmt: skip


@pytest.fixture
def processes() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for p in started:
        p.stop()


async def settled(log: JetStreamLog, durable: str) -> bool:
    info = await log.js.consumer_info(log.stream, durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


def assert_ledgers_sound(events: list) -> None:
    by_card: dict[str, list] = {}
    for e in events:
        card = e.card.uuid if isinstance(e, CardRegistered) else getattr(e, "card", None)
        if isinstance(card, str):
            by_card.setdefault(card, []).append(e)
    for uuid, history in by_card.items():
        assert check_invariants(fold(uuid, history)) == [], uuid


async def test_two_allocators_racing_for_one_card_commit_exactly_one(
    jetstream_log: JetStreamLog, nats_url: str, processes: list[ServiceProcess]
) -> None:
    log, s = jetstream_log, jetstream_log.subjects
    for name in ("alloc-a", "alloc-b"):  # each sees every proposal: the worst case
        proc = ServiceProcess("services.allocator", allocator_args(log, nats_url, name))
        processes.append(proc.start("allocator ready"))
    await put(log, s.node("n1"), ascend_node("n1"))
    from contracts.registry import default_registry
    from services.runtime.eventlog import Entry

    reg = default_registry()
    proposals = [proposal("a", "n1", [0, 1]), proposal("b", "n1", [1])]
    await log.append_pipelined(
        [
            Entry(s.job("default", p.name), reg.encode(p), reg.envelope(p).to_headers())
            for p in proposals
        ]
    )
    for name in ("alloc-a", "alloc-b"):
        await wait_until(lambda n=name: settled(log, n), what=f"{name} to settle")
    events = decoded([m async for m in log.replay()])
    committed = [e.name for e in events if isinstance(e, PlacementCommitted)]
    rejected = [e.name for e in events if isinstance(e, PlacementRejected)]
    assert len(committed) == 1 and len(rejected) == 1 and set(committed + rejected) == {"a", "b"}
    winner = proposals[0] if committed == ["a"] else proposals[1]
    assert sum(isinstance(e, SliceReserved) for e in events) == len(winner.placements)
    assert_ledgers_sound(events)
    # "list cards" over request/reply (nats.micro), answered from the allocator's projection.
    reply = await log.nc.request(f"{s.api('allocator')}.cards", b"", timeout=5)
    cards = {c["uuid"]: c for c in json.loads(reply.data)}
    assert cards["n1-Ascend910B3-1"]["memory_used"] == 65536
    assert cards["n1-Ascend910B3-0"]["memory_used"] == (65536 if committed == ["a"] else 0)
    assert not await log.dead_letters("alloc-a") and not await log.dead_letters("alloc-b")


async def test_allocator_killed_after_commit_before_ack_commits_exactly_once(
    jetstream_log: JetStreamLog, nats_url: str, processes: list[ServiceProcess]
) -> None:
    log, s = jetstream_log, jetstream_log.subjects
    args = allocator_args(log, nats_url, "allocator")
    doomed = ServiceProcess("services.allocator", args, {"TESSERA_FAULT": "allocator.after-commit"})
    processes.append(doomed.start("allocator ready"))
    await put(log, s.node("n1"), ascend_node("n1", cards=4))
    await put(log, s.job("default", "train"), proposal("train", "n1", [0, 1, 2, 3]))
    assert await doomed.wait_exit() == -9  # SIGKILL at the fault point: batch durable, no ack
    events = decoded([m async for m in log.replay()])
    assert sum(isinstance(e, PlacementCommitted) for e in events) == 1
    restarted = ServiceProcess("services.allocator", args)
    processes.append(restarted.start("allocator ready"))
    await wait_until(lambda: settled(log, "allocator"), what="redelivery to be settled")
    events = decoded([m async for m in log.replay()])
    assert sum(isinstance(e, PlacementCommitted) for e in events) == 1
    assert sum(isinstance(e, SliceReserved) for e in events) == 4
    assert not any(isinstance(e, PlacementRejected) for e in events)
    assert_ledgers_sound(events)


# --- issue 12: idempotency from the log, not from the duplicate window ---------------------------
#
# The allocator processes run with a 1 s duplicate window: whatever they would do once JetStream
# forgot a message id, they do here within the test's few seconds.


def short_window_args(log: JetStreamLog, url: str, durable: str, ack_wait: float = 2) -> list[str]:
    args = allocator_args(log, url, durable)
    args[args.index("--ack-wait") + 1] = str(ack_wait)
    return [*args, "--duplicate-window", "1"]


def finished(job: str, tasks: int, node: str = "n1") -> list[TaskFinished]:
    return [TaskFinished(namespace="default", name=job, task=f"worker-{i}", node=node)
            for i in range(tasks)]  # fmt: skip


async def cards_in_use(log: JetStreamLog) -> dict[str, list[str]]:
    """The allocator's own view (its API), card → owners."""
    reply = await log.nc.request(f"{log.subjects.api('allocator')}.cards", b"", timeout=5)
    return {c["uuid"]: c["owners"] for c in json.loads(reply.data) if c["owners"]}


async def test_killed_after_commit_then_pod_finished_is_not_committed_again(
    jetstream_log: JetStreamLog, nats_url: str, processes: list[ServiceProcess]
) -> None:
    """Killed between the durable commit and its ack; the pods finish (slices released by the
    restarted allocator) before the proposal comes back after the ack wait. It must be
    recognised as answered, not committed again — the pods would run twice."""
    log, s = jetstream_log, jetstream_log.subjects
    args = short_window_args(log, nats_url, "allocator", ack_wait=8)
    doomed = ServiceProcess("services.allocator", args, {"TESSERA_FAULT": "allocator.after-commit"})
    processes.append(doomed.start("allocator ready"))
    await put(log, s.node("n1"), ascend_node("n1", cards=2))
    await put(log, s.job("default", "train"), proposal("train", "n1", [0, 1]))
    assert await doomed.wait_exit() == -9  # batch durable, proposal unacked for 8 s
    for done in finished("train", 2):  # what the node agent reports once the pods ran
        await put(log, s.job("default", "train"), done)
    restarted = ServiceProcess("services.allocator", args)
    processes.append(restarted.start("allocator ready"))

    async def released_and_settled() -> bool:
        events = decoded([m async for m in log.replay()])
        return sum(isinstance(e, SliceReleased) for e in events) == 2 and await settled(log, "allocator")

    await wait_until(released_and_settled, timeout=40, what="releases, then the redelivery")
    events = decoded([m async for m in log.replay()])
    assert sum(isinstance(e, PlacementCommitted) for e in events) == 1
    assert sum(isinstance(e, SliceReserved) for e in events) == 2
    assert await cards_in_use(log) == {}  # nothing booked with nothing running
    assert_ledgers_sound(events)


async def test_new_durable_consumer_replaying_an_old_system_commits_nothing_again(
    jetstream_log: JetStreamLog, nats_url: str, processes: list[ServiceProcess]
) -> None:
    """An allocator with a new durable consumer starts at sequence 1 and sees every proposal
    ever made: answered ones are recognised, the one stale but unanswered (its job was deleted
    before any allocator saw it) is answered with a rejection, and nothing is committed again."""
    log, s = jetstream_log, jetstream_log.subjects
    old = ServiceProcess("services.allocator", short_window_args(log, nats_url, "alloc-old"))
    processes.append(old.start("allocator ready"))
    await put(log, s.node("n1"), ascend_node("n1", cards=4))
    await put(log, s.job("default", "a"), proposal("a", "n1", [0, 1]))
    await put(log, s.job("default", "b"), proposal("b", "n1", [0]))  # refused: card 0 is taken
    await wait_until(lambda: settled(log, "alloc-old"), what="the old allocator to answer")
    for done in finished("a", 2):
        await put(log, s.job("default", "a"), done)
    await wait_until(lambda: settled(log, "alloc-old"), what="the releases")
    old.stop()
    await put(log, s.job("default", "c"), proposal("c", "n1", [2]))  # nobody answers it...
    await put(log, s.job("default", "c"), JobDeleted(namespace="default", name="c"))  # ...gone
    before = decoded([m async for m in log.replay()])
    new = ServiceProcess("services.allocator", short_window_args(log, nats_url, "alloc-new"))
    processes.append(new.start("allocator ready"))
    await wait_until(lambda: settled(log, "alloc-new"), what="the new durable to replay it all")
    events = decoded([m async for m in log.replay()])
    added = events[len(before):]
    assert [type(e).__name__ for e in added] == ["PlacementRejected"], added
    assert added[0].name == "c" and "deleted" in added[0].reason  # type: ignore[attr-defined]
    assert sum(isinstance(e, PlacementCommitted) for e in events) == 1
    assert await cards_in_use(log) == {}
    assert_ledgers_sound(events)


async def test_deleting_a_job_frees_only_its_own_slices_whatever_the_names(
    jetstream_log: JetStreamLog, nats_url: str, processes: list[ServiceProcess]
) -> None:
    """Job `a` and job `a/b` (a name admission should refuse, but the ledger must not care):
    deleting `a` must not free the slices of `a/b`'s running pods (owner `default/a/b/...`
    used to start with `default/a/`), or the next pod over-commits their card."""
    log, s = jetstream_log, jetstream_log.subjects
    proc = ServiceProcess("services.allocator", allocator_args(log, nats_url, "allocator"))
    processes.append(proc.start("allocator ready"))
    await put(log, s.node("n1"), ascend_node("n1", cards=2))
    await put(log, s.job("default", "a/b"), proposal("a/b", "n1", [0]))
    await put(log, s.job("default", "a"), proposal("a", "n1", [1]))
    await wait_until(lambda: settled(log, "allocator"), what="both commits")
    await put(log, s.job("default", "a"), JobDeleted(namespace="default", name="a"))
    await wait_until(lambda: settled(log, "allocator"), what="the deletion")

    async def only_a_b_holds() -> bool:  # the release's ledger write is what we wait for
        return await cards_in_use(log) == {"n1-Ascend910B3-0": ["default/a%2Fb/worker-0"]}

    await wait_until(only_a_b_holds, 30, "job a's slices released, a/b's kept")
    await put(log, s.job("default", "next"), proposal("next", "n1", [0]))
    await wait_until(lambda: settled(log, "allocator"), what="the next proposal")
    events = decoded([m async for m in log.replay()])
    rejected = [e for e in events if isinstance(e, PlacementRejected)]
    assert [r.name for r in rejected] == ["next"]  # card 0 is still a/b's
    assert_ledgers_sound(events)
