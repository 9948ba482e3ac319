"""Bound the log by what is live (issue 12 item 7): `tessera compact --keep-finished N` once,
or the queue service every `--compact-every` seconds.

The stream has no age or size limit, and must not get one: a limit drops the oldest messages,
whatever job they belong to, and a live job's `JobSubmitted` is often among the oldest. What may
go is decided from the log instead:

* the subjects of **finished jobs** — deleted, failed, aborted, terminated, completed, or refused
  — once none of their pods runs and no card holds a slice of theirs, beyond the `N` finished
  most recently (kept for `tessera events` / `get`);
* the **history of every card** but its last event: ledger events carry the card's usage after
  them, so the last one is the card's state (DESIGN §4).

Node, queue and priority-class subjects are kept whole (a node's registration is not state-
carrying when a `NodeLost` follows it). A purge removes only what was read when it was decided
(`seq` bound): a job submitted again under the same name meanwhile keeps its new events.
Services recover from a snapshot and the log after it. A snapshot taken while a job still ran
holds it live, and its end is in the log after the snapshot: purging that job's subject would
leave the restart a ghost that runs for ever (its booking never released, `tests/e2e/
test_compact.py`). So before it purges, a compaction appends `LogCompacted` with its horizon —
the highest sequence of a job message purged, by it or any compaction before — and a snapshot
older than the horizon is not used (`Snapshots.recover`: a replay of what is left instead).
Once its purges are done it appends `LogCompacted` again, none `running`: a fold that
overlapped the purges (it read a job's start, the end went before it got there) sees a new
record after it and is done again, and one that finds a compaction running waits for it.
Compactions are exclusive (the start record is appended on the last one, expected sequence,
only if none runs): counted, two at once or a slow one taken for dead undercounted and let
the ghost back in. A live compaction refreshes its record every `HEARTBEAT` s; one not
refreshed for `DEAD_AFTER` s died mid-purge and is taken for dead at once, by readers and by
the next compaction (which otherwise waits `COMPACTION_WAIT` for a live one, then gives up).
Jobs whose every message is older than a snapshot only leave it holding a finished job until
the service's own retention forgets it, as a replay would.
The full history is what replay debugging reads: compact after `tessera events -o` if needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from contracts.base import Event
from contracts.events import JobRejected, JobSubmitted, LogCompacted, TaskFinished, TaskStarted
from contracts.owners import parse_owner
from contracts.registry import default_registry
from contracts.subjects import Subjects
from services.core.retention import ended
from services.runtime import snapshot
from services.runtime.eventlog.model import Appended, Conflict, Entry, EventLog, LogError
from services.runtime.service import decode_stored
from services.runtime.snapshot import compaction_mark, periodically

log_ = logging.getLogger(__name__)

JobKey = tuple[str, str]


@dataclass
class Finished:
    """Which jobs the log says are over, in the order they ended, and which still run pods."""

    ended_at: dict[JobKey, int] = field(default_factory=dict)
    running: dict[JobKey, set[str]] = field(default_factory=dict)
    last_seq: dict[JobKey, int] = field(default_factory=dict)  # of the job's subject, as read

    def apply(self, seq: int, event: Event) -> None:
        ns, name = getattr(event, "namespace", None), getattr(event, "name", None)
        if not isinstance(ns, str) or not isinstance(name, str):
            return
        key = (ns, name)
        self.last_seq[key] = max(self.last_seq.get(key, 0), seq)
        if isinstance(event, TaskStarted):
            self.running.setdefault(key, set()).add(event.task)
        elif isinstance(event, TaskFinished):
            self.running.get(key, set()).discard(event.task)
        if isinstance(event, JobSubmitted):
            self.ended_at.pop(key, None)  # live again
        elif ended(event) or isinstance(event, JobRejected):
            self.ended_at.setdefault(key, seq)

    def to_forget(self, holding: set[JobKey], keep: int) -> list[JobKey]:
        """Finished jobs with nothing running and no slice held, oldest first, all but the
        `keep` newest of them."""
        idle = [k for k, _ in sorted(self.ended_at.items(), key=lambda kv: kv[1])
                if not self.running.get(k) and k not in holding]  # fmt: skip
        return idle[: max(0, len(idle) - keep)]


def holders(owners: Iterable[str]) -> set[JobKey]:
    out = set()
    for owner in owners:
        try:
            ns, job, _ = parse_owner(owner)
        except ValueError:
            continue
        out.add((ns, job))
    return out


@dataclass
class Compaction:
    jobs: int = 0
    cards: int = 0
    before: int = 0  # messages
    after: int = 0


class Compactable(EventLog, Protocol):
    """A log that can be purged by subject (JetStream's, and the in-memory one of the tests)."""

    subjects: Subjects

    async def message_count(self) -> int: ...

    async def purge(self, subject: str, upto: int | None = None, keep: int | None = None) -> None: ...


class CompactionBusy(LogError):
    """Another compaction is live (its record refreshed within `DEAD_AFTER` s): compactions
    are exclusive, and this one gave up waiting for it."""


def _stamped(event: LogCompacted, owner: str) -> dict[str, str]:
    headers = default_registry().envelope(event).to_headers()
    headers[snapshot.OWNER_HEADER] = owner
    headers[snapshot.STAMP_HEADER] = repr(snapshot.wall_clock())
    return headers


async def _put(log: Compactable, mark: snapshot.Mark, event: LogCompacted, owner: str, what: str) -> bool:
    """Append `event` on `mark` (expected sequence: True, or False if another record came
    first); older records are purged (the last one says it all)."""
    subject = log.subjects.compactions()
    entry = Entry(subject, default_registry().encode(event), _stamped(event, owner), mark.seq)
    result = await log.append(entry)
    if isinstance(result, Appended):
        await log.purge(subject, keep=1)
        return True
    if isinstance(result, Conflict):
        return False
    raise LogError(f"{subject}: LogCompacted ({what}) not appended ({result})")


async def record(log: Compactable, horizon: int, jobs: int, owner: str | None = None) -> int:
    """Append `LogCompacted` raising the horizon to `horizon`, `running` this compaction
    (`owner`), before any purge: a service that starts meanwhile waits for its end, and one
    already folding sees a new record after its fold and folds again (`Snapshots.recover`).
    Always a new record, even when the horizon is not raised: its purges still overlap folds.
    Exclusive: appended only on a record with none running, or a dead one's (not refreshed for
    `DEAD_AFTER` s); a live one is waited for up to `COMPACTION_WAIT`, then `CompactionBusy`.
    Returns the horizon in force; `heartbeat` runs during the purges, `finish` follows them."""
    owner = owner or uuid.uuid4().hex
    loop = asyncio.get_running_loop()
    deadline = loop.time() + snapshot.COMPACTION_WAIT
    while True:
        mark = await compaction_mark(log)
        if mark.live:
            if loop.time() >= deadline:
                since = snapshot.wall_clock() - mark.at if mark.at is not None else 0.0
                raise CompactionBusy(f"another compaction is running (record #{mark.seq}, refreshed "
                                     f"{since:.0f} s ago); not compacting alongside it")  # fmt: skip
            await asyncio.sleep(snapshot.COMPACTION_POLL)
            continue
        if mark.running:
            log_.warning("the compaction of record #%d stopped mid-purge (not refreshed for %g s): "
                         "taken for dead", mark.seq, snapshot.DEAD_AFTER)  # fmt: skip
        event = LogCompacted(horizon=max(mark.horizon, horizon), jobs=jobs, running=1)
        if await _put(log, mark, event, owner, "start"):
            return event.horizon


async def heartbeat(log: Compactable, owner: str, jobs: int, lost: asyncio.Event) -> None:
    """Refresh `owner`'s record every `HEARTBEAT` s while it purges, so readers and other
    compactions never take a slow compaction for dead; `lost` is set (and the beat stops) once
    the record is no longer its own (it was taken for dead after all: stop purging)."""
    while True:
        await asyncio.sleep(snapshot.HEARTBEAT)
        try:
            mark = await compaction_mark(log)
            if mark.owner != owner or not mark.running:
                lost.set()
                return
            await _put(log, mark, LogCompacted(horizon=mark.horizon, jobs=jobs, running=1), owner, "refresh")
        except LogError as exc:  # the log away for a moment: the next beat tries again
            log_.warning("compaction record not refreshed (%s)", exc)


async def finish(log: Compactable, jobs: int, owner: str) -> None:
    """Append `LogCompacted` with none `running`, once `owner`'s purges are done (or failed):
    readers that saw it running may trust a fold begun from now on. Not if the record is no
    longer its own: another compaction took it for dead and runs now."""
    while True:
        mark = await compaction_mark(log)
        if mark.owner != owner or not mark.running:
            log_.warning("this compaction's record was taken over (record #%d): not ending it", mark.seq)
            return
        if await _put(log, mark, LogCompacted(horizon=mark.horizon, jobs=jobs, running=0), owner, "end"):
            return


async def compact(log: Compactable, keep_finished: int) -> Compaction:
    s = log.subjects
    result = Compaction(before=await log.message_count())
    finished = Finished()
    async for msg in log.replay(1, s.all_jobs()):
        event = await decode_stored(msg)
        if event is not None:
            finished.apply(msg.seq, event)
    last_cards = await log.last_per_subject(s.all_cards())
    owners: list[str] = []
    for msg in last_cards:
        event = await decode_stored(msg)
        usage = getattr(event, "usage", None)
        owners += list(getattr(usage, "owners", ()))
    forget = finished.to_forget(holders(owners), keep_finished)
    if forget:  # recorded first: a snapshot below it is not used from now on
        owner = uuid.uuid4().hex
        await record(log, max(finished.last_seq.get(key, 0) for key in forget), len(forget), owner)
        lost = asyncio.Event()
        beat = asyncio.create_task(heartbeat(log, owner, len(forget), lost))
        try:
            for ns, name in forget:
                if lost.is_set():
                    raise CompactionBusy("this compaction was taken for dead (its record was not "
                                         "refreshed in time); stopped")  # fmt: skip
                upto = finished.last_seq.get((ns, name), 0) + 1  # not what landed since we read
                await log.purge(s.job(ns, name), upto=upto)
                result.jobs += 1
        finally:  # a purge failed: the others are not running either
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            await finish(log, result.jobs, owner)
    for msg in last_cards:  # harmless to any snapshot: a card's last event carries its state
        await log.purge(msg.subject, keep=1)
        result.cards += 1
    result.after = await log.message_count()
    return result




async def keep_compacted(log: Compactable, keep_finished: int, every: float, stopping: asyncio.Event) -> None:
    """Compact every `every` s until `stopping` (automatic retention: what a limit on the stream
    would do, without ever dropping a live job's events)."""

    async def once() -> None:
        done = await compact(log, keep_finished)
        if done.jobs or done.before != done.after:
            log_.info("compacted: forgot %d finished jobs (kept %d), %d → %d messages",
                      done.jobs, keep_finished, done.before, done.after)  # fmt: skip

    await periodically(stopping, every, once, "compaction")
