"""The production event log: one JetStream stream holding every domain event in total order.

Concurrency control is JetStream's own: `Nats-Expected-Last-Subject-Sequence` per aggregate and
atomic batches (`Nats-Batch-Id` / `-Sequence` / `-Commit`, nats-server ≥ 2.12) for gang commits,
so no node mutex or lock expiry is ever needed (the HAMi bind-lock failure class, #1130/#1367).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    StorageType,
    StreamConfig,
)

from contracts.envelope import DLQ_REASON, DLQ_SOURCE, EXPECTED_LAST_SUBJECT_SEQ, MSG_ID
from contracts.permissions import APPENDS, may_append, rights_of
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
    LogError,
    LogUnavailable,
    StoredMessage,
)
from services.runtime.natsauth import connect_options, servers
from services.runtime.waits import within

logger = logging.getLogger(__name__)

WRONG_LAST_SEQUENCE = 10071
#: An atomic batch holding a message id already in the duplicate window: our own earlier attempt
#: (or a replica deciding the same thing) already wrote it. Reported as `Duplicate`, not as a
#: conflict: retrying a conflict would be refused again until the window ends, then land twice.
BATCH_DUPLICATE_ID = 10201
_WRONG_SEQ_RE = re.compile(r"wrong last sequence: (\d+)")
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
#: headers nats-server acts on when a message is published (a copy of a stored message drops them)
_SERVER_READS = ("Nats-Batch-", "Nats-Expected-", "Nats-Msg-Id", "Nats-Rollup", "Nats-TTL")


def _headers(entry: Entry) -> dict[str, str]:
    headers = dict(entry.headers)
    if entry.expected_last_subject_seq is not None:
        headers[EXPECTED_LAST_SUBJECT_SEQ] = str(entry.expected_last_subject_seq)
    return headers


def _actual_from(description: str) -> int:
    m = _WRONG_SEQ_RE.search(description or "")
    return int(m.group(1)) if m else -1


_ASCII_SPACE = " \t\n\r\x0b\x0c"
_SPACE_IN = re.compile(r"[\t-\r\x1c-\x20]")  # what str.isspace takes in ASCII: not in a name


def _header_lines(raw: bytes) -> dict[str, str]:
    """nats-py's header-block parser with its rules (names ASCII without whitespace, values
    stripped, bad UTF-8 replaced) in fewer steps: it ran a generator over every character of
    every header name, 6-11 % of a service's CPU in issue 29's profile (a Tessera message
    carries about ten headers). tests/runtime/test_header_lines.py holds it to nats-py's."""
    out: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").split("\r\n"):  # one decode, not one a line
        name, sep, value = line.partition(":")
        if sep and name.isascii():
            key = name.strip(_ASCII_SPACE)  # (what bytes.strip strips: str.strip takes more)
            if (key.isprintable() and " " not in key) or not _SPACE_IN.search(key):
                out[key] = value.strip(_ASCII_SPACE)
    return out


#: nats-py's own parser, the reference the replacement is tested against
_NATS_HEADER_LINES = getattr(Client, "_parse_header_lines", None)
if _NATS_HEADER_LINES is not None:
    Client._parse_header_lines = staticmethod(_header_lines)  # type: ignore[method-assign]


def _ack_tokens(reply: str) -> tuple[int, int, int, int] | None:
    """(stream sequence, consumer sequence, delivery count, timestamp ns) of a JetStream
    delivery's ack subject, in both of its forms; None for another subject. nats-py's
    `metadata` builds a datetime and three dataclasses per message, three quarters of making
    a delivery (issue 29's profile)."""
    tokens = reply.split(".")
    if tokens[:2] != ["$JS", "ACK"]:
        return None
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[6]), int(tokens[4]), int(tokens[7])
    if len(tokens) >= 11:  # with <domain>.<account hash> after ACK (and a token at the end)
        return (int(tokens[Msg.Ack.StreamSeq]), int(tokens[Msg.Ack.ConsumerSeq]),
                int(tokens[Msg.Ack.NumDelivered]), int(tokens[Msg.Ack.Timestamp]))  # fmt: skip
    return None


def _seq_attempt(msg: Msg) -> tuple[int, int]:
    """(stream sequence, delivery count) from the ack subject, else nats-py's own parse."""
    got = _ack_tokens(msg.reply or "")
    if got is not None:
        return got[0], got[2]
    meta = msg.metadata
    return meta.sequence.stream, meta.num_delivered


def _stored(msg: Msg, seq: int | None = None) -> StoredMessage:
    if seq is None:
        seq = _seq_attempt(msg)[0]
    return StoredMessage(seq, msg.subject, msg.data, dict(msg.headers or {}))


class _PubAck(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    batch: str = ""
    count: int = 0
    error: dict | None = None


class PublishError(Exception):
    def __init__(self, err_code: int, description: str) -> None:
        super().__init__(f"{err_code}: {description}")
        self.err_code = err_code
        self.description = description


class _AckRouter:
    """Pipelined publishes: one inbox subscription resolves a future per publish.

    nats-py's `publish_async` loses the future when the server answers with an error (it raises
    inside its callback), which would hang a pipelined writer on the first conflict; this router
    turns every answer, error or not, into a result.
    """

    _decoder = msgspec.json.Decoder(_PubAck)

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = ""
        self._futures: dict[str, asyncio.Future[_PubAck]] = {}
        self._counter = 0
        self._sub: object = None

    async def _start(self) -> None:
        self._prefix = f"{self._nc.new_inbox()}."
        self._sub = await self._nc.subscribe(self._prefix + "*", cb=self._on_reply)

    async def _on_reply(self, msg: Msg) -> None:
        fut = self._futures.pop(msg.subject[len(self._prefix) :], None)
        if fut is None or fut.done():
            return
        if msg.headers and msg.headers.get("Status") == "503":
            # nobody answers for the stream: its leader is gone and the rest elect one (every
            # append is to the stream's own subjects) — a retry, however often, never a
            # handler's failure: a message parked for it was an event lost to a failover
            fut.set_exception(LogUnavailable("no JetStream stream answers this subject"))
            return
        try:
            fut.set_result(self._decoder.decode(msg.data))
        except msgspec.DecodeError as exc:
            fut.set_exception(LogError(f"bad publish ack: {exc}"))

    async def publish(
        self, subject: str, data: bytes, headers: dict[str, str]
    ) -> asyncio.Future[_PubAck]:
        if self._sub is None:
            await self._start()
        self._counter += 1
        token = str(self._counter)
        fut: asyncio.Future[_PubAck] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        await self._nc.publish(subject, data, reply=self._prefix + token, headers=headers)
        return fut


async def _settle(fut: asyncio.Future[_PubAck], timeout: float) -> _PubAck:
    ack = await within(fut, timeout)
    if ack.error:
        raise PublishError(int(ack.error.get("err_code", 0)), str(ack.error.get("description", "")))
    return ack


class JetStreamDelivery:
    __slots__ = ("_acks", "_msg", "_queued", "attempt", "message")

    def __init__(self, msg: Msg, acks: list[Msg] | None = None) -> None:
        self._msg = msg
        self._acks = acks
        self._queued = False
        seq, self.attempt = _seq_attempt(msg)
        self.message = _stored(msg, seq)

    async def ack(self) -> None:
        # Double-acked: the server would refuse; settling twice is a no-op by contract.
        # Fire-and-forget, not ack_sync: handlers are idempotent, so a lost ack only means one
        # redelivery after ack_wait — while a round trip per message halved every service's
        # throughput and, with the event loop busy in a long session, timed out. Acks of one
        # fetched batch are sent together by the consumer (one socket write, not one each).
        if self._msg._ackd or self._queued:
            return
        if self._acks is not None:
            self._queued = True
            self._acks.append(self._msg)
        else:
            await self._msg.ack()

    async def nak(self, delay: float = 0.0) -> None:
        if not self._msg._ackd:
            await self._msg.nak(delay=delay if delay > 0 else None)

    async def term(self) -> None:
        if not self._msg._ackd:
            await self._msg.term()


#: what a request raises while the consumer or stream elects a leader (status 503, nobody
#: subscribed to the API subject yet) or the connection is being re-established
UNAVAILABLE = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.NoRespondersError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionReconnectingError,
    LogUnavailable,
)
T = TypeVar("T")
UNAVAILABLE_PAUSE = 0.25  # seconds before asking again: an election takes a few seconds
ACK_DELAY = 0.02  # seconds an idle consumer holds its acks for the next message's
ENSURE_PATIENCE = 30.0  # seconds a connecting client waits for the streams to answer


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Woken:
    """A reader that waits for its subscription callback to wake it, or for a delay.

    A timer resolves the wait, not a cancellation: `asyncio.timeout` expiring just as a
    message woke the reader left a cancel pending on Python 3.11, which then ended the
    service's consume loop at its next await."""

    _waiter: asyncio.Future[None] | None = None

    def _wake_reader(self) -> None:
        if self._waiter is not None:
            _wake(self._waiter)

    async def _woken(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(max(0.0, delay), _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


class JetStreamConsumer(_Woken):
    """A pull consumer with at most one pull request open at a time, its messages taken by a
    subscription callback.

    nats-py's `PullSubscription.fetch` awaits each message of a batch in a task of its own (a
    uuid-named `wait_for` per message): 5-8 % of every service's CPU in issue 29's profile. Here
    one request asks for up to `batch` messages for up to `timeout` s; its messages land in a
    deque as they come, and a reader waits on a future only when the deque is empty. The
    request ends when it delivered `batch`, when the server says so (404 nothing now, 408
    expired, 409 leadership change or too many waiting) or when its time is up, whichever comes
    first; only then is the next one sent, so the server never holds more than one for us."""

    def __init__(
        self, nc: Client, stream: str, durable: str, batch: int = 64, api_prefix: str = "$JS.API"
    ) -> None:
        self._nc = nc
        self._next = f"{api_prefix}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = nc.new_inbox()
        self._batch = batch
        self._sub: Any = None
        self._arrived: deque[Msg] = deque()
        self._open_left = 0  # messages the open request may still deliver
        self._open_until = 0.0  # loop time its expiry is due
        self._unavailable = False  # the last request was answered "no responders" (503)
        self._acks: list[Msg] = []

    async def start(self) -> JetStreamConsumer:
        self._sub = await self._nc.subscribe(self._inbox, cb=self._arrive)
        return self

    async def _arrive(self, msg: Msg) -> None:
        self._arrived.append(msg)
        self._wake_reader()

    async def _flush_acks(self) -> None:
        # emptied in place: every delivery holds this very list, and one settled after a later
        # `next()` (a rider's part, sharing.py) appended to a list swapped out — never sent, so
        # redelivered after ack_wait to every reader, again and again under load
        acks = self._acks[:]
        self._acks.clear()
        for msg in acks:  # nothing yields in between: the client writes them in one go
            await msg.ack()

    def _take(self) -> Msg | None:
        """The next data message that arrived; status messages close the open request."""
        while self._arrived:
            msg = self._arrived.popleft()
            status = msg.headers.get("Status") if msg.headers else None
            if not status:
                self._open_left -= 1
                return msg
            if status == "100":  # an idle heartbeat (none is asked for)
                continue
            self._open_left = 0  # 404, 408, 409: this request is over; 503: nobody answers
            self._unavailable = status == "503"
        return None

    async def _request(self, timeout: float) -> None:
        expires = max(int((timeout - 0.02) * 1e9), 1_000_000)  # ends before our own deadline
        body = b'{"batch":%d,"expires":%d}' % (self._batch, expires)
        await self._nc.publish(self._next, body, reply=self._inbox)
        self._open_left = self._batch
        self._open_until = asyncio.get_running_loop().time() + timeout

    async def next(self, timeout: float = 1.0) -> JetStreamDelivery | None:
        if len(self._acks) >= self._batch:  # a steady stream never empties the deque
            await self._flush_acks()
        msg = self._take()
        if msg is None:
            loop = asyncio.get_running_loop()
            if self._open_left <= 0 or loop.time() >= self._open_until:
                await self._flush_acks()  # in the same socket write as the request
                if self._unavailable:
                    # the consumer has no leader for a moment (a clustered server died and the
                    # rest elect one): nothing to deliver yet — raising here ended the service,
                    # and an allocator gone this way left finished pods' slices held for good
                    self._unavailable = False
                    await asyncio.sleep(min(timeout, UNAVAILABLE_PAUSE))
                try:
                    await self._request(timeout)
                except UNAVAILABLE:
                    await asyncio.sleep(min(timeout, UNAVAILABLE_PAUSE))
                    return None
            elif self._acks:
                # messages that trickle in one at a time each cost a socket write for their
                # ack (a fifth of the queue process in issue 29's profile): wait a moment for
                # the next one before sending them; a lost ack is one redelivery, no more
                await self._arrival(loop, min(ACK_DELAY, timeout))
                if not self._arrived:
                    await self._flush_acks()
            if not self._arrived:  # (some may have come while the acks and request went out)
                await self._arrival(loop, timeout)
            msg = self._take()
            if msg is None:
                return None
        return JetStreamDelivery(msg, self._acks)

    async def _arrival(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        """Wait until a message arrives, the open request expires or `timeout` passes."""
        if not self._arrived:
            await self._woken(loop, min(timeout, self._open_until - loop.time()))

    def ready(self) -> JetStreamDelivery | None:
        msg = self._take()
        return JetStreamDelivery(msg, self._acks) if msg is not None else None

    async def close(self) -> None:
        """Messages that arrived and were never handed out are given back (nak'd), so another
        process of the durable has them now: left alone, they waited out ack_wait (30 s) — a
        replica scaled down took its prefetched batch with it. Those handed out and unsettled
        are the handler's, and come again after ack_wait (or at the next start's reset). The
        subscription is drained first: what the server sent before it heard the unsubscribe
        lands here and is given back too (unsubscribed at once, a message still on the wire
        was dropped, and held until ack_wait)."""
        try:
            if self._sub is not None:
                await self._sub.drain()
        except nats.errors.Error:
            pass
        unread = [m for m in self._arrived if not (m.headers and m.headers.get("Status"))]
        self._arrived.clear()
        try:
            await self._flush_acks()
            for msg in unread:
                await msg.nak()
        except nats.errors.Error:
            pass


#: A PING every this many seconds, and the connection is stale (dropped, then reconnected) once
#: more than `MAX_OUTSTANDING_PINGS` go unanswered: a frozen or half-open server is noticed in
#: about 15 s. nats-py's defaults (120 s, 2) left /readyz at 200 for minutes on a connection
#: that answered nothing (a nats-server under SIGSTOP for 68 s never showed).
PING_INTERVAL = 5
MAX_OUTSTANDING_PINGS = 2


class BrokerWords:
    """One WARNING when the connection to NATS is lost and one INFO when it is back (nats-py's
    disconnected / reconnected callbacks). A nats-server killed and restarted mid-burst left no
    line in any of the five services' logs: the work resumed, and an SRE reading a service's log
    after the incident could not tell that its broker had gone away. A close of our own says
    nothing (nats-py calls the same callback then)."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.url, self.clock = url, clock
        self.nc: Client | None = None
        self.lost_at: float | None = None
        self.lost = 0  # connections lost (tests read it)

    async def disconnected(self) -> None:
        if self.nc is None or self.nc.is_closed or self.lost_at is not None:
            return  # not connected yet, our own close, or said already
        self.lost_at = self.clock()
        self.lost += 1
        logger.warning("NATS connection to %s lost: reconnecting (every %.1f s, for ever)", self.url,
                    RECONNECT_WAIT)  # fmt: skip

    async def reconnected(self) -> None:
        server = self.nc.connected_url.netloc if self.nc is not None and self.nc.connected_url else self.url
        away = self.clock() - self.lost_at if self.lost_at is not None else 0.0
        self.lost_at = None
        logger.info("NATS reconnected to %s after %.1f s", server, away)


#: seconds between two reconnection attempts to a NATS server that went away
RECONNECT_WAIT = 0.2


async def _connect_or_refused(url: str, options: dict) -> Client:
    """Connect, retrying forever while the server is away (a service outlives a broker
    restart) — but not when it refuses the credentials: that is a configuration error, ended
    with one line instead of an endless retry loop."""
    refused: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    words = BrokerWords(url)

    async def on_error(exc: Exception) -> None:
        text = str(exc)
        if "authorization violation" in text.lower() and not refused.done():
            refused.set_result(text)

    connecting = asyncio.ensure_future(nats.connect(
        servers(url), max_reconnect_attempts=-1, reconnect_time_wait=RECONNECT_WAIT, name="tessera",
        ping_interval=PING_INTERVAL, max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        error_cb=on_error, disconnected_cb=words.disconnected, reconnected_cb=words.reconnected,
        **options,
    ))  # fmt: skip
    await asyncio.wait({connecting, refused}, return_when=asyncio.FIRST_COMPLETED)
    if connecting.done():
        words.nc = connecting.result()
        return words.nc
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    user = options.get("user", "(no user)")
    raise LogError(f"NATS at {url} refused {user}: {refused.result()}")


#: seconds between the server's idle heartbeats to a follower; three missed ones (a restarted
#: server forgot the consumer, a cut connection) and the follower makes its consumer anew
TAIL_HEARTBEAT = 1.0
#: messages a follower holds unread before it holds back the server's flow-control answer
TAIL_HIGH_WATER = 8192


def _stamp(ns: int) -> str:
    """A store time as JetStream's own headers write it (RFC 3339, UTC)."""
    when = datetime.datetime.fromtimestamp(ns // 1_000_000_000, tz=datetime.UTC)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z"


class _Tail(_Woken):
    """One reader of the log's tail: an ephemeral push consumer (ack policy none) delivering
    each message of the filter once, in order, to this process alone.

    The scheduler and every allocator replica read the whole log this way. Before, they read
    it with batched direct gets, woken by a core subscription on the same subjects: every event
    reached them twice (the wake-up carried the whole message), a third of what those two
    processes received (issue 29). Nothing here is durable on the server: a consumer the server
    forgot (a restart), a gap in the consumer's sequence (a slow subscriber's dropped messages)
    or heartbeats that stop make a new consumer from the next sequence wanted, so what a
    restarted nats-server loses is read again, never skipped. Flow control keeps a reader that
    falls behind (a replay of a long log at start) from holding the whole log in memory: the
    server's flow-control request is answered only once the unread messages are few."""

    def __init__(self, log: JetStreamLog, filter_subject: str, seq: int, stamped: bool) -> None:
        self._log = log
        self._nc = log.nc
        self._filter = filter_subject
        self._stamped = stamped
        self._seq = seq  # the next stream sequence wanted
        self._sub: Any = None
        self._cseq = 0  # the last consumer sequence taken in
        self._arrived: deque[StoredMessage] = deque()
        self._broken = True  # no consumer yet
        self._heard = 0.0
        self._reconnects = -1
        self._held: str = ""  # a flow-control answer held back while many are unread
        self._generation = 0  # of the consumer in use: deliveries to an older one are dropped

    async def _answer(self, reply: str) -> None:
        if len(self._arrived) < TAIL_HIGH_WATER:
            await self._nc.publish(reply, b"")
        else:
            self._held = reply

    async def _arrive(self, generation: int, msg: Msg) -> None:
        if generation != self._generation:
            return  # a late one for a consumer given up
        self._heard = asyncio.get_running_loop().time()
        headers = msg.headers
        status = headers.get("Status") if headers else None
        if status:
            if status != "100":
                self._broken = True  # 409 consumer deleted, and the like: make it anew
            elif msg.reply:
                await self._answer(msg.reply)  # flow control
            else:  # an idle heartbeat: were all sent ones received?
                last = headers.get("Nats-Last-Consumer") if headers else None
                if last is not None and int(last) != self._cseq:
                    self._broken = True
                stalled = headers.get("Nats-Consumer-Stalled") if headers else None
                if stalled:
                    await self._answer(stalled)
            self._wake_reader()
            return
        got = _ack_tokens(msg.reply or "")
        if got is None or self._broken:
            return
        sseq, cseq, _delivered, ns = got
        if cseq != self._cseq + 1:
            self._broken = True  # a message lost on the way: read again from the last one taken
            self._wake_reader()
            return
        self._cseq = cseq
        hdrs = dict(headers) if headers else {}
        if self._stamped:
            hdrs["Nats-Time-Stamp"] = _stamp(ns)
        self._arrived.append(StoredMessage(sseq, msg.subject, msg.data, hdrs))
        self._wake_reader()

    async def _open(self) -> None:
        await self._drop()
        self._arrived.clear()  # read again from `_seq`: what arrived after a gap is not in order
        self._held = ""
        self._cseq = 0
        inbox = self._nc.new_inbox()
        self._generation += 1
        self._sub = await self._nc.subscribe(inbox, cb=functools.partial(self._arrive, self._generation),
                                             pending_msgs_limit=-1, pending_bytes_limit=-1)  # fmt: skip
        config = ConsumerConfig(
            deliver_subject=inbox, ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self._seq,
            filter_subject=self._filter, flow_control=True, idle_heartbeat=TAIL_HEARTBEAT,
            mem_storage=True, inactive_threshold=5.0,
        )  # fmt: skip
        self._broken = False
        self._heard = asyncio.get_running_loop().time()
        self._reconnects = self._nc.stats.get("reconnects", 0)
        await self._log.js.add_consumer(self._log.stream, config)

    async def _drop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()  # the server removes the consumer once nobody listens

    def _stale(self, now: float) -> bool:
        return (now - self._heard > 3 * TAIL_HEARTBEAT
                or self._nc.stats.get("reconnects", 0) != self._reconnects)  # fmt: skip

    async def next(self, timeout: float) -> StoredMessage | None:
        loop = asyncio.get_running_loop()
        if not self._arrived and (self._broken or self._stale(loop.time())):
            try:
                await self._open()
            except Exception as exc:  # the server away: ask again after a pause
                self._broken = True
                logger.debug("following %s from #%d: %r; again", self._filter, self._seq, exc)
                await asyncio.sleep(min(timeout, UNAVAILABLE_PAUSE))
                return None
        if not self._arrived:
            await self._woken(loop, timeout)
            if not self._arrived:
                return None
        msg = self._arrived.popleft()
        self._seq = msg.seq + 1
        if self._held and len(self._arrived) < TAIL_HIGH_WATER // 2:
            reply, self._held = self._held, ""
            with contextlib.suppress(Exception):
                await self._nc.publish(reply, b"")
        return msg

    async def close(self) -> None:
        self._arrived.clear()
        await self._drop()


class JetStreamLog:
    unavailable = UNAVAILABLE

    def __init__(
        self,
        nc: Client,
        subjects: Subjects | None = None,
        stream: str = "TESSERA",
        duplicate_window: float = 120.0,
        ack_wait: float = 30.0,
        replicas: int = 1,
        writer: str = "",
        user: str = "",
    ) -> None:
        self.nc = nc
        #: the NATS user this process is (`contracts.permissions`): appends are checked here
        #: with the server's own rule, since the server answers a refused publish with nothing
        self.writer = writer
        self.subjects = subjects or Subjects()
        #: what the server lets this connection do (None: unrestricted), checked before an API
        #: request it would refuse — a refused request is a timeout, not an answer
        self.rights = rights_of(user, self.subjects, stream)
        self.js = nc.jetstream(timeout=10.0)
        self._acks = _AckRouter(nc)
        self.timeout = 10.0
        self.stream = stream
        self.dlq_stream = f"{stream}_DLQ"
        self.duplicate_window = duplicate_window
        self.ack_wait = ack_wait
        self.replicas = replicas

    @classmethod
    async def connect(
        cls, url: str, credentials: str = "", ca: str = "", **kwargs: object
    ) -> JetStreamLog:
        """`url` may list a cluster's servers, comma-separated: the client knows every one
        from the start, so losing the one it first reached is a reconnect, not an outage."""
        options = connect_options(credentials, ca, url)
        nc = await _connect_or_refused(url, options)
        log = cls(nc, user=options.get("user", ""), **kwargs)  # type: ignore[arg-type]
        deadline = asyncio.get_running_loop().time() + ENSURE_PATIENCE
        while True:  # a cluster electing its leaders answers nothing for a few seconds
            try:
                await log.ensure()
                return log
            except UNAVAILABLE:
                if asyncio.get_running_loop().time() > deadline:
                    await nc.close()
                    raise
                await asyncio.sleep(UNAVAILABLE_PAUSE)

    async def ensure(self) -> None:
        """Create or upgrade the streams; idempotent, safe for every service to call at start."""
        await self._ensure_stream(
            StreamConfig(
                name=self.stream,
                subjects=[self.subjects.events],
                storage=StorageType.FILE,
                allow_atomic=True,
                allow_direct=True,
                duplicate_window=self.duplicate_window,
                num_replicas=self.replicas,
                discard=DiscardPolicy.OLD,
            )
        )
        await self._ensure_stream(
            StreamConfig(
                name=self.dlq_stream,
                subjects=[self.subjects.dlq_all],
                storage=StorageType.FILE,
                num_replicas=self.replicas,
            )
        )
        await self.wait_ready()  # a replicated stream answers once its members elected a leader

    async def _ensure_stream(self, config: StreamConfig) -> None:
        try:
            await self.js.add_stream(config)
        except nats.js.errors.BadRequestError:
            if self.rights is not None and not self.rights.may_publish(
                f"$JS.API.STREAM.UPDATE.{config.name}"
            ):  # a service uses the stream as the operator made it (issue 23: an update
                # could shorten the log); changing it is the admin user's
                logger.warning("stream %s exists with another configuration than %s asks for; "
                            "using it as it is (an update is the operator's)", config.name,
                            self.nc.options.get("user"))  # fmt: skip
                return
            # never fewer replicas than it has: a client started without --stream-replicas
            # (a test, a tool) would otherwise turn an R3 log back into R1
            have = (await self.js.stream_info(config.name)).config.num_replicas or 1
            config.num_replicas = max(config.num_replicas or 1, have)
            await self.js.update_stream(config)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the server answers for our stream again (after a reconnect or restart).
        Each ask waits a little longer than the last (0.5 s, doubling): a request written to
        the socket of a server that had just gone is never answered, and the first ask after
        a restart waited out the whole request timeout (10 s) while the server was back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        patience = 0.5
        while True:
            try:
                await within(self.js.stream_info(self.stream), max(min(patience, deadline - loop.time()), 0.1))
                return
            except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
                if loop.time() > deadline:
                    raise LogUnavailable(f"stream {self.stream} unavailable: {exc}") from exc
                patience = min(patience * 2, self.timeout)
                await asyncio.sleep(0.1)

    async def close(self) -> None:
        if self.nc.is_closed:
            return
        if not self.nc.is_connected:
            # the broker away: drain() refuses (ConnectionReconnectingError) and close() writes
            # what is pending to the dead socket (RuntimeError from the transport): a service
            # stopped meanwhile ended with a traceback (exit 1). Nothing can be sent anyway.
            with contextlib.suppress(nats.errors.Error, RuntimeError, OSError):
                await self.nc.close()
            return
        await self.nc.drain()

    # --- appends -------------------------------------------------------------------------------

    def _check(self, entries: Sequence[Entry]) -> None:
        if not self.writer:
            return
        for entry in entries:
            if not may_append(self.writer, entry.subject, self.subjects):
                raise LogError(
                    f"{self.writer} may not append to {entry.subject}: it appends to "
                    f"{', '.join(APPENDS.get(self.writer, ())) or 'nothing'} subjects "
                    "(contracts/permissions.py APPENDS)"
                )

    def _conflict_or_raise(self, err: PublishError, entry: Entry) -> Conflict:
        if err.err_code == WRONG_LAST_SEQUENCE:
            expected = entry.expected_last_subject_seq or 0
            return Conflict(entry.subject, expected, _actual_from(err.description))
        raise LogError(f"append to {entry.subject} failed: {err}") from err

    async def _result(self, entry: Entry, fut: asyncio.Future[_PubAck]) -> AppendResult:
        try:
            ack = await _settle(fut, self.timeout)
        except PublishError as err:
            return self._conflict_or_raise(err, entry)
        except TimeoutError:
            raise LogUnavailable(
                f"no publish ack for {entry.subject} within {self.timeout}s"
            ) from None
        return Appended(ack.seq, duplicate=ack.duplicate)

    async def append(self, entry: Entry) -> AppendResult:
        self._check([entry])
        fut = await self._acks.publish(entry.subject, entry.data, _headers(entry))
        return await self._result(entry, fut)

    async def append_pipelined(self, entries: Sequence[Entry]) -> list[AppendResult]:
        """Publish all without waiting between them; results in input order."""
        self._check(entries)
        futures = [await self._acks.publish(e.subject, e.data, _headers(e)) for e in entries]
        return [await self._result(e, f) for e, f in zip(entries, futures, strict=True)]

    async def _send_batch(self, entries: Sequence[Entry]) -> asyncio.Future[_PubAck]:
        if not entries:
            raise ValueError("an atomic batch needs at least one entry")
        if len(entries) > MAX_BATCH:
            raise ValueError(f"an atomic batch holds at most {MAX_BATCH} messages")
        self._check(entries)
        batch_id = uuid.uuid4().hex
        last = len(entries) - 1
        for i, entry in enumerate(entries):
            headers = _headers(entry)
            headers[BATCH_ID] = batch_id
            headers[BATCH_SEQUENCE] = str(i + 1)
            if i == last:
                headers[BATCH_COMMIT] = "1"
                return await self._acks.publish(entry.subject, entry.data, headers)
            await self.nc.publish(entry.subject, entry.data, headers=headers)
        raise AssertionError("unreachable")

    async def _batch_result(
        self, entries: Sequence[Entry], fut: asyncio.Future[_PubAck]
    ) -> BatchResult:
        try:
            ack = await _settle(fut, self.timeout)
        except PublishError as err:
            if err.err_code == BATCH_DUPLICATE_ID:
                first = next((e for e in entries if e.headers.get(MSG_ID)), entries[0])
                return Duplicate(first.subject, first.headers.get(MSG_ID, ""))
            if err.err_code != WRONG_LAST_SEQUENCE:
                raise LogError(f"atomic batch failed: {err}") from err
            return await self._which_conflict(entries, _actual_from(err.description))
        except TimeoutError:
            raise LogUnavailable(f"no commit ack for a batch of {len(entries)}") from None
        count = ack.count or len(entries)
        return BatchCommitted(ack.seq - count + 1, ack.seq, count)

    async def _which_conflict(self, entries: Sequence[Entry], actual: int) -> Conflict:
        """The server reports only the actual sequence; find the entry whose check failed."""
        staged: dict[str, int] = {}
        for entry in entries:
            if entry.expected_last_subject_seq is None:
                continue
            if entry.subject not in staged:
                last = await self.last(entry.subject)
                staged[entry.subject] = last.seq if last else 0
            if staged[entry.subject] != entry.expected_last_subject_seq:
                return Conflict(
                    entry.subject, entry.expected_last_subject_seq, staged[entry.subject]
                )
        first = next(e for e in entries if e.expected_last_subject_seq is not None)
        return Conflict(first.subject, first.expected_last_subject_seq or 0, actual)

    async def append_batch(self, entries: Sequence[Entry]) -> BatchResult:
        return await self._batch_result(entries, await self._send_batch(entries))

    async def append_batches_pipelined(
        self, batches: Sequence[Sequence[Entry]]
    ) -> list[BatchResult]:
        futures = [await self._send_batch(b) for b in batches]
        return [await self._batch_result(b, f) for b, f in zip(batches, futures, strict=True)]

    # --- reads ---------------------------------------------------------------------------------

    async def _answered(
        self, call: Callable[[], Awaitable[T]], what: str, wait: float = ENSURE_PATIENCE
    ) -> T:
        """`call()`, asked again for up to `wait` s while the stream answers nothing: a clustered
        stream electing its leader times out or says 503 for a few seconds, and a service
        starting mid-failover once exited on its first unanswered read (a CI run of
        test_cluster: the node agent's registration read)."""
        deadline = asyncio.get_running_loop().time() + wait
        pause = UNAVAILABLE_PAUSE
        while True:
            try:
                return await call()
            except UNAVAILABLE as exc:
                if asyncio.get_running_loop().time() + pause > deadline:
                    raise LogUnavailable(
                        f"stream {self.stream}: no answer to {what}: {exc!r}"
                    ) from exc
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    async def last(self, subject: str, leader: bool = False) -> StoredMessage | None:
        async def get() -> Any:
            if leader:  # a direct get may be answered by a follower behind the leader
                return await self.js.get_last_msg(self.stream, subject)
            try:
                return await self.js.get_last_msg(self.stream, subject, direct=True)
            except nats.errors.NoRespondersError:
                # no replica serves direct gets yet (an R3 stream just created, or its members
                # catching up after a failover): the stream leader answers instead
                return await self.js.get_last_msg(self.stream, subject)

        try:
            raw = await self._answered(get, f"the last message of {subject}")
        except nats.js.errors.NotFoundError:
            return None
        return StoredMessage(
            raw.seq or 0, raw.subject or subject, raw.data or b"", dict(raw.headers or {})
        )

    async def last_sequence(self) -> int:
        info = await self._answered(lambda: self.js.stream_info(self.stream), "stream info")
        return info.state.last_seq

    async def message_count(self) -> int:
        info = await self._answered(lambda: self.js.stream_info(self.stream), "stream info")
        return info.state.messages

    async def purge(self, subject: str, upto: int | None = None, keep: int | None = None) -> None:
        """Purge one subject: its messages below sequence `upto`, or all but its `keep` newest
        (admin, or the queue service's compaction: `contracts.permissions.COMPACTORS`)."""
        await self.js.purge_stream(self.stream, subject=subject, seq=upto, keep=keep)

    async def ack_floor(self, durable: str) -> int:
        try:
            info = await self.js.consumer_info(self.stream, durable)
        except nats.js.errors.NotFoundError:
            return 0
        return info.ack_floor.stream_seq if info.ack_floor else 0

    async def _ordered(
        self, config: ConsumerConfig, filter_subject: str, stream: str | None = None
    ) -> AsyncIterator[StoredMessage]:
        stream = stream or self.stream
        sub = await self.js.subscribe(
            filter_subject,
            stream=stream,
            ordered_consumer=True,
            config=config,
            pending_msgs_limit=-1,
        )
        try:
            info = await sub.consumer_info()
            if info.num_pending == 0 and info.delivered.consumer_seq == 0:
                return
            while True:
                msg = await sub.next_msg(timeout=10.0)
                yield _stored(msg)
                if msg.metadata.num_pending == 0:
                    return
        finally:
            await sub.unsubscribe()

    async def at(self, seq: int) -> StoredMessage | None:
        """One direct get by sequence (no consumer)."""
        try:
            msg = await self.nc.request(f"$JS.API.DIRECT.GET.{self.stream}", msgspec.json.encode({"seq": seq}),
                                        timeout=self.timeout)  # fmt: skip
        except nats.errors.NoRespondersError as exc:
            raise LogUnavailable(f"no JetStream stream answers a direct get: {exc}") from exc
        headers = msg.headers or {}
        if not msg.data and "Status" in headers:
            return None  # 404: nothing there (purged, or past the end)
        return StoredMessage(int(headers["Nats-Sequence"]), headers["Nats-Subject"], msg.data, headers)

    async def replay(
        self, start_seq: int = 1, filter_subject: str | None = None, batch: int = 2000
    ) -> AsyncIterator[StoredMessage]:
        """Read the stream in order with batched direct gets (ADR-31).

        No consumer is created and nothing is acknowledged, which is why this is about half again
        as fast as an ordered push consumer; each batch ends with an EOB status message.
        """
        queue: asyncio.Queue[Msg | None] = asyncio.Queue()

        async def on_msg(msg: Msg) -> None:
            if not msg.data and msg.headers and "Status" in msg.headers:
                queue.put_nowait(None)  # 204 end of batch, or 404 nothing (more) to get
            else:
                queue.put_nowait(msg)

        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=-1)
        api = f"$JS.API.DIRECT.GET.{self.stream}"
        seq = max(start_seq, 1)
        try:
            while True:
                request: dict[str, object] = {"seq": seq, "batch": batch}
                if filter_subject:
                    request["next_by_subj"] = filter_subject
                await self.nc.publish(api, msgspec.json.encode(request), reply=inbox)
                got = 0
                while True:
                    if queue.empty():
                        msg = await within(queue.get(), self.timeout)
                    else:
                        msg = queue.get_nowait()  # most messages: no timer, no task switch
                    if msg is None:
                        break
                    headers = msg.headers or {}
                    seq = int(headers["Nats-Sequence"])
                    got += 1
                    yield StoredMessage(seq, headers["Nats-Subject"], msg.data, headers)
                if got == 0:
                    return
                seq += 1
        finally:
            await sub.unsubscribe()

    async def follow(
        self, start_seq: int, filter_subject: str | None = None, poll: float = 0.5,
        stamped: bool = False,
    ) -> AsyncIterator[StoredMessage]:
        """Every message of the filter from `start_seq` on, each delivered once by an ephemeral
        push consumer of this process's own (no acks, flow-controlled, idle heartbeats): see
        `_Tail`. `stamped` adds the store's `Nats-Time-Stamp` header (what `tessera get -w`
        shows ages from); the services do without it."""
        tail = _Tail(self, filter_subject or self.subjects.events, max(start_seq, 1), stamped)
        try:
            while True:
                msg = await tail.next(poll)
                if msg is not None:
                    yield msg
        finally:
            await tail.close()

    async def last_per_subject(self, filter_subject: str) -> list[StoredMessage]:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
        return [m async for m in self._ordered(config, filter_subject)]

    # --- consumers -----------------------------------------------------------------------------

    async def consumer(self, durable: str, filter_subjects: Sequence[str]) -> JetStreamConsumer:
        if self.rights is not None and not self.rights.may_publish(
            f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{durable}"
        ):
            raise LogError(f"durable {durable!r}: NATS user {self.nc.options.get('user')} may "
                           "use only its own durable, named by its user (contracts/permissions.py)")
        config = ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait,
            max_ack_pending=10_000,
            filter_subjects=list(filter_subjects),
        )
        info: ConsumerInfo | None
        try:
            info = await self.js.add_consumer(self.stream, config)
        except nats.js.errors.BadRequestError:  # exists with another config: resume where it left off
            try:
                info = await self.js.consumer_info(self.stream, durable)
            except (nats.errors.Error, TimeoutError):
                info = None  # what it holds unsettled comes after ack_wait, as it always did
        if info is not None and info.num_ack_pending:
            await self._redeliver_now(durable, info.num_ack_pending)
        return await JetStreamConsumer(self.nc, self.stream, durable).start()

    async def _redeliver_now(self, durable: str, pending: int) -> None:
        """Messages of the durable delivered but never settled — the process that took them was
        killed — are delivered again now, from one above its ack floor, rather than ack_wait
        (30 s) later: until then the new process went on with the later ones and the work the
        lost ones carried waited (a Volcano Job restarting when its queue service was killed
        stood 30 s). A replica still alive on the same durable sees its own in-flight messages
        again, which every handler takes as the redelivery it already is. The server's
        consumer reset (ADR-60) came with nats-server 2.14; an older one redelivers as before."""
        version = self.nc.connected_server_version
        if (version.major, version.minor) < (2, 14):
            logger.info("durable %s: %d deliveries unsettled, redelivered after ack_wait (nats-server %s "
                        "has no consumer reset)", durable, pending, version)  # fmt: skip
            return
        try:
            reset = await self.js.reset_consumer(self.stream, durable, timeout=5.0)
        except (nats.errors.Error, TimeoutError) as exc:
            logger.warning("durable %s: %d deliveries unsettled, redelivered after ack_wait (reset "
                           "refused: %s)", durable, pending, exc)  # fmt: skip
            return
        logger.info("durable %s: %d deliveries a stopped process left unsettled, delivered again "
                    "from #%d", durable, pending, reset.reset_seq)  # fmt: skip

    async def park(self, service: str, message: StoredMessage, reason: str) -> None:
        # the server reads its own headers on a publish: a message of an atomic batch carries
        # Nats-Batch-*, which made the dead-letter stream refuse it ("atomic publish is
        # disabled") and the parking service end; an expected sequence would be checked too
        headers = {k: v for k, v in message.headers.items() if not k.startswith(_SERVER_READS)}
        headers[DLQ_REASON] = reason[:1024]
        headers[DLQ_SOURCE] = f"{message.subject}#{message.seq}"
        await self.js.publish(self.subjects.dlq(service), message.data, headers=headers)

    async def dead_letters(self, service: str) -> list[StoredMessage]:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        return [m async for m in self._ordered(config, self.subjects.dlq(service), self.dlq_stream)]
