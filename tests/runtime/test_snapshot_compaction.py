"""A snapshot and compaction together (the SRE's ghost jobs): a snapshot that holds a job live,
whose end compaction purged with the rest of the job's subject, must not be folded onward —
the restart would keep the job running, and its booking held, for ever. Compaction records its
horizon before it purges; recovery and the snapshot writer use no snapshot below it. On both
backends: the in-memory log (pure) and JetStream."""

from __future__ import annotations

from contracts.base import Event
from contracts.events import JobPhaseChanged, JobSubmitted, LogCompacted, TaskFinished, TaskStarted
from services.queue.recovery import QueueFold, QueueState
from services.runtime.compaction import compact
from services.runtime.eventlog.model import EventLog
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
