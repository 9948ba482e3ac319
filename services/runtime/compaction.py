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
Once its purges are done it appends `LogCompacted` again, one compaction fewer `running`: a
fold that overlapped the purges (it read a job's start, the end went before it got there) sees
a new record after it and is done again, and one that finds a compaction running waits for it.
A compaction that finds another running waits for it too (`COMPACTION_WAIT`), then takes it
for dead (its process stopped mid-purge) and counts from itself.
Jobs whose every message is older than a snapshot only leave it holding a finished job until
the service's own retention forgets it, as a replay would.
The full history is what replay debugging reads: compact after `tessera events -o` if needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from contracts.base import Event
from contracts.events import JobRejected, JobSubmitted, LogCompacted, TaskFinished, TaskStarted
from contracts.owners import parse_owner
from contracts.registry import default_registry
from contracts.subjects import Subjects
from services.core.retention import ended
from services.runtime.eventlog.model import Appended, Conflict, Entry, EventLog, LogError
from services.runtime.service import decode_stored
from services.runtime.snapshot import COMPACTION_WAIT, compaction_mark, periodically, settled_mark

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


#: a record lost to a concurrent compaction's is read and raised again, this many times
RECORD_ATTEMPTS = 5


async def _append_record(log: Compactable, what: str, make: Callable[[int, int], LogCompacted]) -> LogCompacted:
    """Append `make(horizon, running)` of the subject's last record on that record (expected
    sequence): two compactors at once never lower the horizon nor lose a count. Older records
    are purged (the last one says it all)."""
    subject = log.subjects.compactions()
    reg = default_registry()
    for _attempt in range(RECORD_ATTEMPTS):
        mark = await compaction_mark(log)
        event = make(mark.horizon, mark.running)
        env = reg.envelope(event)
        result = await log.append(Entry(subject, reg.encode(event), env.to_headers(), mark.seq))
        if isinstance(result, Appended):
            await log.purge(subject, keep=1)
            return event
        if not isinstance(result, Conflict):
            raise LogError(f"{subject}: LogCompacted ({what}) not appended ({result})")
    raise LogError(f"{subject}: LogCompacted ({what}) lost to another compaction {RECORD_ATTEMPTS} times")


async def record(log: Compactable, horizon: int, jobs: int) -> int:
    """Append `LogCompacted` raising the horizon to `horizon` and counting this compaction
    `running`, before any purge: a service that starts meanwhile waits for its end, and one
    already folding sees a new record after its fold and folds again (`Snapshots.recover`).
    Always a new record, even when the horizon is not raised: its purges still overlap folds.
    Another compaction running is waited for (`COMPACTION_WAIT`), then taken for dead. Returns
    the horizon in force; `finish` must follow the purges."""
    mark = await settled_mark(log)
    dead = mark.running  # still running after the wait: stopped mid-purge, never to finish
    if dead:
        log_.warning("a compaction started at #%d has not ended within %g s: taken for dead",
                     mark.seq, COMPACTION_WAIT)  # fmt: skip

    def start(previous: int, running: int) -> LogCompacted:
        return LogCompacted(horizon=max(previous, horizon), jobs=jobs, running=max(0, running - dead) + 1)

    return (await _append_record(log, "start", start)).horizon


async def finish(log: Compactable, jobs: int) -> None:
    """Append `LogCompacted` counting one compaction fewer `running`, once its purges are done
    (or failed): readers that saw it running may trust a fold begun from now on."""

    def end(previous: int, running: int) -> LogCompacted:
        return LogCompacted(horizon=previous, jobs=jobs, running=max(0, running - 1))

    await _append_record(log, "end", end)


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
        await record(log, max(finished.last_seq.get(key, 0) for key in forget), len(forget))
        try:
            for ns, name in forget:
                upto = finished.last_seq.get((ns, name), 0) + 1  # not what landed since we read
                await log.purge(s.job(ns, name), upto=upto)
                result.jobs += 1
        finally:  # a purge failed: the others are not running either
            await finish(log, result.jobs)
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
