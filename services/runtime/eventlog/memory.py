"""In-memory event log with JetStream's semantics, for `tessera simulate`, replay and fast tests.

It honours the same contract as the JetStream backend (one test suite runs against both):
per-subject expected sequences, atomic batches, message-id de-duplication, durable consumers
with ack/nak/term and redelivery of unacknowledged messages when a consumer is reopened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from contracts.envelope import DLQ_REASON, DLQ_SOURCE, MSG_ID
from contracts.subjects import Subjects
from services.runtime.eventlog.model import (
    MAX_BATCH,
    Appended,
    AppendResult,
    BatchCommitted,
    BatchResult,
    Conflict,
    Duplicate,
    Entry,
    LogUnavailable,
    StoredMessage,
    subject_matches,
)
from services.runtime.waits import within


@dataclass
class _DurableState:
    filters: tuple[str, ...]
    next_index: int = 0  # index into the log of the next never-delivered message
    unacked: dict[int, int] = field(default_factory=dict)  # seq -> attempts
    redeliver: list[int] = field(default_factory=list)


class MemoryDelivery:
    def __init__(self, consumer: MemoryConsumer, message: StoredMessage, attempt: int) -> None:
        self._consumer = consumer
        self.message = message
        self.attempt = attempt
        self._settled = False

    async def ack(self) -> None:
        if not self._settled:
            self._settled = True
            self._consumer._state.unacked.pop(self.message.seq, None)

    async def term(self) -> None:
        await self.ack()

    async def nak(self, delay: float = 0.0) -> None:
        if self._settled:
            return
        self._settled = True
        state = self._consumer._state
        if delay <= 0:
            state.redeliver.append(self.message.seq)
            self._consumer._log._notify()
        else:
            loop = asyncio.get_running_loop()
            loop.call_later(delay, self._consumer._requeue, self.message.seq)


class MemoryConsumer:
    def __init__(self, log: MemoryLog, state: _DurableState) -> None:
        self._log = log
        self._state = state
        # Reopening a durable hands back whatever was delivered but never settled.
        state.redeliver.extend(sorted(s for s in state.unacked if s not in state.redeliver))

    def _requeue(self, seq: int) -> None:
        if seq in self._state.unacked:
            self._state.redeliver.append(seq)
            self._log._notify()

    def _take(self) -> MemoryDelivery | None:
        st = self._state
        while st.redeliver:
            seq = st.redeliver.pop(0)
            if seq in st.unacked:
                st.unacked[seq] += 1
                return MemoryDelivery(self, self._log._by_seq(seq), st.unacked[seq])
        msgs = self._log._messages
        while st.next_index < len(msgs):
            msg = msgs[st.next_index]
            st.next_index += 1
            if msg.seq not in self._log._purged and any(subject_matches(f, msg.subject) for f in st.filters):
                st.unacked[msg.seq] = 1
                return MemoryDelivery(self, msg, 1)
        return None

    def ready(self) -> MemoryDelivery | None:
        return self._take()

    async def next(self, timeout: float = 1.0) -> MemoryDelivery | None:
        delivery = self._take()
        if delivery is not None:
            return delivery
        event = self._log._wakeup
        try:
            await within(event.wait(), timeout)
        except TimeoutError:
            return None
        return self._take()

    async def close(self) -> None:
        return None


class MemoryLog:
    unavailable: tuple[type[BaseException], ...] = (LogUnavailable,)

    def __init__(self, subjects: Subjects | None = None, dedup: bool = True) -> None:
        self.subjects = subjects or Subjects()
        self._messages: list[StoredMessage] = []  # by sequence, purged ones too (index = seq - 1)
        self._purged: set[int] = set()  # sequences a `purge` removed: no reader sees them
        self._last_by_subject: dict[str, int] = {}
        self._msg_ids: dict[str, int] = {}
        self._durables: dict[str, _DurableState] = {}
        self._dlq: list[StoredMessage] = []
        self._dedup = dedup
        self._wakeup = asyncio.Event()

    def _notify(self) -> None:
        self._wakeup.set()
        self._wakeup = asyncio.Event()

    def _by_seq(self, seq: int) -> StoredMessage:
        return self._messages[seq - 1]

    async def ensure(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _check(self, entry: Entry, staged: dict[str, int]) -> Conflict | None:
        if entry.expected_last_subject_seq is None:
            return None
        actual = staged.get(entry.subject, self._last_by_subject.get(entry.subject, 0))
        if actual != entry.expected_last_subject_seq:
            return Conflict(entry.subject, entry.expected_last_subject_seq, actual)
        return None

    def _store(self, entry: Entry) -> int:
        seq = len(self._messages) + 1
        self._messages.append(StoredMessage(seq, entry.subject, entry.data, dict(entry.headers)))
        self._last_by_subject[entry.subject] = seq
        mid = entry.headers.get(MSG_ID)
        if mid and self._dedup:
            self._msg_ids[mid] = seq
        return seq

    def append_now(self, entry: Entry) -> AppendResult:
        """Synchronous append for single-threaded drivers (`tessera simulate`)."""
        mid = entry.headers.get(MSG_ID)
        if mid and self._dedup and mid in self._msg_ids:
            return Appended(self._msg_ids[mid], duplicate=True)
        conflict = self._check(entry, {})
        if conflict:
            return conflict
        seq = self._store(entry)
        self._notify()
        return Appended(seq)

    async def append(self, entry: Entry) -> AppendResult:
        return self.append_now(entry)

    async def append_pipelined(self, entries: Sequence[Entry]) -> list[AppendResult]:
        return [self.append_now(e) for e in entries]

    def append_batch_now(self, entries: Sequence[Entry]) -> BatchResult:
        if not entries:
            raise ValueError("an atomic batch needs at least one entry")
        if len(entries) > MAX_BATCH:  # as nats-server refuses one
            raise ValueError(f"an atomic batch holds at most {MAX_BATCH} messages")
        staged: dict[str, int] = {}
        next_seq = len(self._messages) + 1
        for entry in entries:
            mid = entry.headers.get(MSG_ID)
            if mid and self._dedup and mid in self._msg_ids:
                return Duplicate(entry.subject, mid)  # JetStream refuses the whole batch too
            conflict = self._check(entry, staged)
            if conflict:
                return conflict
            staged[entry.subject] = next_seq
            next_seq += 1
        first = len(self._messages) + 1
        for entry in entries:
            self._store(entry)
        self._notify()
        return BatchCommitted(first, len(self._messages), len(entries))

    async def append_batch(self, entries: Sequence[Entry]) -> BatchResult:
        return self.append_batch_now(entries)

    async def append_batches_pipelined(
        self, batches: Sequence[Sequence[Entry]]
    ) -> list[BatchResult]:
        return [self.append_batch_now(b) for b in batches]

    async def at(self, seq: int) -> StoredMessage | None:
        return self._messages[seq - 1] if 0 < seq <= len(self._messages) and seq not in self._purged else None

    async def last(self, subject: str, leader: bool = False) -> StoredMessage | None:
        seq = self._last_by_subject.get(subject)
        return self._by_seq(seq) if seq else None

    async def last_per_subject(self, filter_subject: str) -> list[StoredMessage]:
        seqs = sorted(
            seq
            for subj, seq in self._last_by_subject.items()
            if subject_matches(filter_subject, subj)
        )
        return [self._by_seq(s) for s in seqs]

    async def last_sequence(self) -> int:
        return len(self._messages)

    async def message_count(self) -> int:
        return len(self._messages) - len(self._purged)

    async def purge(self, subject: str, upto: int | None = None, keep: int | None = None) -> None:
        """JetStream's purge of one subject: its messages below sequence `upto`, or all but its
        `keep` newest. Sequences are not reused; readers skip the gap."""
        seqs = [m.seq for m in self._messages if m.subject == subject and m.seq not in self._purged]
        if upto is not None:
            seqs = [q for q in seqs if q < upto]
        if keep is not None:
            seqs = seqs[: max(0, len(seqs) - keep)]
        self._purged.update(seqs)
        left = [m.seq for m in self._messages if m.subject == subject and m.seq not in self._purged]
        if left:
            self._last_by_subject[subject] = left[-1]
        else:
            self._last_by_subject.pop(subject, None)

    async def ack_floor(self, durable: str) -> int:
        state = self._durables.get(durable)
        if state is None:
            return 0
        if state.unacked:
            return min(state.unacked) - 1
        return self._messages[state.next_index - 1].seq if state.next_index else 0

    def messages(
        self, start_seq: int = 1, filter_subject: str | None = None
    ) -> list[StoredMessage]:
        """Synchronous read for in-process drivers."""
        out = self._messages[max(start_seq, 1) - 1 :]
        if self._purged:
            out = [m for m in out if m.seq not in self._purged]
        if filter_subject:
            out = [m for m in out if subject_matches(filter_subject, m.subject)]
        return out

    async def replay(
        self, start_seq: int = 1, filter_subject: str | None = None
    ) -> AsyncIterator[StoredMessage]:
        end = len(self._messages)
        for msg in self._messages[max(start_seq, 1) - 1 : end]:
            if msg.seq in self._purged:
                continue
            if filter_subject is None or subject_matches(filter_subject, msg.subject):
                yield msg

    async def consumer(self, durable: str, filter_subjects: Sequence[str]) -> MemoryConsumer:
        state = self._durables.get(durable)
        if state is None:
            state = self._durables[durable] = _DurableState(tuple(filter_subjects))
        return MemoryConsumer(self, state)

    async def follow(
        self, start_seq: int, filter_subject: str | None = None, stamped: bool = False
    ) -> AsyncIterator[StoredMessage]:
        index = max(start_seq, 1) - 1
        while True:
            wakeup = self._wakeup
            while index < len(self._messages):
                msg = self._messages[index]
                index += 1
                if msg.seq in self._purged:
                    continue
                if filter_subject is None or subject_matches(filter_subject, msg.subject):
                    yield msg
            await wakeup.wait()

    async def park(self, service: str, message: StoredMessage, reason: str) -> None:
        headers = dict(message.headers)
        headers[DLQ_REASON] = reason
        headers[DLQ_SOURCE] = f"{message.subject}#{message.seq}"
        self._dlq.append(
            StoredMessage(len(self._dlq) + 1, self.subjects.dlq(service), message.data, headers)
        )

    async def dead_letters(self, service: str) -> list[StoredMessage]:
        subject = self.subjects.dlq(service)
        return [m for m in self._dlq if m.subject == subject]
