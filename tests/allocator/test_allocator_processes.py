"""Allocator processes on real JetStream: a race between two, and a kill -9 mid-proposal."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from contracts.events import CardRegistered, PlacementCommitted, PlacementRejected, SliceReserved
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
