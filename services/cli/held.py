"""What the log already holds when `tessera up` starts, and how to empty it.

The log outlives the processes: `up` with another inventory brings the old nodes and jobs back,
and their tasks fail later as lost with no visible reason (issue 13, item 10). So `up` says at
start what it found — and which recorded nodes the new inventory does not have — and points at
`up --fresh` / `down --purge`.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

import nats.js.errors
import yaml

from contracts.envelope import TYPE
from contracts.registry import UndecodableEvent, default_registry
from contracts.subjects import Subjects
from services.cli.connection import Unreachable, open_log
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import StoredMessage
from services.runtime.snapshot import buckets_of

#: Queues every system has; not worth reporting.
BUILT_IN_QUEUES = frozenset({"default", "root"})
ENDED = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
#: job subjects read whole to see whether the job was deleted before its pods' ends: a summary
#: line must not hold `up`'s start for long on a log of many running jobs
MAX_READ_WHOLE = 256


@dataclass(frozen=True, slots=True)
class Held:
    events: int
    nodes: tuple[str, ...]
    jobs: int
    live_jobs: int
    queues: tuple[str, ...]


def _ended(msg: StoredMessage) -> bool:
    """Whether a job subject's last event leaves the job finished."""
    if msg.headers.get(TYPE, "") != "JobPhaseChanged":
        return False
    try:
        return default_registry().decode("JobPhaseChanged", msg.data).phase in ENDED  # type: ignore[attr-defined]
    except UndecodableEvent:  # poison: readers skip it
        return False


def _maybe_deleted(msg: StoredMessage) -> bool:
    """A job subject whose last event may follow the job's deletion: its pods' ends are
    reported after it (`TaskFinished … deleted`), so the last event is not the `JobDeleted`."""
    return msg.headers.get(TYPE, "") == "TaskFinished"


def summarize(events: int, nodes: list[StoredMessage], jobs: list[StoredMessage],
              queues: list[StoredMessage], subjects: Subjects,
              deleted: frozenset[str] = frozenset()) -> Held:  # fmt: skip
    """From the last message of every node, job and queue subject (O(aggregates), no replay);
    `deleted`: the job subjects found deleted although their last event is not the deletion.
    Deleted jobs and queues are not held: `up` counted them as though they would come back."""

    def name(msg: StoredMessage) -> str:
        return subjects.parse(msg.subject)[1][-1]

    held = [m for m in jobs if m.headers.get(TYPE, "") != "JobDeleted" and m.subject not in deleted]
    queued = {name(m) for m in queues if m.headers.get(TYPE, "") != "QueueDeleted"}
    return Held(
        events=events,
        nodes=tuple(sorted({name(m) for m in nodes})),
        jobs=len(held),
        live_jobs=sum(not _ended(m) for m in held),
        queues=tuple(sorted(queued - BUILT_IN_QUEUES)),
    )


def describe(held: Held, inventory_nodes: tuple[str, ...] | None) -> list[str]:
    """The lines `up` prints; nothing for an empty log."""
    if not held.events:
        return []
    lines = [f"the log already holds {held.events} events: {len(held.nodes)} node(s)"
             f"{' (' + ', '.join(held.nodes) + ')' if held.nodes else ''}, {held.jobs} job(s) "
             f"({held.live_jobs} not finished), {len(held.queues)} queue(s) besides root and default"
             f"{' (' + ', '.join(held.queues) + ')' if held.queues else ''}"]  # fmt: skip
    if inventory_nodes is not None:
        gone = [n for n in held.nodes if n not in inventory_nodes]
        if gone:
            lines.append(f"  nodes in the log but not in this inventory: {', '.join(gone)} — "
                         "they will be marked lost and their tasks will fail")  # fmt: skip
    lines.append("  (`tessera up --fresh` or `tessera down --purge` starts with an empty log)")
    return lines


def inventory_nodes(path: str) -> tuple[str, ...] | None:
    """Node names of an inventory file, or None when there is none or it cannot be read (the
    node-agent reports that problem itself)."""
    if not path:
        return None
    try:
        doc = yaml.safe_load(Path(path).read_text())
        return tuple(str(n["name"]) for n in doc["nodes"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None


async def read_held(url: str, root: str = "tessera") -> Held:
    try:
        log = await open_log(url, root, create=False)
    except Unreachable as exc:
        if "not found" not in str(exc):
            raise
        return Held(0, (), 0, 0, ())  # no stream yet: nothing held
    try:
        return await held_of(log)
    finally:
        await log.close()


async def held_of(log: JetStreamLog) -> Held:
    info = await log.js.stream_info(log.stream)
    s = log.subjects
    jobs = await log.last_per_subject(s.all_jobs())
    unsure = [m.subject for m in jobs if _maybe_deleted(m)][:MAX_READ_WHOLE]  # (beyond: counted as held)
    deleted = frozenset([subject for subject in unsure if await _deleted(log, subject)])
    return summarize(info.state.messages, await log.last_per_subject(s.all_nodes()), jobs,
                     await log.last_per_subject(s.all_queues()), s, deleted)  # fmt: skip


async def _deleted(log: JetStreamLog, subject: str) -> bool:
    """Whether the job's last submission or deletion on `subject` is a deletion (read only for
    the few subjects `_maybe_deleted` names)."""
    last = ""
    async for msg in log.replay(1, subject):
        kind = msg.headers.get(TYPE, "")
        if kind in ("JobSubmitted", "JobDeleted"):
            last = kind
    return last == "JobDeleted"


async def _purge(url: str, root: str) -> int:
    log = await open_log(url, root)
    try:
        for stream in (log.stream, log.dlq_stream):
            await log.js.delete_stream(stream)
        for bucket in buckets_of(log.stream):  # snapshots of the log just gone
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await log.js.delete_object_store(bucket)
        return 2
    finally:
        await log.close()


def purge(url: str, root: str = "tessera") -> int:
    """Delete the log's streams on a broker `up` did not start (the services re-create them)."""
    return asyncio.run(_purge(url, root))


def report_held(url: str, inventory: str, fresh: bool = False) -> None:
    """`up`'s first words after NATS is up: what the log holds (or that it was emptied)."""
    if fresh:
        print(f"  log purged ({purge(url)} streams deleted)")
        return
    for line in describe(asyncio.run(read_held(url)), inventory_nodes(inventory)):
        print(line)
