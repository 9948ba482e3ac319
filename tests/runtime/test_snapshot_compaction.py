"""A snapshot and compaction together (the SRE's ghost jobs): a snapshot that holds a job live,
whose end compaction purged with the rest of the job's subject, must not be folded onward —
the restart would keep the job running, and its booking held, for ever. Compaction records its
horizon before it purges; recovery and the snapshot writer use no snapshot below it. On both
backends: the in-memory log (pure) and JetStream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from contracts.base import Event
from contracts.events import JobPhaseChanged, JobSubmitted, LogCompacted, TaskFinished, TaskStarted
from services.queue.recovery import QueueFold, QueueState
from services.runtime import snapshot
from services.runtime.compaction import CompactionBusy, compact, finish, heartbeat, record
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import Entry, EventLog, StoredMessage
from services.runtime.service import decode_stored
from services.runtime.snapshot import MemoryStore, Snapshots, compacted_horizon
from tests.queue.test_queue_service import spec
from tests.runtime.test_eventlog_contract import ev_entry


async def put(log: EventLog, event: Event, name: str) -> int:
    result = await log.append(ev_entry(log, log.subjects.job("ns", name), event))  # type: ignore[attr-defined]
    return result.seq  # type: ignore[union-attr]


async def running(log: EventLog, name: str) -> int:
    await put(log, JobSubmitted(spec=spec(name, replicas=1)), name)
    return await put(log, TaskStarted(namespace="ns", name=name, task="w-0", node="n1"), name)


async def finished(log: EventLog, name: str) -> int:
    await put(log, TaskFinished(namespace="ns", name=name, task="w-0", node="n1"), name)
    return await put(log, JobPhaseChanged(namespace="ns", name=name, phase="Completed", reason="done"), name)


def live(state: QueueState) -> set[str]:
    """The jobs the queue service would go on driving (not ended), and its running tasks."""
    return {key for key, job in state.flow.projection.jobs.items()
            if key not in state.flow.finished.order} | {f"ns/{k[1]}" for k in state.tasks}  # fmt: skip


async def test_a_snapshot_holding_a_job_whose_end_was_purged_is_not_used(event_log: EventLog) -> None:
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    store = MemoryStore()
    await running(log, "ghost")
    taken = Snapshots(log, fold, store, every=1)
    at = await log.last_sequence()
    assert live(await taken.recover(at)) == {"ns/ghost"}  # written at once: a snapshot at `at`
    assert taken.saved is not None and taken.saved[0] == at

    await finished(log, "ghost")  # its end is in the snapshot's tail…
    await running(log, "new")
    done = await compact(log, keep_finished=0)  # …and goes with the job's subject
    assert done.jobs == 1
    until = await log.last_sequence()
    seq, horizon = await compacted_horizon(log)
    assert seq == until and at < horizon < seq  # recorded before the purge, above the snapshot
    marker = await decode_stored(await log.last(log.subjects.compactions()))  # type: ignore[arg-type,attr-defined]
    assert isinstance(marker, LogCompacted) and marker.jobs == 1

    restarted = Snapshots(log, fold, MemoryStore(), every=1)
    restarted.store.objects = dict(store.objects)  # type: ignore[union-attr]
    state = await restarted.recover(until)
    assert restarted.used == 0 and "compacted since" in restarted.why, restarted.why
    assert live(state) == {"ns/new"}  # no ghost
    assert fold.encode(state) == fold.encode(await Snapshots(log, fold).recover(until))  # = a replay


async def test_a_snapshot_above_the_horizon_is_still_used(event_log: EventLog) -> None:
    """Compaction does not cost every restart a full replay: jobs that ended before the
    snapshot was taken are purged under it, and it stays good."""
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    store = MemoryStore()
    await running(log, "old")
    await finished(log, "old")
    await running(log, "kept")
    taken = Snapshots(log, fold, store, every=1)
    at = await log.last_sequence()
    await taken.recover(at)
    await running(log, "after")
    assert (await compact(log, keep_finished=0)).jobs == 1
    until = await log.last_sequence()
    again = Snapshots(log, fold, store, every=1)
    state = await again.recover(until)
    assert again.used == at, again.why
    assert live(state) == {"ns/kept", "ns/after"}


async def test_the_writer_does_not_fold_a_compacted_tail_onto_its_last_snapshot(event_log: EventLog) -> None:
    """A service that does not ride its deliveries folds the log's tail onto its last snapshot:
    with the job's end purged from that tail, the next snapshot would carry the ghost on."""
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    store = MemoryStore()
    await running(log, "ghost")
    writer = Snapshots(log, fold, store, every=1)
    await writer.recover(await log.last_sequence())
    await finished(log, "ghost")
    await running(log, "new")
    await compact(log, keep_finished=0)
    assert await writer.write()
    until = await log.last_sequence()
    assert writer.saved is not None and writer.saved[0] == until
    assert fold.decode(writer.saved[1]).flow.projection.jobs.keys() == {"ns/new"}
    again = Snapshots(log, fold, store, every=1)
    state = await again.recover(until)
    assert again.used == until and live(state) == {"ns/new"}


async def test_purge_is_the_same_on_both_backends(event_log: EventLog) -> None:
    """What compaction calls: a subject below a sequence, or all but its newest; readers skip
    the gap, sequences are not reused."""
    log = event_log
    a = [await running(log, "a"), await finished(log, "a")]
    b = await running(log, "b")
    await log.purge(log.subjects.job("ns", "a"), upto=a[0] + 1)  # type: ignore[attr-defined]
    left = [m.seq async for m in log.replay(1, log.subjects.all_jobs())]
    assert left == [a[1] - 1, a[1], b - 1, b]
    await log.purge(log.subjects.job("ns", "b"), keep=1)  # type: ignore[attr-defined]
    assert [m.seq async for m in log.replay(1, log.subjects.all_jobs())] == [a[1] - 1, a[1], b]
    assert (await log.last(log.subjects.job("ns", "b"))).seq == b  # type: ignore[union-attr]
    assert await log.message_count() == 3 and await log.last_sequence() == b  # type: ignore[attr-defined]
    assert await log.at(a[0]) is None


class Overlap:
    """A compaction whose purge of `ghost`'s subject lands while a reader (`read`) is folding,
    between the ghost's start and its end: the purge waits until the reader's replay has yielded
    the ghost's `TaskStarted`, and the reader waits there until the compaction has returned —
    the reviewer's race, step by step instead of by chance. The reader is launched once the
    compaction has recorded its start (it reads that record first)."""

    def __init__(self, log: EventLog, ghost_start: int, read: Callable[[], Awaitable[object]]) -> None:
        self.log, self.ghost_start, self.read = log, ghost_start, read
        self.armed = False
        self.at_ghost = asyncio.Event()
        self.compacted = asyncio.Event()
        self.reader: asyncio.Task[object] | None = None
        self._purge, self._replay = log.purge, log.replay  # type: ignore[attr-defined]
        log.purge = self.purge  # type: ignore[attr-defined]
        log.replay = self.replay  # type: ignore[method-assign]

    async def purge(self, subject: str, upto: int | None = None, keep: int | None = None) -> None:
        if subject == self.log.subjects.job("ns", "ghost") and self.reader is None:  # type: ignore[attr-defined]
            self.armed = True
            self.reader = asyncio.create_task(self.read())
            # the reader reaches the ghost mid-fold, or ends without folding (it waits for us)
            at_ghost = asyncio.create_task(self.at_ghost.wait())
            await asyncio.wait({self.reader, at_ghost}, return_when=asyncio.FIRST_COMPLETED)
            at_ghost.cancel()
        await self._purge(subject, upto=upto, keep=keep)

    def replay(self, start_seq: int = 1, filter_subject: str | None = None) -> AsyncIterator[StoredMessage]:
        async def gen() -> AsyncIterator[StoredMessage]:
            async for msg in self._replay(start_seq, filter_subject):
                yield msg
                if self.armed and msg.seq == self.ghost_start and not self.at_ghost.is_set():
                    self.at_ghost.set()
                    await self.compacted.wait()

        return gen()

    async def compact(self) -> object:
        await compact(self.log, keep_finished=0)  # type: ignore[arg-type]
        self.compacted.set()
        assert self.reader is not None
        return await self.reader


async def ghost_setup(log: EventLog, fold: QueueFold) -> tuple[MemoryStore, int]:
    """`kept` runs and is snapshotted; then `ghost` starts and ends: the ghost's start is in the
    snapshot's tail, and compaction forgets it (returns the store, the ghost's start)."""
    store = MemoryStore()
    await running(log, "kept")
    await Snapshots(log, fold, store, every=1).recover(await log.last_sequence())
    start = await running(log, "ghost")
    await finished(log, "ghost")
    return store, start


async def test_a_recovery_overlapping_a_compactions_purge_folds_again(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The recovery read the compaction's first record (the purges to come), folded from #1
    while they ran, and the ghost's end was purged before the fold reached it: it kept the job
    live and, the record unchanged, did not fold again. Now it waits for the compaction's end
    (here: gives up waiting, as for a compaction that died) and the end's record, a new one,
    makes it fold again."""
    monkeypatch.setattr(snapshot, "COMPACTION_WAIT", 0.2)
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    store, start = await ghost_setup(log, fold)
    until = await log.last_sequence()
    again = Snapshots(log, fold, MemoryStore(), every=0)
    again.store.objects = dict(store.objects)  # type: ignore[union-attr]
    caplog.set_level(logging.INFO, logger=snapshot.__name__)
    state = await Overlap(log, start, lambda: again.recover(until)).compact()
    assert live(state) == {"ns/kept"}  # type: ignore[arg-type]  # no ghost…
    assert "compacted while recovering" in caplog.text  # …because it folded again
    assert fold.encode(state) == fold.encode(await Snapshots(log, fold).recover(until))  # type: ignore[arg-type]
    assert (await snapshot.compaction_mark(log)).running == 0


async def test_the_writer_does_not_fold_while_a_compaction_purges(event_log: EventLog) -> None:
    """The writer folded from #1 as soon as it saw the new horizon, i.e. while the purges ran,
    and saved the ghost in a snapshot every later restart used. Now it skips the period."""
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    store, start = await ghost_setup(log, fold)
    writer = Snapshots(log, fold, store, every=1)
    await writer.recover(await log.last_sequence())
    assert writer.saved is not None
    written = writer.saved[0]
    await running(log, "new")
    assert await Overlap(log, start, writer.write).compact() is False
    assert store.objects and writer.saved[0] == written  # nothing saved meanwhile
    assert await writer.write()  # the next period, the compaction over
    assert fold.decode(writer.saved[1]).flow.projection.jobs.keys() == {"ns/kept", "ns/new"}
    restarted = Snapshots(log, fold, store, every=1)
    state = await restarted.recover(await log.last_sequence())
    assert restarted.used == writer.saved[0] and live(state) == {"ns/kept", "ns/new"}


class Clock:
    """The wall clock compaction records are stamped and judged by, moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1_000_000.0
        monkeypatch.setattr(snapshot, "wall_clock", lambda: self.now, raising=False)

    def past_dead_limit(self) -> None:
        self.now += getattr(snapshot, "DEAD_AFTER", 30.0) + 1


async def test_a_compaction_that_died_mid_purge_is_taken_for_dead(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first record says it runs and no end ever comes: once its record is older than
    `DEAD_AFTER` the next compaction takes it for dead and runs, so readers do not wait for ever."""
    clock = Clock(monkeypatch)
    monkeypatch.setattr(snapshot, "COMPACTION_WAIT", 3600.0)  # a live one would be waited for
    log = event_log
    await running(log, "a")
    last = await finished(log, "a")
    await record(log, last, 1)  # type: ignore[arg-type]  # …and the process stopped
    assert (await snapshot.compaction_mark(log)).running == 1
    await running(log, "b")
    await finished(log, "b")
    clock.past_dead_limit()
    async with asyncio.timeout(10):  # not COMPACTION_WAIT: a dead record is judged at once
        assert (await compact(log, keep_finished=0)).jobs == 2  # type: ignore[arg-type]
    mark = await snapshot.compaction_mark(log)
    b_end = await log.last_sequence() - 2  # then the compaction's start and end records
    assert mark.running == 0 and mark.horizon == b_end


async def test_a_dead_compaction_neither_stops_snapshots_nor_delays_every_restart(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer's MEDIUM 1: a compaction killed mid-purge left `running` set until the next
    compaction: every (re)start waited `COMPACTION_WAIT` for it, and the writer (not riding)
    never wrote again (snapshot stuck at #5, log at #15). Now its record, not refreshed for
    `DEAD_AFTER` s, is dead at once to both."""
    clock = Clock(monkeypatch)
    monkeypatch.setattr(snapshot, "COMPACTION_WAIT", 3600.0)
    log, fold = event_log, QueueFold(event_log.subjects, keep_finished=100)  # type: ignore[attr-defined]
    await running(log, "a")
    last = await finished(log, "a")
    await record(log, last, 1)  # type: ignore[arg-type]  # died before any purge or its end
    clock.past_dead_limit()
    store = MemoryStore()
    writer = Snapshots(log, fold, store, every=1)
    async with asyncio.timeout(10):  # the unfixed recovery waits the whole COMPACTION_WAIT
        await writer.recover(await log.last_sequence())
    assert writer.saved is not None
    for i in range(5):
        await running(log, f"j{i}")
    writer.riding = False  # folds the log's tail, as a service that does not ride
    assert await writer.write()
    until = await log.last_sequence()
    assert writer.saved[0] == until
    assert live(fold.decode(writer.saved[1])) == {f"ns/j{i}" for i in range(5)}
    again = Snapshots(log, fold, store, every=1)
    state = await again.recover(until)
    assert again.used == until and fold.encode(state) == fold.encode(await Snapshots(log, fold).recover(until))


async def test_compactions_are_exclusive(event_log: EventLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reviewer's MEDIUM 2 (counted compactions undercounted): A dead, B and C start at
    once → one runs and the other is refused, instead of `running` 1 for two; the winner's end
    is the end of every purge, and A's late end does not clear it."""
    clock = Clock(monkeypatch)
    monkeypatch.setattr(snapshot, "COMPACTION_WAIT", 0.0)  # a live one is refused at once
    log = event_log
    await running(log, "a")
    last = await finished(log, "a")
    await record(log, last, 1, "A")  # type: ignore[arg-type]
    clock.past_dead_limit()
    results = await asyncio.gather(record(log, last, 1, "B"), record(log, last, 1, "C"),  # type: ignore[arg-type]
                                   return_exceptions=True)  # fmt: skip
    refused = [r for r in results if isinstance(r, CompactionBusy)]
    assert len(refused) == 1 and "another compaction is running" in str(refused[0])
    mark = await snapshot.compaction_mark(log)
    winner = mark.owner
    assert mark.running == 1 and winner in {"B", "C"} and mark.live
    await finish(log, 1, "A")  # type: ignore[arg-type]  # A was not dead after all: too late
    assert (await snapshot.compaction_mark(log)).owner == winner
    await finish(log, 1, winner)  # type: ignore[arg-type]
    assert not (await snapshot.compaction_mark(log)).running


async def test_a_slow_compaction_that_refreshes_its_record_is_not_taken_for_dead(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer's MEDIUM 2, second case: A alive but slower than the wait was taken for
    dead and its end cleared B's purges. Now A refreshes its record while it purges: past the
    dead limit of its first record, B still finds it live and is refused."""
    clock = Clock(monkeypatch)
    monkeypatch.setattr(snapshot, "COMPACTION_WAIT", 0.0)
    monkeypatch.setattr(snapshot, "HEARTBEAT", 0.01)
    log = event_log
    await running(log, "a")
    last = await finished(log, "a")
    await record(log, last, 1, "A")  # type: ignore[arg-type]
    first = await snapshot.compaction_mark(log)
    clock.past_dead_limit()
    assert first.dead()  # unrefreshed, it would be taken for dead
    lost, refreshed = asyncio.Event(), asyncio.Event()
    append = log.append

    async def spy(entry: Entry) -> object:
        result = await append(entry)
        if entry.subject == log.subjects.compactions():  # type: ignore[attr-defined]
            refreshed.set()
        return result

    log.append = spy  # type: ignore[method-assign,assignment]
    beat = asyncio.create_task(heartbeat(log, "A", 1, lost))  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        await refreshed.wait()
    beat.cancel()
    log.append = append  # type: ignore[method-assign]
    mark = await snapshot.compaction_mark(log)
    assert mark.seq != first.seq
    assert mark.owner == "A" and mark.live and mark.horizon == first.horizon and not lost.is_set()
    with pytest.raises(CompactionBusy):
        await record(log, last, 1, "B")  # type: ignore[arg-type]
    await finish(log, 1, "A")  # type: ignore[arg-type]
    assert not (await snapshot.compaction_mark(log)).running


async def test_the_horizon_is_read_from_the_stream_leader(event_log: EventLog) -> None:
    """A direct get may be answered by any R3 replica, and a follower that has not applied the
    last `LogCompacted` answers an older horizon; the horizon is a plain (leader's) get."""
    if not isinstance(event_log, JetStreamLog):
        pytest.skip("replicas are JetStream's")
    log = event_log
    await record(log, 7, 1)  # type: ignore[arg-type]
    calls: list[object] = []
    real = log.js.get_last_msg

    async def spy(stream: str, subject: str, direct: bool | None = False) -> object:
        calls.append(direct)
        return await real(stream, subject, direct=direct)

    log.js.get_last_msg = spy  # type: ignore[method-assign]
    assert (await compacted_horizon(log))[1] == 7
    assert calls and not any(calls)
