"""Values and the interface shared by every event-log backend.

A write that loses an optimistic-concurrency race is not an exception but a `Conflict` value:
callers must decide (re-read and re-decide, or reject), so the type system makes them look.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from contracts.subjects import Subjects


@dataclass(frozen=True, slots=True)
class StoredMessage:
    seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


#: messages an atomic batch may hold (nats-server's limit; the in-memory log keeps it too)
MAX_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """One message to append. `expected_last_subject_seq`: None = no check, 0 = subject empty."""

    subject: str
    data: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    expected_last_subject_seq: int | None = None


@dataclass(frozen=True, slots=True)
class Appended:
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Conflict:
    """The subject moved on since the writer read it: re-read, re-decide."""

    subject: str
    expected: int
    actual: int

    def __str__(self) -> str:
        return f"{self.subject}: expected last sequence {self.expected}, found {self.actual}"


@dataclass(frozen=True, slots=True)
class BatchCommitted:
    first_seq: int
    last_seq: int
    count: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A batch holding a message id the log already has: this very write (same cause, same
    index) landed before. Not a conflict — re-deciding cannot help; re-read and recognise it.
    The log only knows within its duplicate window, so writers must not rely on seeing this."""

    subject: str
    msg_id: str = ""

    def __str__(self) -> str:
        return f"{self.subject}: message id {self.msg_id or '?'} already in the log"


AppendResult = Appended | Conflict
BatchResult = BatchCommitted | Conflict | Duplicate


@dataclass(frozen=True, slots=True)
class Followed:
    """A message a follower read: there is nothing to settle (see `EventLog.follow`)."""

    message: StoredMessage
    attempt: int = 1

    async def ack(self) -> None:
        return None

    async def nak(self, delay: float = 0.0) -> None:
        return None

    async def term(self) -> None:
        return None


class LogError(RuntimeError):
    """A backend failure that is not a concurrency conflict (server gone, bad request)."""


class LogUnavailable(LogError):
    """The log did not answer for now (no acknowledgement in time, no stream leader while a
    cluster elects one). Whatever met it is tried again however often it takes: a message
    parked for it would be an event lost to a few seconds of failover."""


class Delivery(Protocol):
    """One message handed to a durable consumer; settle it exactly once."""

    message: StoredMessage
    attempt: int

    async def ack(self) -> None: ...

    async def nak(self, delay: float = 0.0) -> None: ...

    async def term(self) -> None: ...


class Consumer(Protocol):
    async def next(self, timeout: float = 1.0) -> Delivery | None: ...

    def ready(self) -> Delivery | None:
        """The next delivery if one is already at hand (fetched), without waiting."""
        ...

    async def close(self) -> None: ...


class EventLog(Protocol):
    subjects: Subjects
    #: errors meaning the log is briefly out of reach: a handler meeting one is retried, never parked
    unavailable: tuple[type[BaseException], ...]

    async def ensure(self) -> None: ...

    async def close(self) -> None: ...

    async def append(self, entry: Entry) -> AppendResult: ...

    async def append_pipelined(self, entries: Sequence[Entry]) -> list[AppendResult]: ...

    async def append_batch(self, entries: Sequence[Entry]) -> BatchResult: ...

    async def append_batches_pipelined(
        self, batches: Sequence[Sequence[Entry]]
    ) -> list[BatchResult]: ...

    async def last(self, subject: str, leader: bool = False) -> StoredMessage | None:
        """The subject's last message. `leader`: as the stream's leader has it — any replica may
        answer otherwise, and a follower may not have applied the last append yet."""
        ...

    async def at(self, seq: int) -> StoredMessage | None:
        """The message at `seq` (None: none there, or purged)."""
        ...

    async def last_per_subject(self, filter_subject: str) -> list[StoredMessage]: ...

    async def last_sequence(self) -> int: ...

    async def ack_floor(self, durable: str) -> int:
        """The stream sequence up to which `durable` has acknowledged everything (0 when it
        does not exist yet): where a restarted consumer's redeliveries can start."""
        ...

    def replay(
        self, start_seq: int = 1, filter_subject: str | None = None
    ) -> AsyncIterator[StoredMessage]: ...

    async def consumer(self, durable: str, filter_subjects: Sequence[str]) -> Consumer: ...

    def follow(
        self, start_seq: int, filter_subject: str | None = None, stamped: bool = False
    ) -> AsyncIterator[StoredMessage]:
        """Every message from `start_seq` on, in order, waiting for new ones — never ending.
        For this process alone (no consumer state in the log): what each replica of a
        service reads so that its view is the log's, while the work is shared on a durable."""
        ...

    async def park(self, service: str, message: StoredMessage, reason: str) -> None: ...

    async def dead_letters(self, service: str) -> list[StoredMessage]: ...


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard semantics: `*` one token, `>` one or more trailing tokens."""
    p = pattern.split(".")
    s = subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Whether a subject matches any of `patterns`, asked per delivery by the readers that
    filter a shared consumer's messages: a `<prefix>.>` pattern (all of Tessera's) is a prefix
    test, not a split of both strings (4 % of the queue process in issue 29's profile)."""
    prefixes = tuple(p[:-1] for p in patterns if p.endswith(".>") and "*" not in p)
    others = tuple(p for p in patterns if not (p.endswith(".>") and "*" not in p))

    def matches(subject: str) -> bool:
        return subject.startswith(prefixes) or any(subject_matches(p, subject) for p in others)

    return matches
