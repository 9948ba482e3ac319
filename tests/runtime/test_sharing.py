"""One consumer per process (services/runtime/sharing.py): a rider sees every delivery of its
subjects, a retry it asks for redelivers the message to every reader, a slow rider holds back
only its own parts — and the message is acknowledged only once every reader is done with it."""

from __future__ import annotations

import asyncio

from contracts.base import Event
from contracts.events import NodeLost, QueueDeleted
from services.runtime.eventlog import EventLog
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import EventService, Outgoing, Received

N = 5


class Reader:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.changed = asyncio.Event()
        self.gate: asyncio.Event | None = None  # handling waits on it when set
        self.fail_once: set[str] = set()

    async def on_event(self, event: Event, rx: Received) -> None:
        if self.gate is not None:
            await self.gate.wait()
        name = getattr(event, "node", "") or getattr(event, "queue", "")
        self.seen.append((name, rx.message.seq))
        self.changed.set()
        if name in self.fail_once:
            self.fail_once.discard(name)
            raise RuntimeError("once")

    async def until(self, done: object) -> None:
        async with asyncio.timeout(30):
            while not done():  # type: ignore[operator]
                self.changed.clear()
                await self.changed.wait()


def services(log: EventLog) -> tuple[EventService, EventService, Reader, Reader]:
    s = log.subjects
    main, side = Reader(), Reader()
    primary = EventService("primary", log, [s.all_queues(), s.all_nodes()],
                           {NodeLost: main.on_event, QueueDeleted: main.on_event},  # type: ignore[dict-item]
                           retry_delay=0.01)  # fmt: skip
    rider = EventService("rider", log, [s.all_nodes()], {NodeLost: side.on_event},  # type: ignore[dict-item]
                         retry_delay=0.01)  # fmt: skip
    assert primary.carry(rider) and rider.carried
    return primary, rider, main, side


async def publish(svc: EventService) -> None:
    s = svc.log.subjects
    for i in range(N):
        await svc.publish(Outgoing(s.node(f"n{i}"), NodeLost(node=f"n{i}", reason="test")))
    await svc.publish(Outgoing(s.queue("q"), QueueDeleted(queue="q")))


async def test_a_rider_reads_its_subjects_from_the_carriers_consumer(event_log: EventLog) -> None:
    primary, rider, main, side = services(event_log)
    side.fail_once = {"n2"}  # the rider's retry redelivers n2 to both readers
    await publish(primary)
    stopping = asyncio.Event()
    tasks = [asyncio.create_task(primary.run(stopping, poll=0.05)), asyncio.create_task(rider.run(stopping))]
    try:
        await side.until(lambda: len({n for n, _ in side.seen}) == N)
        await main.until(lambda: sum(n == "n2" for n, _ in main.seen) == 2)
    finally:
        stopping.set()
        await asyncio.gather(*tasks)
    assert sorted({n for n, _ in side.seen}) == [f"n{i}" for i in range(N)]  # no queue event
    assert [n for n, _ in side.seen].count("n2") == 2
    assert {n for n, _ in main.seen} == {f"n{i}" for i in range(N)} | {"q"}
    # the rider has no consumer of its own: a second run of the carrier delivers nothing more
    # (every message was acknowledged once both were done with it)
    seen = len(main.seen)
    consumer = await event_log.consumer(primary.durable, primary.filter_subjects)
    try:
        assert await consumer.next(timeout=0.3) is None
    finally:
        await consumer.close()
    assert len(main.seen) == seen


async def test_a_slow_rider_holds_back_only_its_own_parts(event_log: EventLog) -> None:
    primary, _, main, side = services(event_log)
    side.gate = asyncio.Event()  # the rider waits (an API server not listed yet)
    await publish(primary)
    stopping = asyncio.Event()
    task = asyncio.create_task(primary.run(stopping, poll=0.05))
    try:
        await main.until(lambda: len(main.seen) == N + 1)  # the carrier went through them all
        assert side.seen == []
        if isinstance(event_log, JetStreamLog):  # none of the rider's is acknowledged yet
            info = await event_log.js.consumer_info(event_log.stream, primary.durable)
            assert info.num_ack_pending >= N
        side.gate.set()
        await side.until(lambda: len(side.seen) == N)
    finally:
        stopping.set()
        await task
    assert [n for n, _ in side.seen] == [f"n{i}" for i in range(N)]  # in log order


async def test_a_reader_of_other_subjects_is_not_carried(event_log: EventLog) -> None:
    s = event_log.subjects
    primary = EventService("primary", event_log, [s.all_nodes()], {})
    other = EventService("other", event_log, [s.all_nodes(), s.all_jobs()], {})
    assert not primary.carry(other) and not other.carried
