"""`services.runtime.snapshot` on real JetStream (object store beside the stream): a usable
snapshot is folded onward from its sequence, anything else falls back to a replay from #1 and
says why, and a snapshot is always the log's fold (stored snapshot + tail), equal to a replay."""

from __future__ import annotations

import logging

import msgspec
import pytest

from contracts.base import Event
from contracts.events import QueueStateChanged
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import StoredMessage
from services.runtime.service import EventService, Outgoing
from services.runtime.snapshot import MemoryStore, ObjectStoreSnapshots, Snapshots

Seen = list[tuple[int, str]]  # (seq, state) of every queue event folded


class SeenFold:
    """A projection small enough to read: what was folded, in order."""

    name = "probe"
    types: frozenset[str] | None = None

    def __init__(self, subjects: object, version: str = "v1") -> None:
        self.patterns = (subjects.all_queues(),)  # type: ignore[attr-defined]
        self._version = version

    def version(self) -> str:
        return self._version

    def empty(self) -> Seen:
        return []

    def fold(self, state: Seen, msg: StoredMessage, event: Event) -> Seen:
        assert isinstance(event, QueueStateChanged)
        return [*state, (msg.seq, event.state)]

    def encode(self, state: Seen) -> bytes:
        return msgspec.msgpack.encode(state)

    def decode(self, data: bytes) -> Seen:
        return msgspec.msgpack.decode(data, type=Seen)


async def append(log: JetStreamLog, n: int, state: str = "Open") -> int:
    svc = EventService(name="probe", log=log, filter_subjects=[], handlers={})
    seq = 0
    for i in range(n):
        res = await svc.publish(Outgoing(log.subjects.queue(f"q{i % 3}"), QueueStateChanged(queue=f"q{i % 3}", state=state)))
        seq = res.seq  # type: ignore[union-attr]
    return seq


async def test_recover_writes_then_folds_only_the_tail_and_equals_a_replay(jetstream_log: JetStreamLog) -> None:
    log, store = jetstream_log, ObjectStoreSnapshots(jetstream_log)
    first = await append(log, 5)
    snaps = Snapshots(log, SeenFold(log.subjects), store, every=3)
    state = await snaps.recover(first)
    assert snaps.used == 0 and snaps.why == "there is no snapshot yet"
    assert [s for s, _ in state] == list(range(1, first + 1))
    assert snaps.saved is not None and snaps.saved[0] == first  # the long tail was stored at once

    last = await append(log, 2, "Closed")
    assert not await snaps.write()  # 2 messages past the snapshot: fewer than `every`
    again = Snapshots(log, SeenFold(log.subjects), store, every=3)
    rebuilt = await again.recover(last)
    assert again.used == first
    assert rebuilt == await Snapshots(log, SeenFold(log.subjects)).recover(last)

    last = await append(log, 2, "Closing")
    assert await snaps.write()  # from its snapshot at `first` and the 4 messages after it
    assert snaps.saved is not None and snaps.saved[0] == last
    third = Snapshots(log, SeenFold(log.subjects), store, every=3)
    assert await third.recover(last) == await Snapshots(log, SeenFold(log.subjects)).recover(last)
    assert third.used == last


async def test_an_unusable_snapshot_means_a_full_replay_and_says_why(jetstream_log: JetStreamLog) -> None:
    log, store = jetstream_log, ObjectStoreSnapshots(jetstream_log)
    last = await append(log, 4)
    full = await Snapshots(log, SeenFold(log.subjects)).recover(last)
    await Snapshots(log, SeenFold(log.subjects), store, every=1).recover(last)  # stores one

    other = Snapshots(log, SeenFold(log.subjects, version="v2"), store, every=0)
    assert await other.recover(last) == full and other.used == 0
    assert "another version" in other.why and "v1" in other.why and "v2" in other.why

    foreign = MemoryStore("another log")
    foreign.objects["probe"] = await store.load("probe")  # type: ignore[assignment]
    moved = Snapshots(log, SeenFold(log.subjects), foreign)
    assert await moved.recover(last) == full and moved.used == 0
    assert "another stream" in moved.why

    behind = Snapshots(log, SeenFold(log.subjects), store)
    assert await behind.recover(last - 1) == full[:-1] and behind.used == 0
    assert f"beyond the log's last #{last - 1}" in behind.why

    await store.save("probe", b"\x93not a snapshot")
    broken = Snapshots(log, SeenFold(log.subjects), store)
    assert await broken.recover(last) == full and broken.used == 0
    assert "undecodable" in broken.why


async def test_a_snapshot_riding_on_the_services_deliveries_equals_a_replay(jetstream_log: JetStreamLog) -> None:
    """The writer folds what the service's consumer delivers (no second read of the log):
    a redelivery is not folded again, and what it writes is the log's fold all the same."""
    log, store = jetstream_log, ObjectStoreSnapshots(jetstream_log)
    first = await append(log, 2)
    snaps = Snapshots(log, SeenFold(log.subjects), store, every=1)
    await snaps.recover(first)
    assert not snaps.ride([log.subjects.all_jobs()], True)  # the queues' subjects unread
    await snaps.recover(first)
    assert not snaps.ride([log.subjects.all_queues(), log.subjects.all_jobs()], False)  # side by side
    await snaps.recover(first)
    assert snaps.ride([log.subjects.all_queues()], True)

    last = await append(log, 3, "Closed")
    svc = EventService(name="probe", log=log, filter_subjects=[log.subjects.all_queues()],
                       handlers={QueueStateChanged: lambda _e, _rx: _noop()})  # fmt: skip
    svc.observers.append(snaps.see)
    consumer = await log.consumer("probe", svc.filter_subjects)
    delivered = []
    while len(delivered) < last:
        d = await consumer.next(timeout=5)
        assert d is not None
        delivered.append(d)
        await svc.handle(d)
    await svc.handle(delivered[-1])  # again: at or below what the copy holds
    assert await snaps.write()
    assert snaps.saved is not None and snaps.saved[0] == last
    again = Snapshots(log, SeenFold(log.subjects), store)
    assert await again.recover(last) == await Snapshots(log, SeenFold(log.subjects)).recover(last)
    assert again.used == last
    await consumer.close()


async def _noop() -> None:
    return None


async def test_a_live_state_is_written_as_it_is_and_no_copy_is_folded(jetstream_log: JetStreamLog) -> None:
    """A service whose state is the fold of its deliveries alone (the scheduler's view) hands
    the writer that state: nothing is folded beside it, and what is written equals a replay."""
    log, store = jetstream_log, ObjectStoreSnapshots(jetstream_log)
    first = await append(log, 2)
    fold = SeenFold(log.subjects)
    snaps = Snapshots(log, fold, store, every=1)
    state = await snaps.recover(first)
    at = [first]
    snaps.live = lambda: (at[0], state)
    assert snaps.ride([log.subjects.all_queues()], True)
    last = await append(log, 3, "Closed")
    async for msg in log.replay(first + 1, log.subjects.all_queues()):  # the service's own fold
        snaps.see(msg, "QueueStateChanged", lambda m=msg: fold_event(m))
        state = fold.fold(state, msg, fold_event(msg))
        at[0] = msg.seq
    assert snaps._copy is None  # nothing folded beside the service
    assert await snaps.write()
    assert snaps.saved is not None and snaps.saved[0] == last
    again = Snapshots(log, fold, store)
    assert await again.recover(last) == await Snapshots(log, fold).recover(last) == state
    assert again.used == last


def fold_event(msg: StoredMessage) -> Event:
    return msgspec.json.decode(msg.data, type=QueueStateChanged)


async def test_a_snapshot_at_the_logs_end_says_there_is_nothing_to_replay(
    jetstream_log: JetStreamLog, caplog: pytest.LogCaptureFixture
) -> None:
    """A restart right after a snapshot logged "replaying #654…#653", an empty range."""
    log, store = jetstream_log, ObjectStoreSnapshots(jetstream_log)
    last = await append(log, 3)
    await Snapshots(log, SeenFold(log.subjects), store, every=1).recover(last)  # stores one at `last`
    with caplog.at_level(logging.INFO, logger="services.runtime.snapshot"):
        again = Snapshots(log, SeenFold(log.subjects), store, every=1)
        await again.recover(last)
    assert again.used == last
    said = [r.getMessage() for r in caplog.records if "from the snapshot" in r.getMessage()]
    assert said and said[-1].endswith(f"from the snapshot at #{last}, nothing to replay"), said
