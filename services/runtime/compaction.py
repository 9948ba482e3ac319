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
Services recover from a snapshot and the log after it; a snapshot may still hold a job purged
since (finished, so harmless) until the service's own retention forgets it.
The full history is what replay debugging reads: compact after `tessera events -o` if needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts.base import Event
from contracts.events import JobRejected, JobSubmitted, TaskFinished, TaskStarted
from contracts.owners import parse_owner
from services.core.retention import ended
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import decode_stored
from services.runtime.snapshot import periodically

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


async def compact(log: JetStreamLog, keep_finished: int) -> Compaction:
    s = log.subjects
    result = Compaction(before=(await log.js.stream_info(log.stream)).state.messages)
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
    for ns, name in finished.to_forget(holders(owners), keep_finished):
        upto = finished.last_seq.get((ns, name), 0) + 1  # not what landed since we read
        await log.js.purge_stream(log.stream, subject=s.job(ns, name), seq=upto)
        result.jobs += 1
    for msg in last_cards:
        await log.js.purge_stream(log.stream, subject=msg.subject, keep=1)
        result.cards += 1
    result.after = (await log.js.stream_info(log.stream)).state.messages
    return result




async def keep_compacted(log: JetStreamLog, keep_finished: int, every: float, stopping: asyncio.Event) -> None:
    """Compact every `every` s until `stopping` (automatic retention: what a limit on the stream
    would do, without ever dropping a live job's events)."""

    async def once() -> None:
        done = await compact(log, keep_finished)
        if done.jobs or done.before != done.after:
            log_.info("compacted: forgot %d finished jobs (kept %d), %d → %d messages",
                      done.jobs, keep_finished, done.before, done.after)  # fmt: skip

    await periodically(stopping, every, once, "compaction")
