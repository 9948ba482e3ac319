"""Restart cost bounded by what changed since the last snapshot, not by history (issue 12 item 7).

A service's projection at sequence `U` is the fold of the log up to `U`. A snapshot is that fold
at some `S ≤ U`, encoded (msgspec msgpack, sets sorted: the same state gives the same bytes in
every process), so recovery is: load the snapshot, fold `S+1 … U`. A snapshot is written only
from the log — the stored snapshot plus the log's tail, folded again — never from the live
state, which folds its own appends before the log orders them and refolds redeliveries: what
is stored is exactly what a full replay would rebuild, by construction.

Stored in a JetStream object store (`<stream>_snapshots_<service>`: a projection can outgrow
one NATS message; one bucket per service, so each may write only its own — issue 23), with a header saying whose state it is (service, a version
that names the state's shape and the fold's configuration), which stream (its creation time:
`up --fresh` or `down --purge` made another one) and which sequence it covers. Anything else —
no snapshot, an undecodable one, another version or stream, one ahead of the log, one older
than the log's compaction horizon — is not used: the service replays from sequence 1 and says
why.

Compaction (`services/runtime/compaction.py`) purges finished jobs' subjects whole. A snapshot
that holds such a job live (it ran when the snapshot was taken) needs the job's end, which was
in the purged part of the tail: folded onward it would keep the job — and its booking — for
ever. Compaction records how far it purged (`LogCompacted.horizon`) before purging; a snapshot
below the horizon is not used, and a recovery during which the horizon rose (a compaction ran
meanwhile) is done again. Card purges leave each card's last, state-carrying event: no horizon.

A fold that runs while a compaction purges may read a job's start and find its end purged
before it gets there: a ghost, whichever snapshot it started from. So a compaction records its
start and its end (`LogCompacted.running`), and a fold is trusted only if it began with no
compaction running and the subject's last record is the same message after it (its sequence,
not its horizon: a compaction that raises nothing still purges). A recovery waits for a running
compaction to end (up to `COMPACTION_WAIT`), and folds again when a record came meanwhile; the
snapshot writer skips the period. A compaction that died mid-purge (its record not refreshed
for `DEAD_AFTER` s) is neither waited for nor skipped for: it purges nothing any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

import msgspec

from contracts.base import Event
from contracts.events import LogCompacted
from contracts.permissions import SNAPSHOTTERS, snapshot_bucket
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.runtime.eventlog.model import EventLog, LogError, StoredMessage, matcher
from services.runtime.service import PoisonHandler, decode_stored, replay_decoded, skip_poison
from services.runtime.waits import within

log = logging.getLogger(__name__)

S = TypeVar("S")

#: a recovery that a compaction overtook is done again, at most this many times in all
RECOVER_ATTEMPTS = 10

#: how long a reader (or another compaction) waits for a live compaction's end: a reader then
#: folds anyway (and again if a record came meanwhile), a compaction gives up ("another
#: compaction is running"); a compaction's purges are one request per forgotten job
COMPACTION_WAIT = 30.0
#: how often the waiting reader reads the compactions' record again
COMPACTION_POLL = 0.2
#: a live compaction refreshes its record this often while it purges (`LogCompacted` again,
#: same horizon, stamped anew), so a slow one is never taken for dead…
HEARTBEAT = 5.0
#: …and a running record not refreshed for this long is a compaction that died mid-purge (kill
#: -9, OOM, the log lost before its end record): readers, the writer and the next compaction
#: judge that at once from the record's stamp, instead of waiting, or never writing again
DEAD_AFTER = 30.0
#: headers of a compaction's record: who appended it, and when (wall clock, seconds) — the
#: stamp is the compactor's clock read by other hosts' clocks: DEAD_AFTER is far above skew
OWNER_HEADER = "Tessera-Compaction-Owner"
STAMP_HEADER = "Tessera-Compaction-At"


def wall_clock() -> float:
    """The clock records are stamped and judged by (a module function: tests move it)."""
    return time.time()


#: Bump when the stored wrapper (not a service's state) changes shape.
FORMAT = 1


class Mark(NamedTuple):
    """The log's last compaction record as a reader saw it."""

    seq: int  # the record's own sequence (0: never compacted)
    horizon: int
    running: int  # > 0: a compaction purges now (older records counted them): no fold is trusted
    owner: str = ""  # the running compaction's id (its heartbeats and end check it is still theirs)
    at: float | None = None  # when the record was appended or last refreshed (None: not stamped)

    def dead(self, now: float | None = None) -> bool:
        """Running, but not refreshed for `DEAD_AFTER` s: its compactor stopped mid-purge. A
        running record without a stamp was written before heartbeats existed, by a compaction
        long over or dead: dead too (else nothing would ever clear it)."""
        if not self.running:
            return False
        if self.at is None:
            return True
        return (wall_clock() if now is None else now) - self.at > DEAD_AFTER

    @property
    def live(self) -> bool:
        """A compaction purges now: a fold overlapping it is not to be trusted."""
        return bool(self.running) and not self.dead()


async def compaction_mark(event_log: EventLog) -> Mark:
    """The last `LogCompacted`, read from the stream's leader: a follower that has not applied
    the newest record would answer an older one and a fold would be trusted against it."""
    subjects = getattr(event_log, "subjects", None)
    if subjects is None:
        return Mark(0, 0, 0)
    msg = await event_log.last(subjects.compactions(), leader=True)
    if msg is None:
        return Mark(0, 0, 0)
    event = await decode_stored(msg)
    if not isinstance(event, LogCompacted):  # undecodable: no snapshot can be trusted
        return Mark(msg.seq, msg.seq, 0)
    try:
        at: float | None = float(msg.headers[STAMP_HEADER])
    except (KeyError, ValueError):
        at = None
    return Mark(msg.seq, event.horizon, event.running, msg.headers.get(OWNER_HEADER, ""), at)


async def compacted_horizon(event_log: EventLog) -> tuple[int, int]:
    """(the sequence of the log's last `LogCompacted`, 0 if none; its horizon): no snapshot
    below the horizon may be folded onward, some job message after it having been purged."""
    mark = await compaction_mark(event_log)
    return mark.seq, mark.horizon


async def settled_mark(event_log: EventLog, wait: float | None = None) -> Mark:
    """The last compaction record once no live compaction runs, waiting up to `wait` s (default
    `COMPACTION_WAIT`) for one that does; a dead one (`Mark.dead`) is not waited for. Still
    running then, it is returned as it is (the caller decides what that means to it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (COMPACTION_WAIT if wait is None else wait)
    while True:
        mark = await compaction_mark(event_log)
        if not mark.live or loop.time() >= deadline:
            return mark
        await asyncio.sleep(COMPACTION_POLL)


class Header(msgspec.Struct, frozen=True, kw_only=True):
    format: int = FORMAT
    service: str
    version: str
    stream: str
    seq: int


class Stored(msgspec.Struct, frozen=True, kw_only=True):
    header: Header
    body: bytes


_STORED = msgspec.msgpack.Decoder(Stored)
_ENCODER = msgspec.msgpack.Encoder()


def shape_of(*types: object) -> str:
    """A fingerprint of the state's types (their JSON Schema): a field added, removed or retyped
    makes every older snapshot foreign without anyone remembering to bump a number."""
    schema = msgspec.json.encode(msgspec.json.schema_components(types)[1])
    return hashlib.sha256(schema).hexdigest()[:16]


class Projection(Protocol[S]):
    """What a service folds, as a value that can be stored: the shell of `Snapshots`."""

    name: str  # the object's name in the bucket (the service)
    patterns: Sequence[str]  # the subjects it folds
    types: frozenset[str] | None  # the event types it decodes (None: all)

    def version(self) -> str:
        """The state's shape and the fold's configuration (e.g. the retention)."""
        ...

    def empty(self) -> S: ...

    def fold(self, state: S, msg: StoredMessage, event: Event) -> S: ...

    def encode(self, state: S) -> bytes: ...

    def decode(self, data: bytes) -> S: ...


class SnapshotStore(Protocol):
    async def identity(self) -> str:
        """Which log the snapshots are of (a stream re-created under the same name is another)."""
        ...

    async def load(self, name: str) -> bytes | None: ...

    async def save(self, name: str, data: bytes) -> None: ...


class MemoryStore:
    """Snapshots of an in-memory log (tests, simulate)."""

    def __init__(self, identity: str = "memory") -> None:
        self._identity = identity
        self.objects: dict[str, bytes] = {}

    async def identity(self) -> str:
        return self._identity

    async def load(self, name: str) -> bytes | None:
        return self.objects.get(name)

    async def save(self, name: str, data: bytes) -> None:
        self.objects[name] = data


class Snapshots(Generic[S]):
    """Recover a projection from its snapshot and the log's tail; keep the snapshot recent."""

    def __init__(
        self,
        event_log: EventLog,
        projection: Projection[S],
        store: SnapshotStore | None = None,
        every: int = 0,
        on_poison: PoisonHandler = skip_poison,
    ) -> None:
        """`every`: write a snapshot once the log has moved this many messages past the last
        one (0: never; recovery then always replays from sequence 1)."""
        self.log = event_log
        self.projection = projection
        self.store = store
        self.every = every
        self.on_poison = on_poison
        self.saved: tuple[int, bytes] | None = None  # (seq, state) of the snapshot in the store
        self.used = 0  # the snapshot's sequence recovery started from (0: a full replay)
        self._kept: tuple[int, S] | None = None  # (seq, state) of the last write, not re-decoded
        self.why = ""  # why no snapshot was used
        #: riding on the service's deliveries (`ride`): a copy of the projection folded as they
        #: arrive, complete up to `_at`, so a write only encodes — folding the tail from the
        #: log read and decoded every message a second time, 11-20 % of the queue, admission
        #: and scheduler processes (issue 29's profile)
        self.riding = False
        self._copy: S | None = None
        self._at = 0
        self._recovered: tuple[int, bytes] | None = None  # what `recover` ended at, encoded
        self._matches: Callable[[str], bool] = matcher(())  # the projection's patterns, by `ride`
        #: the service's own state and the last sequence folded into it, for a service whose
        #: state is nothing but the fold of its deliveries in order (the scheduler's view):
        #: a write encodes that, and no copy is folded beside it — the copy was a second fold
        #: of every event, a tenth of the scheduler at 5,000 nodes (issue 29)
        self.live: Callable[[], tuple[int, S]] | None = None

    @property
    def enabled(self) -> bool:
        return self.store is not None and self.every > 0

    async def _header(self, seq: int) -> Header:
        assert self.store is not None
        p = self.projection
        return Header(
            service=p.name, version=p.version(), stream=await self.store.identity(), seq=seq
        )

    async def _load(self, until: int, horizon: int = 0) -> tuple[int, bytes] | None:
        """The stored snapshot if it is ours and usable at `until` with the log compacted up to
        `horizon`, else None (and `why`)."""
        if self.store is None:
            self.why = "snapshots are off"
            return None
        try:
            data = await self.store.load(self.projection.name)
        except Exception as exc:  # the bucket unreachable: a full replay is always correct
            self.why = f"the snapshot could not be read ({exc})"
            return None
        if data is None:
            self.why = "there is no snapshot yet"
            return None
        try:
            stored = _STORED.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.why = f"the snapshot is undecodable ({exc})"
            return None
        want = await self._header(stored.header.seq)
        got = stored.header
        if got.format != FORMAT or got.service != want.service or got.version != want.version:
            self.why = (f"the snapshot is of another version ({got.service} {got.version}, "
                        f"format {got.format}; this is {want.service} {want.version})")  # fmt: skip
        elif got.stream != want.stream:
            self.why = f"the snapshot is of another stream ({got.stream}; the log is {want.stream})"
        elif got.seq > until:
            self.why = f"the snapshot covers #{got.seq}, beyond the log's last #{until}"
        elif got.seq < horizon:
            self.why = (f"the snapshot covers #{got.seq} and the log was compacted since: a finished "
                        f"job's events up to #{horizon} were purged, and the snapshot may hold it live")  # fmt: skip
        else:
            return got.seq, stored.body
        return None

    def ride(self, filters: Sequence[str], in_order: bool) -> bool:
        """Fold from the service's own deliveries (`see`) if they hold every message the
        projection folds (its patterns among the service's filters, or under an all-events
        one) and arrive in stream order (one consumer, or one followed pattern); else writes
        fold the log's tail as before. After `recover`, before the first delivery."""
        covered = all(pt in filters or any(f.endswith(".>") and pt.startswith(f[:-1]) for f in filters)
                      for pt in self.projection.patterns)  # fmt: skip
        recovered, self._recovered = self._recovered, None
        self.riding = recovered is not None and in_order and covered
        if recovered is not None and self.riding and self.live is None:
            self._at, self._copy = recovered[0], self.projection.decode(recovered[1])
            self._matches = matcher(self.projection.patterns)
        return self.riding

    def see(self, message: StoredMessage, kind: str, decoded: Callable[[], Event]) -> None:
        """One delivery of the service, first or again: folded into the copy on its first
        arrival (first deliveries come in stream order; a redelivery is at or below `_at`)."""
        copy = self._copy
        if copy is None or message.seq <= self._at:
            return
        self._at = message.seq
        p = self.projection
        if p.types is not None and kind not in p.types:
            return
        if not self._matches(message.subject):
            return
        try:
            event = decoded()
        except Exception:  # poison: the replay skips it too (and the service parks it)
            return
        self._copy = p.fold(copy, message, event)

    async def _fold(self, state: S, start: int, until: int) -> S:
        p = self.projection
        async for msg, event in replay_decoded(self.log, p.patterns, until, p.types,
                                                on_poison=self.on_poison, start=start):  # fmt: skip
            state = p.fold(state, msg, event)
        return state

    async def recover(self, until: int) -> S:
        """The projection at `until`: the snapshot plus the tail if usable, else a full replay.
        A long tail is snapshotted at once, so the next start does not fold it again."""
        p = self.projection
        for attempt in range(1, RECOVER_ATTEMPTS + 1):
            mark = await settled_mark(self.log)
            if mark.dead():
                log.warning("%s: the compaction of record #%d stopped mid-purge (not refreshed "
                            "for %g s): taken for dead", p.name, mark.seq, DEAD_AFTER)  # fmt: skip
            elif mark.running:
                log.warning("%s: a compaction running at #%d has not ended within %g s; "
                            "recovering meanwhile (again if it ends or refreshes its record)",
                            p.name, mark.seq, COMPACTION_WAIT)  # fmt: skip
            state = await self._recover(until, mark.horizon)
            after = await compaction_mark(self.log)
            # trusted: no record came while folding (a compaction that started or ended meanwhile
            # purged during the fold), and none ran when it began — or the tail folded lies above
            # every purge, recorded or running
            if after.seq == mark.seq or after.horizon <= self.used:
                break
            self.why = f"the log was compacted while recovering (horizon #{after.horizon})"
            if attempt == RECOVER_ATTEMPTS:
                log.warning("%s: the log was compacted during each of %d recoveries; keeping the "
                            "last (it may hold a finished job live until the next restart)",
                            p.name, attempt)  # fmt: skip
            else:
                log.info("%s: the log was compacted while recovering (horizon #%d); again",
                         p.name, after.horizon)  # fmt: skip
        if self.enabled:
            body = p.encode(state)
            if until - self.used >= self.every:
                await self._save(until, body)
            self._recovered = (until, body)  # for `ride`: the service's state is its own
        return state

    async def _recover(self, until: int, horizon: int) -> S:
        p = self.projection
        base = await self._load(until, horizon)
        state: S = p.empty()
        self.used = 0
        if base is not None:
            try:
                state = p.decode(base[1])
                self.used = base[0]
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError) as exc:
                self.why = f"the snapshot's state is undecodable ({exc})"
                state = p.empty()
        if self.used:
            self.saved = base
            if self.used >= until:  # the snapshot is the log's end: no "replaying #654…#653"
                log.info("%s: from the snapshot at #%d, nothing to replay", p.name, self.used)
            else:
                log.info("%s: from the snapshot at #%d, replaying #%d…#%d", p.name, self.used,
                         self.used + 1, until)  # fmt: skip
        else:
            log.info("%s: replaying the log from #1 to #%d: %s", p.name, until, self.why)
        return await self._fold(state, self.used + 1, until)

    async def _save(self, seq: int, body: bytes) -> None:
        assert self.store is not None
        data = _ENCODER.encode(Stored(header=await self._header(seq), body=body))
        try:
            await self.store.save(self.projection.name, data)
        except Exception as exc:  # a later write catches up; recovery never depends on this one
            log.warning("%s: snapshot at #%d not written (%s)", self.projection.name, seq, exc)
            return
        self.saved = (seq, body)
        log.info("%s: snapshot at #%d (%d bytes)", self.projection.name, seq, len(data))

    async def write(self, until: int | None = None) -> bool:
        """Fold the log's tail onto the last snapshot and store it, if the log moved `every`
        messages past it (or `until` is given). True if written."""
        if self.store is None:
            return False
        riding = until is None and self.riding
        live = self.live() if riding and self.live is not None else None
        last = (live[0] if live else self._at) if riding else await self.log.last_sequence() if until is None else until
        seq, body = self.saved or (0, b"")
        # every `every` messages at first, then once the log grew by a quarter: each snapshot
        # costs the whole state, so a fixed step made a long busy run quadratic (issue 29's
        # profile: 4-8 % of every service) while the tail a restart folds stays ≤ 1/5 of the log
        if last <= seq or (until is None and last - seq < max(self.every, seq // 4)):
            return False
        p = self.projection
        if riding:  # encoded now, before any await: the state as of `last`
            await self._save(last, p.encode(live[1] if live else self._copy))  # type: ignore[arg-type]
            return self.saved is not None and self.saved[0] == last
        mark = await compaction_mark(self.log)
        if mark.live:  # its purges would land in the fold: the next period, once it ended (a
            # dead one never ends: its purges stopped, the fold below is as good as after an end)
            return False
        if seq < mark.horizon:  # the tail after the last snapshot was compacted: fold what is left
            seq, body, self._kept = 0, b"", None
        # the state the last write folded, kept (this writer's own copy: the service's live state
        # is another object), so a write folds only the tail and encodes — decoding the whole
        # last snapshot back first was a third of what a write cost
        kept = self._kept[1] if self._kept is not None and self._kept[0] == seq else None
        state = kept if kept is not None else (p.decode(body) if body else p.empty())
        self._kept = None  # folding moves it past `seq`: it is only good again once saved
        state = await self._fold(state, seq + 1, last)
        after = await compaction_mark(self.log)
        if after.seq != mark.seq and after.horizon > seq:
            return False  # compacted while folding: the next period folds what is left
        await self._save(last, p.encode(state))
        if self.saved is not None and self.saved[0] == last:
            self._kept = (last, state)
            return True
        return False

    async def keep(self, stopping: asyncio.Event, period: float = 5.0) -> None:
        """Every `period` s, snapshot if the log moved `every` messages past the last one."""
        if self.enabled:
            await periodically(stopping, period, self.write, f"{self.projection.name}: snapshot")


async def periodically(stopping: asyncio.Event, period: float, action: Callable[[], Awaitable[object]],
                       what: str) -> None:  # fmt: skip
    """`action` every `period` s until `stopping`; a failure is logged and the next period
    tries again. The log refusing or away for a moment (`LogError`: another compaction running,
    a timeout) is one WARNING line saying why, not a traceback an operator reads as a bug."""
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await within(stopping.wait(), period)
        if stopping.is_set():
            return
        try:
            await action()
        except LogError as exc:
            log.warning("%s not done (%s); again in %g s", what, exc, period)
        except Exception:
            log.exception("%s failed; again in %g s", what, period)


#: one read of a snapshot object; a few MB at most, on loopback or in the cluster
LOAD_TIMEOUT = 10.0
LOAD_ATTEMPTS = 3


class ObjectStoreSnapshots:
    """`SnapshotStore` on a JetStream object store beside the log's stream."""

    def __init__(self, event_log: object) -> None:
        from services.runtime.eventlog.jetstream import JetStreamLog

        assert isinstance(event_log, JetStreamLog)
        self.log = event_log
        self._stores: dict[str, object] = {}  # bucket -> its object store

    async def _obj(self, name: str) -> object:
        bucket = bucket_of(self.log.stream, name)
        if bucket not in self._stores:
            import nats.js.errors
            from nats.js.api import ObjectStoreConfig, StorageType

            js = self.log.js
            try:
                self._stores[bucket] = await js.object_store(bucket)
            except nats.js.errors.NotFoundError:
                config = ObjectStoreConfig(bucket=bucket, storage=StorageType.FILE,
                                           replicas=self.log.replicas)  # fmt: skip
                try:
                    self._stores[bucket] = await js.create_object_store(bucket, config=config)
                except nats.js.errors.BadRequestError:  # another replica created it meanwhile
                    self._stores[bucket] = await js.object_store(bucket)
        return self._stores[bucket]

    async def identity(self) -> str:
        info = await self.log.js.stream_info(self.log.stream)
        return f"{self.log.stream}@{info.created}"

    async def load(self, name: str) -> bytes | None:
        """The stored bytes, or None (never written, deleted, or not readable now: the caller
        then replays the log in full, which is always right).

        nats-py's object get reads the object's info, then follows its chunks with no end but
        the last chunk: when the object is replaced in between (a service saving its next
        snapshot deletes the old chunks) the chunks never come and the get waits for ever. Each
        attempt is bounded and reads the info anew."""
        import nats.js.errors

        store = await self._obj(name)
        for _attempt in range(LOAD_ATTEMPTS):
            try:
                async with asyncio.timeout(LOAD_TIMEOUT):
                    result = await store.get(name)  # type: ignore[attr-defined]
            except nats.js.errors.NotFoundError:  # never written, or deleted
                return None
            except TimeoutError:
                log.warning("snapshot %s: not read within %.0f s (replaced meanwhile?); again",
                            name, LOAD_TIMEOUT)  # fmt: skip
                continue
            return bytes(result.data or b"")
        return None

    async def save(self, name: str, data: bytes) -> None:
        store = await self._obj(name)
        await store.put(name, data)  # type: ignore[attr-defined]


def bucket_of(stream: str, service: str) -> str:
    return snapshot_bucket(stream, service)


def buckets_of(stream: str) -> list[str]:
    """Every snapshot bucket of a log's services (and the one they shared before issue 23)."""
    return [f"{stream}_snapshots", *(bucket_of(stream, s) for s in sorted(SNAPSHOTTERS))]


@dataclass(frozen=True, slots=True)
class Retention:
    """What the operator set (`--snapshot-every`, `--keep-finished`), handed to each service
    before it recovers (`retain`)."""

    store: SnapshotStore | None = None
    snapshot_every: int = 0
    keep_finished: int = DEFAULT_KEEP_FINISHED


def msgpack_codec(
    state_type: type[S],
) -> tuple[msgspec.msgpack.Encoder, msgspec.msgpack.Decoder[S]]:
    """An encoder/decoder pair for a state type, built once (msgspec: reuse them)."""
    return msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(state_type)
