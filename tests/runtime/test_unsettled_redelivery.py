"""A service killed with deliveries in hand: the next process of its durable gets them at once,
in stream order, not ack_wait later (issue 29's kill tests: a Volcano Job restarting while its
queue service was killed stood 30 s — the restart's message came back only after ack_wait)."""

from __future__ import annotations

import pytest

from contracts.events import NodeLost
from contracts.registry import default_registry
from services.runtime.eventlog import Entry
from services.runtime.eventlog.jetstream import JetStreamConsumer, JetStreamLog
from tests.conftest import close_jetstream_log, unique_subjects
from tests.processes import wait_until


def lost(log: JetStreamLog, i: int) -> Entry:
    event = NodeLost(node=f"n{i}")
    reg = default_registry()
    return Entry(log.subjects.node(f"n{i}"), reg.encode(event), reg.envelope(event).to_headers())


async def settle(consumer: JetStreamConsumer, n: int) -> list[int]:
    """The sequences of the next `n` deliveries, each acknowledged; fails on one not coming."""
    got: list[int] = []
    for _ in range(n):
        d = await consumer.next(timeout=10)
        assert d is not None, f"only {got} came to this reader"
        got.append(d.message.seq)
        await d.ack()
    return got


async def test_what_a_killed_reader_left_unsettled_comes_first_at_the_next_start(nats_url: str) -> None:
    subjects, stream = unique_subjects()
    # ten minutes: a redelivery by ack_wait cannot come within the test's waits
    log = await JetStreamLog.connect(nats_url, subjects=subjects, stream=stream, ack_wait=600.0)
    killed = await JetStreamLog.connect(nats_url, subjects=subjects, stream=stream, ack_wait=600.0)
    try:
        version = log.nc.connected_server_version
        if (version.major, version.minor) < (2, 14):
            pytest.skip(f"nats-server {version} has no consumer reset (2.14)")
        seqs = [(await log.append(lost(log, i))).seq for i in range(4)]  # type: ignore[union-attr]
        first = await killed.consumer("svc", [subjects.all_nodes()])
        settled = await first.next(timeout=10)
        assert settled is not None and settled.message.seq == seqs[0]
        await settled.ack()
        taken = [await first.next(timeout=10) for _ in range(2)]
        assert [d.message.seq for d in taken if d is not None] == seqs[1:3]
        await first.close()  # sends the one ack; the rest it holds are left unsettled
        await killed.close()  # the process is gone

        again = await log.consumer("svc", [subjects.all_nodes()])
        got = await settle(again, 3)
        assert got == seqs[1:], "the unsettled ones first, in stream order, then the rest"
        assert await again.next(timeout=0.5) is None
        await again.close()
    finally:
        if not killed.nc.is_closed:
            await killed.close()
        await close_jetstream_log(log)


async def test_what_a_stopping_reader_fetched_and_never_read_goes_to_another_at_once(nats_url: str) -> None:
    """Two processes share one durable (allocator replicas); one stops with messages it
    fetched but never read: the other has them now, not ack_wait later."""
    subjects, stream = unique_subjects()
    log = await JetStreamLog.connect(nats_url, subjects=subjects, stream=stream, ack_wait=600.0)
    try:
        seqs = [(await log.append(lost(log, i))).seq for i in range(5)]  # type: ignore[union-attr]
        stopping = await log.consumer("shared", [subjects.all_nodes()])
        other = await log.consumer("shared", [subjects.all_nodes()])
        first = await stopping.next(timeout=10)  # one request fetches all five
        assert first is not None and first.message.seq == seqs[0]
        await first.ack()

        async def holds_the_rest() -> bool:  # the server sent them all to this reader
            return len(stopping._arrived) == len(seqs) - 1

        await wait_until(holds_the_rest, 30, "the stopping reader holding the four it fetched")
        await stopping.close()
        assert sorted(await settle(other, 4)) == seqs[1:]
        await other.close()
    finally:
        await close_jetstream_log(log)
