"""One contract, two backends: every test here runs on the in-memory log and on real JetStream."""

from __future__ import annotations

import asyncio

import pytest

from contracts.envelope import DLQ_REASON, MSG_ID, TYPE, Envelope
from contracts.events import JobDeleted, NodeLost
from contracts.registry import default_registry
from services.runtime.eventlog import Appended, BatchCommitted, Conflict, Entry, EventLog, MemoryLog
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import LogUnavailable, StoredMessage
from services.runtime.service import EventService, Received


def ev_entry(
    log: EventLog, subject: str, event, expected: int | None = None, mid: str = ""
) -> Entry:
    reg = default_registry()
    headers = reg.envelope(event, msg_id=mid).to_headers()
    return Entry(subject, reg.encode(event), headers, expected)


async def test_append_assigns_increasing_sequences_and_last_reads_back(event_log: EventLog) -> None:
    s = event_log.subjects
    a = await event_log.append(ev_entry(event_log, s.node("n1"), NodeLost(node="n1")))
    b = await event_log.append(ev_entry(event_log, s.node("n2"), NodeLost(node="n2")))
    assert isinstance(a, Appended) and isinstance(b, Appended)
    assert b.seq == a.seq + 1
    last = await event_log.last(s.node("n1"))
    assert last is not None and last.seq == a.seq
    assert default_registry().decode(last.headers[TYPE], last.data) == NodeLost(node="n1")
    assert await event_log.last(s.node("nobody")) is None
    assert await event_log.last_sequence() == b.seq
    at = await event_log.at(a.seq)  # one message by its sequence, whatever its subject
    assert at is not None and (at.seq, at.subject, at.headers[TYPE]) == (a.seq, s.node("n1"), "NodeLost")
    assert await event_log.at(b.seq + 1) is None


async def test_expected_sequence_conflict_is_a_typed_result(event_log: EventLog) -> None:
    subj = event_log.subjects.node("n1")
    first = await event_log.append(ev_entry(event_log, subj, NodeLost(node="n1"), expected=0))
    assert isinstance(first, Appended)
    stale = await event_log.append(ev_entry(event_log, subj, NodeLost(node="n1"), expected=0))
    assert stale == Conflict(subj, 0, first.seq)
    assert "expected last sequence 0" in str(stale)
    ok = await event_log.append(ev_entry(event_log, subj, NodeLost(node="n1"), expected=first.seq))
    assert isinstance(ok, Appended)


async def test_two_writers_racing_on_one_subject_exactly_one_wins(event_log: EventLog) -> None:
    subj = event_log.subjects.card("n1", "card-0")
    base = await event_log.append(ev_entry(event_log, subj, NodeLost(node="base")))
    assert isinstance(base, Appended)
    results = await asyncio.gather(
        *(
            event_log.append(ev_entry(event_log, subj, NodeLost(node=f"w{i}"), expected=base.seq))
            for i in range(2)
        )
    )
    assert sorted(type(r).__name__ for r in results) == ["Appended", "Conflict"]
    winner = next(r for r in results if isinstance(r, Appended))
    loser = next(r for r in results if isinstance(r, Conflict))
    assert loser.subject == subj and loser.expected == base.seq and loser.actual == winner.seq


async def test_atomic_batch_commits_all_entries_contiguously(event_log: EventLog) -> None:
    s = event_log.subjects
    subjects = [s.card("n1", f"c{i}") for i in range(3)] + [s.job("default", "train")]
    result = await event_log.append_batch(
        [ev_entry(event_log, subj, NodeLost(node=subj), expected=0) for subj in subjects]
    )
    assert isinstance(result, BatchCommitted) and result.count == 4
    assert result.last_seq - result.first_seq == 3
    got = [m.subject async for m in event_log.replay(result.first_seq)]
    assert got == subjects


async def test_atomic_batch_with_one_failed_expectation_writes_nothing(event_log: EventLog) -> None:
    s = event_log.subjects
    taken = s.card("n1", "c1")
    seed = await event_log.append(ev_entry(event_log, taken, NodeLost(node="x")))
    assert isinstance(seed, Appended)
    before = await event_log.last_sequence()
    entries = [
        ev_entry(event_log, s.card("n1", "c0"), NodeLost(node="a"), expected=0),
        ev_entry(event_log, taken, NodeLost(node="b"), expected=0),  # stale: c1 is at seed.seq
        ev_entry(event_log, s.job("default", "train"), NodeLost(node="c"), expected=0),
    ]
    result = await event_log.append_batch(entries)
    assert result == Conflict(taken, 0, seed.seq)
    assert await event_log.last_sequence() == before
    assert await event_log.last(s.card("n1", "c0")) is None
    assert await event_log.last(s.job("default", "train")) is None


async def test_duplicate_message_id_is_dropped(event_log: EventLog) -> None:
    subj = event_log.subjects.job("default", "j1")
    first = await event_log.append(
        ev_entry(event_log, subj, JobDeleted(namespace="default", name="j1"), mid="cause#0")
    )
    again = await event_log.append(
        ev_entry(event_log, subj, JobDeleted(namespace="default", name="j1"), mid="cause#0")
    )
    assert isinstance(first, Appended) and isinstance(again, Appended)
    assert again.duplicate and again.seq == first.seq
    assert [m.seq async for m in event_log.replay()] == [first.seq]


async def test_pipelined_appends_keep_input_order(event_log: EventLog) -> None:
    s = event_log.subjects
    entries = [ev_entry(event_log, s.node(f"n{i % 3}"), NodeLost(node=str(i))) for i in range(50)]
    results = await event_log.append_pipelined(entries)
    seqs = [r.seq for r in results if isinstance(r, Appended)]
    assert seqs == sorted(seqs) and len(seqs) == 50
    nodes = [
        default_registry().decode(m.headers[TYPE], m.data).node  # type: ignore[attr-defined]
        async for m in event_log.replay()
    ]
    assert nodes == [str(i) for i in range(50)]


async def test_replay_returns_events_in_order_with_identical_bytes(event_log: EventLog) -> None:
    s = event_log.subjects
    written = [
        ev_entry(event_log, s.node(f"n{i % 4}"), NodeLost(node=f"n{i}", reason="é✓" * i))
        for i in range(20)
    ]
    for e in written:
        assert isinstance(await event_log.append(e), Appended)
    replayed = [m async for m in event_log.replay()]
    assert [m.data for m in replayed] == [e.data for e in written]
    assert [m.subject for m in replayed] == [e.subject for e in written]
    assert [m.seq for m in replayed] == list(range(replayed[0].seq, replayed[0].seq + 20))
    tail = [m.seq async for m in event_log.replay(replayed[10].seq, s.node("n1"))]
    assert tail == [m.seq for m in replayed[10:] if m.subject == s.node("n1")]


async def test_last_per_subject_gives_one_latest_message_per_subject(event_log: EventLog) -> None:
    s = event_log.subjects
    for i in range(9):
        await event_log.append(
            ev_entry(event_log, s.card("n1", f"c{i % 3}"), NodeLost(node=str(i)))
        )
    await event_log.append(ev_entry(event_log, s.node("n1"), NodeLost(node="other")))
    lasts = await event_log.last_per_subject(s.all_cards())
    decoded = {m.subject: default_registry().decode(m.headers[TYPE], m.data).node for m in lasts}  # type: ignore[attr-defined]
    assert decoded == {s.card("n1", "c0"): "6", s.card("n1", "c1"): "7", s.card("n1", "c2"): "8"}


async def test_consumer_nak_redelivers_term_does_not_and_reopen_resumes(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    for i in range(3):
        await event_log.append(ev_entry(event_log, s.node("n"), NodeLost(node=str(i))))
    consumer = await event_log.consumer("c1", [s.all_nodes()])
    first = await consumer.next(timeout=2)
    assert first is not None and first.attempt == 1
    nak_seq = first.message.seq
    await first.nak()
    # Redelivery order is not guaranteed (JetStream may hand out buffered messages first).
    seen: dict[int, list[int]] = {}
    unsettled = None
    while (d := await consumer.next(timeout=5)) is not None:
        seen.setdefault(d.message.seq, []).append(d.attempt)
        if d.message.seq == nak_seq:
            await d.term()  # poison: never again
        elif d.message.seq == nak_seq + 1:
            await d.ack()
        else:
            unsettled = d  # left in hand, as a crash would
        if len(seen) == 3:
            break
    assert seen[nak_seq] == [2]
    assert seen[nak_seq + 1] == [1]
    assert unsettled is not None and unsettled.message.seq == nak_seq + 2
    await consumer.close()
    reopened = await event_log.consumer("c1", [s.all_nodes()])
    back = await reopened.next(timeout=10)
    # its count of deliveries may start again: JetStream's durable is reset at a start that
    # finds deliveries unsettled (test_unsettled_redelivery.py)
    assert back is not None and back.message.seq == unsettled.message.seq
    await back.ack()
    assert await reopened.next(timeout=0.5) is None
    await reopened.close()


async def _service_run(log: EventLog, seen: list) -> EventService:
    async def on_lost(event: NodeLost, rx: Received) -> None:
        seen.append(event.node)

    return EventService("probe", log, [log.subjects.all_nodes()], {NodeLost: on_lost})


async def test_undecodable_message_is_parked_with_reason_and_consumer_goes_on(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    seen: list[str] = []
    svc = await _service_run(event_log, seen)
    bad = Entry(
        s.node("n"), b'{"type":"NodeLost","node":12}', Envelope(type="NodeLost").to_headers()
    )
    garbage = Entry(s.node("n"), b"\xff\x00not json", Envelope(type="NodeLost").to_headers())
    no_type = Entry(s.node("n"), b"{}", {MSG_ID: "x"})
    for e in (bad, garbage, no_type, ev_entry(event_log, s.node("n"), NodeLost(node="good"))):
        await event_log.append(e)
    consumer = await event_log.consumer(svc.durable, svc.filter_subjects)
    outcomes = []
    for _ in range(4):
        d = await consumer.next(timeout=2)
        assert d is not None
        outcomes.append(await svc.handle(d))
    assert outcomes == ["parked", "parked", "parked", "handled"]
    assert seen == ["good"]
    parked = await event_log.dead_letters("probe")
    assert len(parked) == 3
    assert "undecodable NodeLost" in parked[0].headers[DLQ_REASON]
    assert "node" in parked[0].headers[DLQ_REASON]
    assert "Tessera-Type" in parked[2].headers[DLQ_REASON]
    assert svc.metrics is not None and svc.metrics.count("dead_letters") == 3
    assert await consumer.next(timeout=0.5) is None  # parked messages are not redelivered
    await consumer.close()


async def test_unknown_event_type_is_skipped_and_counted(event_log: EventLog) -> None:
    s = event_log.subjects
    seen: list[str] = []
    svc = await _service_run(event_log, seen)
    await event_log.append(
        Entry(
            s.node("n"),
            b'{"type":"FromTheFuture"}',
            Envelope(type="FromTheFuture", version=7).to_headers(),
        )
    )
    await event_log.append(ev_entry(event_log, s.node("n"), NodeLost(node="after")))
    consumer = await event_log.consumer(svc.durable, svc.filter_subjects)
    outcomes = [await svc.handle(await consumer.next(timeout=2)) for _ in range(2)]  # type: ignore[arg-type]
    assert outcomes == ["unknown", "handled"]
    assert seen == ["after"]
    assert svc.metrics is not None and svc.metrics.count("unknown", "FromTheFuture") == 1
    assert await event_log.dead_letters("probe") == []
    await consumer.close()


async def test_a_batch_holding_a_known_message_id_is_a_duplicate_not_a_conflict(
    event_log: EventLog,
) -> None:
    """Retrying a conflict would be refused again until the window ends (then land twice): the
    writer must learn that this very batch landed, and re-read."""
    from services.runtime.eventlog import Duplicate

    s = event_log.subjects
    batch = [ev_entry(event_log, s.card("n1", "c0"), NodeLost(node="a"), mid="cause#0"),
             ev_entry(event_log, s.job("default", "j"), NodeLost(node="b"), mid="cause#1")]  # fmt: skip
    assert isinstance(await event_log.append_batch(batch), BatchCommitted)
    before = await event_log.last_sequence()
    again = await event_log.append_batch(batch)
    assert isinstance(again, Duplicate)
    assert await event_log.last_sequence() == before


async def test_ack_floor_of_a_durable(event_log: EventLog) -> None:
    s = event_log.subjects
    assert await event_log.ack_floor("nobody") == 0
    for i in range(3):
        await event_log.append(ev_entry(event_log, s.job("default", f"j{i}"), NodeLost(node="x")))
    consumer = await event_log.consumer("floor", [s.all_jobs()])
    first = await consumer.next(timeout=2)
    second = await consumer.next(timeout=2)
    assert first is not None and second is not None
    await second.ack()
    await consumer.close()  # flushes the acks of a JetStream consumer
    assert await event_log.ack_floor("floor") == 0  # the first one is still unacknowledged


async def test_a_delivery_settled_after_later_ones_were_read_is_acknowledged(event_log: EventLog) -> None:
    """A reader carried by another's consumer (services/runtime/sharing.py) settles its part
    after the consumer has read on and sent the acks in hand: that ack must go out too, not
    land in a batch already sent (under load every such message was redelivered to every
    reader after ack_wait, and again)."""
    s = event_log.subjects
    for i in range(3):
        await event_log.append(ev_entry(event_log, s.job("default", f"j{i}"), NodeLost(node="x")))
    consumer = await event_log.consumer("late", [s.all_jobs()])
    late = await consumer.next(timeout=2)
    assert late is not None
    for _ in range(2):
        d = await consumer.next(timeout=2)
        assert d is not None
        await d.ack()
    assert await consumer.next(timeout=0.2) is None  # nothing left: the acks in hand go out
    await late.ack()  # only now
    await consumer.close()  # flushes what is in hand
    # sent to the server (nats-py marks a message acked when its ack is published; the
    # server's own count follows asynchronously); the memory log acks at once
    sent = getattr(getattr(late, "_msg", None), "_ackd", True)
    assert sent
    if isinstance(event_log, MemoryLog):
        assert await event_log.ack_floor("late") == 3


async def test_follow_reads_from_a_sequence_then_waits_for_what_comes(event_log: EventLog) -> None:
    s = event_log.subjects
    for i in range(3):
        await event_log.append(ev_entry(event_log, s.node(f"n{i}"), NodeLost(node=f"n{i}")))
    reader = event_log.follow(2, s.all_nodes())
    got = [await anext(reader), await anext(reader)]
    assert [m.subject for m in got] == [s.node("n1"), s.node("n2")]
    pending = asyncio.ensure_future(anext(reader))  # nothing there yet: it waits
    await event_log.append(ev_entry(event_log, s.job("ns", "j"), JobDeleted(namespace="ns", name="j")))
    await event_log.append(ev_entry(event_log, s.node("n3"), NodeLost(node="n3")))
    nxt = await asyncio.wait_for(pending, 10)
    assert (nxt.seq, nxt.subject) == (5, s.node("n3"))  # the job event is not on the filter
    await reader.aclose()


async def test_a_handler_meeting_an_unreachable_log_is_retried_past_its_attempts_never_parked(
    event_log: EventLog,
) -> None:
    """A failover (no stream leader for seconds, publish acks timing out) fails every handler
    that appends; parking those after `max_attempts` would lose the events (a `TaskFinished`
    whose release never happens), so each kind of 'unreachable' is a retry however often."""
    s = event_log.subjects
    kinds = list(event_log.unavailable)
    assert kinds, "the backend names what an unreachable log raises"
    seen: list[str] = []

    async def on_lost(event: NodeLost, rx: Received) -> None:
        if kinds:
            raise kinds.pop(0)()
        seen.append(event.node)

    svc = EventService("probe", event_log, [s.all_nodes()], {NodeLost: on_lost}, max_attempts=2, retry_delay=0.01)
    await event_log.append(ev_entry(event_log, s.node("n"), NodeLost(node="n")))
    consumer = await event_log.consumer(svc.durable, svc.filter_subjects)
    outcomes = []
    while not seen:
        d = await consumer.next(timeout=5)
        assert d is not None, outcomes
        outcomes.append(await svc.handle(d))
    assert outcomes == ["retried"] * len(event_log.unavailable) + ["handled"]
    assert await event_log.dead_letters("probe") == []

    async def bug(event: NodeLost, rx: Received) -> None:
        raise ValueError("a bug, not the log")

    buggy = EventService("buggy", event_log, [s.all_nodes()], {NodeLost: bug}, max_attempts=2, retry_delay=0.01)
    mine = await event_log.consumer(buggy.durable, buggy.filter_subjects)
    outcomes = [await buggy.handle(await mine.next(timeout=5)) for _ in range(2)]  # type: ignore[arg-type]
    assert outcomes == ["retried", "parked"]  # other failures still end parked
    await consumer.close()
    await mine.close()


async def test_a_message_of_an_atomic_batch_can_be_parked(event_log: EventLog) -> None:
    """A stored batch message carries the server's batch headers; parking a copy of it must not
    be read as another atomic publish (the dead-letter stream allows none: the parking service
    ended on "atomic publish is disabled" in a failover test)."""
    s = event_log.subjects
    batch = [ev_entry(event_log, s.node(f"b{i}"), NodeLost(node=f"b{i}"), expected=0) for i in range(2)]
    assert isinstance(await event_log.append_batch(batch), BatchCommitted)
    stored = await event_log.last(s.node("b1"))
    assert stored is not None
    await event_log.park("probe", stored, "a handler failed")
    parked = await event_log.dead_letters("probe")
    assert [p.data for p in parked] == [stored.data]
    assert parked[0].headers[DLQ_REASON] == "a handler failed"


async def test_an_append_nobody_answers_is_unavailable_not_an_error(jetstream_log: JetStreamLog) -> None:
    """A publish no stream answers (status 503: the stream's leader died and the rest elect one)
    is `LogUnavailable`, which handlers retry however often, not a failure they park after a
    few attempts — a failover test lost proposals that way."""
    orphan = Entry(f"{jetstream_log.subjects.root}-nostream.x", b"{}", {})
    with pytest.raises(LogUnavailable):
        await jetstream_log.append(orphan)


async def test_a_poison_message_met_while_the_dead_letters_are_out_of_reach_waits_not_ends_the_service(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parking appends to the dead-letter stream; in a failover that append fails as any other
    does. Raised from the message loop it ended the service; the message is kept (delivered
    again) and parked once the log answers."""
    s = event_log.subjects
    kinds = list(event_log.unavailable)
    park = event_log.park

    async def failing_park(service: str, message: StoredMessage, reason: str) -> None:
        if kinds:
            raise kinds.pop(0)()
        await park(service, message, reason)

    monkeypatch.setattr(event_log, "park", failing_park)
    svc = await _service_run(event_log, [])
    svc.retry_delay = 0.01
    await event_log.append(Entry(s.node("n"), b"\xff\x00not json", Envelope(type="NodeLost").to_headers()))
    consumer = await event_log.consumer(svc.durable, svc.filter_subjects)
    outcomes = []
    while "parked" not in outcomes:
        d = await consumer.next(timeout=5)
        assert d is not None, outcomes
        outcomes.append(await svc.handle(d))
    assert outcomes == ["retried"] * len(event_log.unavailable) + ["parked"]
    assert len(await event_log.dead_letters("probe")) == 1
    await consumer.close()


async def test_a_followers_poison_message_met_while_the_dead_letters_are_out_of_reach_is_read_again(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower (the scheduler reads the log, it holds no deliveries) has nothing to give back:
    its park failing must reach its reader, which reads on from that very message after a
    pause — taken as given back, the message was skipped unparked."""
    from services.runtime.eventlog.model import Followed

    s = event_log.subjects
    kinds = list(event_log.unavailable)

    async def failing_park(service: str, message: StoredMessage, reason: str) -> None:
        raise kinds[0]()

    monkeypatch.setattr(event_log, "park", failing_park)
    svc = await _service_run(event_log, [])
    await event_log.append(Entry(s.node("n"), b"\xff\x00not json", Envelope(type="NodeLost").to_headers()))
    stored = [m async for m in event_log.replay(1, s.all_nodes())]
    with pytest.raises(kinds[0]):
        await svc.handle(Followed(stored[0]))
