"""The thin shell every service shares: consume → decode → handle → append → settle.

A service is "these event types → this handler". The runtime does the rest the same way
everywhere: envelope-first decoding, unknown types skipped and counted, undecodable bodies parked
on `<root>.dlq.<service>` with the reason, a span per handled event continuing the producer's
trace, deterministic message ids for everything appended, ack only after the effect is durable,
and a graceful stop that finishes the message in hand.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Link, SpanKind, Tracer

from contracts.base import Event
from contracts.envelope import DLQ_SOURCE, TYPE, Envelope, EnvelopeError, msg_id
from contracts.registry import Registry, UndecodableEvent, UnknownEventType, default_registry
from services.runtime.eventlog.model import (
    AppendResult,
    BatchResult,
    Delivery,
    Entry,
    EventLog,
    Followed,
    StoredMessage,
)
from services.runtime.metrics import ServiceMetrics
from services.runtime.sharing import Part, Rider, Shared, carriable
from services.runtime.tasks import cancel_all
from services.runtime.telemetry import TRACEPARENT_HEADER, extract, inject, subject_template

log = logging.getLogger(__name__)


class TransientError(Exception):
    """Retry later (nak with delay): a dependency is briefly unavailable."""


@dataclass(frozen=True, slots=True)
class Received:
    """What a handler gets besides the event: where it came from, for causation and ids."""

    message: StoredMessage
    envelope: Envelope
    #: the trace its effects continue when they are not appended inside its own handling span
    #: (a group handler appends many causes' effects at once)
    trace: context.Context | None = None

    @property
    def cause(self) -> str:
        return self.envelope.msg_id or f"seq:{self.message.seq}"


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    event: Event
    expected_last_subject_seq: int | None = None
    msg_id: str = ""
    #: extra headers (a session's `record.SessionRef`); the envelope's own win
    headers: Mapping[str, str] = field(default_factory=dict)
    #: the trace this event continues (default: the current span's, else the cause's)
    context: context.Context | None = None


Handler = Callable[[Event, Received], Awaitable[None]]
#: Handles a run of consecutive deliveries of one kind at once (e.g. the allocator commits many
#: proposals in one atomic batch). It may handle only a prefix: it returns how many it settled
#: the effect of; the rest go through the single handler one by one.
GroupHandler = Callable[[list[tuple[Event, Received]]], Awaitable[int]]


@dataclass
class EventService:
    name: str
    log: EventLog
    filter_subjects: Sequence[str]
    handlers: Mapping[type[Event], Handler]
    registry: Registry = field(default_factory=default_registry)
    metrics: ServiceMetrics | None = None
    tracer: Tracer | None = None
    durable: str = ""
    group_handlers: Mapping[type[Event], GroupHandler] = field(default_factory=dict)
    max_group: int = 64
    max_attempts: int = 5
    retry_delay: float = 0.5
    #: > 0: read every event from this sequence on with `EventLog.follow` instead of taking a
    #: share of the durable's — for a service whose every replica needs the whole log (the
    #: scheduler's projection); nothing is settled, a restart recovers from the log
    follow_from: int = 0
    #: its deliveries come from another service's consumer in this process (`carry`)
    carried: bool = False

    def __post_init__(self) -> None:
        self.metrics = self.metrics or ServiceMetrics(self.name)
        self.tracer = self.tracer or trace.get_tracer("tessera.runtime")
        self.durable = self.durable or self.name
        self._by_name = {cls.type_name(): h for cls, h in self.handlers.items()}
        self._groups = {cls.type_name(): h for cls, h in self.group_handlers.items()}
        self._parked: set[str] | None = None  # sources on our dead-letter subject, read once
        self._series: dict[str, tuple[Any, Any]] = {}  # event type -> its metric series
        self._riders: list[Rider] = []
        #: told of every delivery before its handler (the snapshot writer's copy, `ride`)
        self.observers: list[Callable[[StoredMessage, str, Callable[[], Event]], None]] = []
        #: the highest stream sequence handled here, and when a delivery was last taken up
        #: (`time.monotonic()`, None: not yet): what `/metrics` says of a stuck or idle service
        #: (`services.runtime.liveness`), two stores per delivery, read at scrape time
        self.position = 0
        self.handled_at: float | None = None

    def in_order(self) -> bool:
        """Whether first deliveries come in stream order: one consumer (ours or a carrier's),
        or one followed pattern — several followed patterns are read side by side."""
        return not self.follow_from or len(self.filter_subjects) == 1

    def carry(self, other: EventService) -> bool:
        """Hand `other` every delivery of ours it would have read from a consumer of its own
        (services/runtime/sharing.py); False when it reads subjects we do not, or follows."""
        if other.follow_from or self.follow_from or not other.filter_subjects or not carriable(
            other.filter_subjects, self.filter_subjects
        ):
            return False
        self._riders.append(Rider(other.name, other.handle, other.filter_subjects, self.filter_subjects))
        other.carried = True
        return True

    # --- outgoing ------------------------------------------------------------------------------

    def entry(self, out: Outgoing, cause: Received | None = None, index: int = 0) -> Entry:
        """Encode one outgoing event with a deterministic id and the current trace context."""
        mid = out.msg_id or (msg_id(cause.cause, index, self.name) if cause else "")
        env = self.registry.envelope(
            out.event,
            msg_id=mid,
            correlation_id=cause.envelope.correlation_id or cause.cause if cause else "",
            causation_id=cause.cause if cause else "",
        )
        headers = {**out.headers, **env.to_headers()}
        inject(headers, out.context if out.context is not None else (cause.trace if cause is not None else None))
        return Entry(
            out.subject, self.registry.encode(out.event), headers, out.expected_last_subject_seq
        )

    async def publish(
        self, out: Outgoing, cause: Received | None = None, index: int = 0
    ) -> AppendResult:
        return await self.log.append(self.entry(out, cause, index))

    async def publish_batch(
        self, outs: Sequence[Outgoing], cause: Received | None = None
    ) -> BatchResult:
        return await self.log.append_batch([self.entry(o, cause, i) for i, o in enumerate(outs)])

    # --- incoming ------------------------------------------------------------------------------

    async def handle(self, delivery: Delivery) -> str:
        """Handle and settle one delivery; returns the outcome (for metrics and tests)."""
        msg = delivery.message
        metrics = self.metrics
        assert metrics is not None and self.tracer is not None
        self.handled_at = time.monotonic()
        try:
            env = Envelope.from_headers(msg.headers)
        except EnvelopeError as exc:
            return await self._park(delivery, f"bad envelope: {exc}")
        once: list[Event] = []  # decoded at most once, by an observer or for the handler

        def decoded() -> Event:
            if not once:
                once.append(self._decode(delivery, env.type))
            return once[0]

        for see in self.observers:
            see(msg, env.type, decoded)
        handler = self._by_name.get(env.type)
        if handler is None:
            if env.type not in self.registry:
                metrics.unknown.labels(self.name, env.type).inc()
                outcome = "unknown"
            else:
                outcome = "ignored"
            await _settle(delivery.ack)
            self._passed(msg.seq)
            return outcome
        try:
            event = decoded()
        except (UndecodableEvent, UnknownEventType) as exc:
            return await self._park(delivery, f"undecodable {env.type}: {exc}")
        started = time.perf_counter()
        with (
            self.tracer.start_as_current_span(
                f"process {subject_template(msg.subject)}",
                context=extract(msg.headers),
                kind=SpanKind.CONSUMER,
                attributes=self._attributes(msg, env),
            )
            if recording(self.tracer)
            else _Carried(msg.headers)
        ) as span:
            try:
                try:
                    await handler(event, Received(msg, env))
                except self.log.unavailable as exc:  # a failover: later, however often it takes
                    raise TransientError(f"the log is out of reach: {exc!r}") from exc
            except TransientError as exc:
                span.record_exception(exc)
                await _settle(delivery.nak, self.retry_delay * delivery.attempt)
                metrics.events.labels(self.name, env.type, "retried").inc()
                return "retried"
            except Exception as exc:  # a bug in a handler must not kill the service
                span.record_exception(exc)
                log.exception("handler for %s failed (attempt %d)", env.type, delivery.attempt)
                if delivery.attempt >= self.max_attempts:
                    return await self._park(delivery, f"handler failed: {exc!r}")
                await _settle(delivery.nak, self.retry_delay * delivery.attempt)
                metrics.events.labels(self.name, env.type, "retried").inc()
                return "retried"
        await _settle(delivery.ack)
        self._passed(msg.seq)
        handled, seconds = self._series.get(env.type) or self._series_of(env.type)
        handled.inc()
        seconds.observe(time.perf_counter() - started)
        return "handled"

    def _passed(self, seq: int) -> None:
        """A delivery is done with (handled, skipped or parked): `position` (several followed
        patterns come side by side, so not always in order)."""
        if seq > self.position:
            self.position = seq

    def _decode(self, delivery: Delivery, kind: str) -> Event:
        shared = delivery.shared if isinstance(delivery, Part) else None
        if shared is not None and (memo := shared.decoded) is not None \
                and memo[0] is self.registry and memo[1] == kind:  # fmt: skip
            return memo[2]  # type: ignore[return-value]
        event = self.registry.decode(kind, delivery.message.data)
        if shared is not None:
            shared.decoded = (self.registry, kind, event)
        return event

    def _series_of(self, kind: str) -> tuple[Any, Any]:
        """A type's handled counter and handling-time histogram, looked up once (a label
        lookup per message showed in every service's profile)."""
        assert self.metrics is not None
        got = self._series[kind] = (self.metrics.events.labels(self.name, kind, "handled"),
                                    self.metrics.handle_seconds.labels(self.name, kind))  # fmt: skip
        return got

    def _attributes(self, msg: StoredMessage, env: Envelope) -> dict[str, str | int]:
        return {
            "messaging.system": "nats",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": msg.subject,
            "messaging.destination.template": subject_template(msg.subject),
            "messaging.message.id": env.msg_id,
            "messaging.consumer.group.name": self.durable,
            "tessera.event.type": env.type,
            "tessera.stream.seq": msg.seq,
        }

    async def _park(self, delivery: Delivery, reason: str) -> str:
        try:
            await self.park_once(delivery.message, reason)
        except self.log.unavailable as exc:
            # the dead-letter stream out of reach (a failover): the message stays ours and
            # comes again; raised from here it ended the service — a poison message met in a
            # failover restarted it, when the rule is that none ever does. A follower has no
            # delivery to give back: its reader reads on from this message after a pause
            if isinstance(delivery, Followed):
                raise
            log.warning("%s#%d not parked yet (%r): delivered again", delivery.message.subject,
                        delivery.message.seq, exc)  # fmt: skip
            await _settle(delivery.nak, self.retry_delay * delivery.attempt)
            return "retried"
        await _settle(delivery.term)
        self._passed(delivery.message.seq)
        return "parked"

    async def park_once(self, message: StoredMessage, reason: str) -> bool:
        """Park a poison message on `<root>.dlq.<service>` unless it is parked there already.

        The start-up replay meets the same poison message at every start, and the consumer may
        deliver it again after that: the dead-letter stream itself (its `Tessera-DLQ-Source`
        headers, read once) says whether it is there, not the duplicate window. True if parked
        now; either way the caller skips the message and goes on."""
        assert self.metrics is not None
        if self._parked is None:
            self._parked = {m.headers.get(DLQ_SOURCE, "") for m in await self.log.dead_letters(self.name)}
        source = f"{message.subject}#{message.seq}"
        if source in self._parked:
            log.warning("skipping %s (parked before): %s", source, reason)
            return False
        log.warning("parking %s: %s", source, reason)
        await self.log.park(self.name, message, reason)
        self._parked.add(source)
        self.metrics.dead_letters.labels(self.name).inc()
        return True

    async def run(
        self,
        stopping: asyncio.Event,
        poll: float = 0.5,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        """Consume until `stopping` is set; the message in hand is always finished and settled."""
        if self.follow_from:
            await self._follow(stopping, on_ready)
            return
        if self.carried:  # another service's consumer hands us our deliveries
            if on_ready is not None:
                on_ready()
            await stopping.wait()
            return
        consumer = await self.log.consumer(self.durable, self.filter_subjects)
        if on_ready is not None:
            on_ready()
        riders = [asyncio.create_task(r.run()) for r in self._riders]
        held: Delivery | None = None
        try:
            while not stopping.is_set():
                delivery, held = held or await consumer.next(timeout=poll), None
                if delivery is None:
                    continue
                kind = delivery.message.headers.get(TYPE, "")
                if kind not in self._groups:
                    await self.handle(await self._share(delivery))
                    continue
                group = [delivery]
                while len(group) < self.max_group and (nxt := consumer.ready()) is not None:
                    if nxt.message.headers.get(TYPE, "") != kind:
                        held = nxt
                        break
                    group.append(nxt)
                await self.handle_group(kind, [await self._share(d) for d in group])
        finally:
            await cancel_all(riders)
            await consumer.close()

    async def _share(self, delivery: Delivery) -> Delivery:
        """Our part of a delivery, the riders' parts handed to them (or settled unread)."""
        if not self._riders:
            return delivery
        shared = Shared(delivery, 1 + len(self._riders))
        for rider in self._riders:
            part = shared.part()
            if rider.wants(delivery.message):
                rider.give(part)
            else:
                await part.ack()
        return shared.part()

    async def _follow(self, stopping: asyncio.Event, on_ready: Callable[[], None] | None) -> None:
        """Handle every message of the filters from `follow_from` on, until `stopping`."""

        async def read(pattern: str) -> None:
            start = self.follow_from
            while True:  # a reader that stopped would freeze the projection for good
                try:
                    async for msg in self.log.follow(start, pattern):
                        await self.handle(Followed(msg))
                        start = msg.seq + 1
                except Exception:
                    log.exception("following %s from #%d failed; again", pattern, start)
                    await asyncio.sleep(self.retry_delay)  # back off, then read on from `start`

        readers = [asyncio.create_task(read(p)) for p in self.filter_subjects]
        try:  # on_ready inside: its failure (a closed stdout) left the readers to the loop's
            if on_ready is not None:  # shutdown, whose one cancellation nats-py could swallow
                on_ready()
            await stopping.wait()
        finally:
            await cancel_all(readers)

    async def handle_group(self, kind: str, group: list[Delivery]) -> None:
        """Decode a run of same-type deliveries, let the group handler take what it can, ack
        those, and handle the rest one by one (which also covers decoding problems)."""
        items: list[tuple[Event, Received]] = []
        for d in group:
            try:
                env = Envelope.from_headers(d.message.headers)
                event = self._decode(d, env.type)
            except (EnvelopeError, UndecodableEvent, UnknownEventType):
                break  # this one and the rest one by one (`handle` tells the observers)
            for see in self.observers:
                see(d.message, kind, lambda e=event: e)  # type: ignore[misc]
            items.append((event, Received(d.message, env)))
        done = 0
        if len(items) > 1 and not recording(self.tracer):
            # exported nowhere: each event's effects continue its producer's trace, no spans
            # (the links, spans and contexts of a group were ~10 µs an event, issue 29)
            items = [(e, replace(rx, trace=extract(rx.message.headers)) if TRACEPARENT_HEADER in rx.message.headers
                      else rx) for e, rx in items]  # fmt: skip
            done = await self._group(kind, items)
        elif len(items) > 1:
            # one span for the group, linked to every producer's span (a batch has many
            # parents), and one per message in its producer's trace, which its effects continue
            links = [Link(sc) for _, rx in items
                     if (sc := trace.get_current_span(extract(rx.message.headers)).get_span_context()).is_valid]  # fmt: skip
            # named by the subject template as every span is (a name with the count in it made
            # a new span kind per batch size); the count is an attribute
            template = subject_template(items[0][1].message.subject)
            with self.tracer.start_as_current_span(  # type: ignore[union-attr]
                f"process {template}", kind=SpanKind.CONSUMER, links=links,
                attributes={"messaging.system": "nats", "messaging.operation.type": "process",
                            "messaging.destination.template": template, "tessera.event.type": kind,
                            "tessera.group.size": len(items), "messaging.batch.message_count": len(items)},
            ) as group_span:  # fmt: skip
                spans = [self.tracer.start_span(  # type: ignore[union-attr]
                    f"process {subject_template(rx.message.subject)}", context=extract(rx.message.headers),
                    kind=SpanKind.CONSUMER, links=[Link(group_span.get_span_context())],
                    attributes=self._attributes(rx.message, rx.envelope)) for _, rx in items]  # fmt: skip
                items = [(e, replace(rx, trace=trace.set_span_in_context(sp)))
                         for (e, rx), sp in zip(items, spans, strict=True)]  # fmt: skip
                try:
                    done = await self._group(kind, items)
                finally:
                    for sp in spans:
                        sp.end()
        if done:
            self._passed(max(d.message.seq for d in group[:done]))
            self.handled_at = time.monotonic()
        for d in group[:done]:
            await _settle(d.ack)
            self.metrics.events.labels(self.name, kind, "handled").inc()  # type: ignore[union-attr]
        for d in group[done:]:
            await self.handle(d)


    async def _group(self, kind: str, items: list[tuple[Event, Received]]) -> int:
        """How many of `items` the group handler took (none when it failed: one by one)."""
        try:
            return await self._groups[kind](items)
        except Exception:
            log.exception("group handler for %d %s failed; one by one", len(items), kind)
            return 0


def recording(tracer: Tracer) -> bool:
    """Whether `tracer`'s spans go anywhere: a tracer of its own (tests), or the global one
    once a provider is set (`--trace-exporter`)."""
    if isinstance(tracer, trace.ProxyTracer):
        # the proxy's own resolution (a real tracer once a provider is set): asking for the
        # global provider read os.environ each time, 14 % of a rider's handling (issue 29)
        tracer = getattr(tracer, "_tracer", tracer)
    return not isinstance(tracer, trace.NoOpTracer | trace.ProxyTracer)


class _Carried:
    """The producer's trace made current for a handler, with no span of our own: what a
    no-op tracer's span amounts to (its effects' headers carry the same parent), without its
    name, attributes and context managers per message — 9 % of the queue process, exported
    nowhere (issue 29's profile)."""

    __slots__ = ("_headers", "_token")

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers
        self._token: object = None

    def __enter__(self) -> trace.Span:
        if TRACEPARENT_HEADER in self._headers:  # (no trace: the handler's context is empty already)
            self._token = context.attach(extract(self._headers))
        return trace.INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]


async def _settle(settle: Callable[..., Awaitable[None]], *args: float) -> None:
    """Ack/nak/term; a failure to settle (connection hiccup) is not the handler's failure: the
    server redelivers after ack_wait and the idempotent handler makes that harmless."""
    try:
        await settle(*args)
    except Exception as exc:
        log.warning("could not settle a delivery (%s): it will be redelivered", exc)


def chain(*handlers: Handler) -> Handler:
    """One handler that runs several in order (a service hosting another's handlers)."""

    async def handle(event: Event, rx: Received) -> None:
        for h in handlers:
            await h(event, rx)

    return handle


#: What a reader does with a message whose body does not match its type: a service parks it
#: (`EventService.park_once`), a read-only reader counts it; either way the reader goes on.
PoisonHandler = Callable[[StoredMessage, str], Awaitable[object]]


async def skip_poison(message: StoredMessage, reason: str) -> None:
    log.warning("skipping undecodable %s#%d: %s", message.subject, message.seq, reason)


async def decode_stored(
    message: StoredMessage,
    on_poison: PoisonHandler = skip_poison,
    types: frozenset[str] | None = None,
    registry: Registry | None = None,
) -> Event | None:
    """One stored message decoded as the live path decodes it: None for an unknown (or
    unwanted) type — skipped — and for an undecodable body, which `on_poison` hears about first.
    One bad message in the log must never stop a reader (issue 12 item 4)."""
    reg = registry or default_registry()
    kind = message.headers.get(TYPE, "")
    if kind not in reg or (types is not None and kind not in types):
        return None
    try:
        return reg.decode(kind, message.data)
    except UndecodableEvent as exc:
        await on_poison(message, f"undecodable {kind}: {exc}")
        return None


async def replay_decoded(
    log_: EventLog,
    patterns: Sequence[str],
    until: int,
    types: frozenset[str] | None = None,
    registry: Registry | None = None,
    on_poison: PoisonHandler = skip_poison,
    start: int = 1,
) -> AsyncIterator[tuple[StoredMessage, Event]]:
    """The events of `patterns` from `start` (after a snapshot) up to sequence `until`, decoded:
    what a service folds at start, before its consumer takes over above `until`. Unknown (or
    unwanted) types are skipped; undecodable ones go to `on_poison` (a service passes its
    `park_once`) and are skipped."""
    if start > until:
        return
    for pattern in patterns:
        async for msg in log_.replay(start, pattern):
            if msg.seq > until:
                break
            event = await decode_stored(msg, on_poison, types, registry)
            if event is not None:
                yield msg, event


def install_stop_signals(stopping: asyncio.Event) -> None:
    """SIGTERM/SIGINT set the event; the consume loop then exits after the current message."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)


async def serve_api(
    nc: object,
    service: str,
    subject_prefix: str,
    endpoints: Mapping[str, Callable[[bytes], Awaitable[bytes]]],
    version: str = "0.1.0",
) -> object:
    """Register request/reply endpoints with `nats.micro` so `$SRV.PING/INFO/STATS` find them."""
    from nats.micro import add_service
    from nats.micro.request import Request

    svc = await add_service(nc, name=f"tessera-{service}", version=version)  # type: ignore[arg-type]
    tracer = trace.get_tracer(f"tessera.{service}")
    group = svc.add_group(name=subject_prefix)
    for name, fn in endpoints.items():

        async def handler(req: Request, fn: Callable[[bytes], Awaitable[bytes]] = fn,
                          subject: str = f"{subject_prefix}.{name}") -> None:  # fmt: skip
            # the caller's trace (`tessera apply`) goes on through what the request appends
            with tracer.start_as_current_span(
                f"process {subject_template(subject)}", context=extract(req.headers),
                kind=SpanKind.SERVER, attributes={"messaging.system": "nats", "rpc.system": "nats",
                                                  "messaging.destination.name": subject},
            ):  # fmt: skip
                try:
                    await req.respond(await fn(req.data))
                except Exception as exc:
                    await req.respond_error("500", str(exc))

        await group.add_endpoint(name=name, handler=handler)
    return svc
