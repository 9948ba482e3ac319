"""The node-agent in-process over both log backends: register, run, finish, evict, restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from contracts.base import Event
from contracts.devices import CardSpec
from contracts.events import (
    EvictionRequested,
    JobSubmitted,
    NodeLost,
    NodeRegistered,
    PlacementCommitted,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.nodeagent.service import NodeAgent
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import decoded, put
from tests.draining import drain as drained
from tests.processes import wait_until


def node(name: str) -> NodeRegistered:
    card = CardSpec(uuid=f"{name}-Ascend910B3-0", node=name, index=0, type="Ascend910B3",
                    vendor="huawei", memory=65536, cores=20, split_count=4, mode="template")  # fmt: skip
    return NodeRegistered(node=name, cpu_milli=64_000, memory_mib=512_000, cards=(card,))


def job(name: str, duration: float | None) -> JobSubmitted:
    task = TaskSpec(name="w", replicas=2, duration=duration)
    return JobSubmitted(spec=JobSpec(namespace="ns", name=name, tasks=(task,)))


def commit(name: str, *placements: tuple[str, str]) -> PlacementCommitted:
    return PlacementCommitted(
        namespace="ns",
        name=name,
        placements=tuple(TaskPlacement(task=t, node=n) for t, n in placements),
    )


class Watcher:
    """Reads the log through its own durable consumer: waits for events, never sleeps."""

    def __init__(self, log: EventLog, subject: str) -> None:
        self.log, self.subject, self.seen = log, subject, []  # type: list[Event]

    async def until(self, pred, timeout: float = 5.0) -> Event:  # type: ignore[no-untyped-def]
        consumer = await self.log.consumer(f"watch-{id(self)}", [self.subject])
        try:
            async with asyncio.timeout(timeout):
                while True:
                    for e in self.seen:
                        if pred(e):
                            self.seen.remove(e)
                            return e
                    d = await consumer.next(timeout=0.5)
                    if d is not None:
                        self.seen.extend(decoded([d.message]))
                        await d.ack()
        finally:
            await consumer.close()


@pytest.fixture
async def running_agent(event_log: EventLog) -> AsyncIterator[NodeAgent]:
    agent = NodeAgent(event_log, [node("n1"), node("n2")])
    await agent.recover()
    stopping = asyncio.Event()
    loop = asyncio.create_task(agent.service.run(stopping, poll=0.1))
    yield agent
    stopping.set()
    await loop
    await agent.aclose()


def is_(kind: type, task: str):  # type: ignore[no-untyped-def]
    return lambda e: isinstance(e, kind) and e.task == task


async def test_registered_then_committed_task_starts_and_finishes_after_its_duration(
    running_agent: NodeAgent, event_log: EventLog
) -> None:
    s = event_log.subjects
    nodes = decoded([m async for m in event_log.replay(1, s.all_nodes())])
    assert nodes == [node("n1"), node("n2")]
    watcher = Watcher(event_log, s.all_jobs())
    await put(event_log, s.job("ns", "a"), job("a", duration=0.2))
    await put(event_log, s.job("ns", "a"), commit("a", ("a-w-0", "n1"), ("a-w-1", "elsewhere")))
    started = await watcher.until(is_(TaskStarted, "a-w-0"))
    finished = await watcher.until(is_(TaskFinished, "a-w-0"))
    assert isinstance(started, TaskStarted) and isinstance(finished, TaskFinished)
    assert (started.node, finished.node, finished.exit_code, finished.reason) == ("n1", "n1", 0, "")
    assert finished.at == pytest.approx(started.at + 0.2)
    events = decoded([m async for m in event_log.replay(1, s.job("ns", "a"))])
    assert [type(e).__name__ for e in events] == [
        "JobSubmitted",
        "PlacementCommitted",
        "TaskStarted",
        "TaskFinished",
    ]  # nothing for the task placed on a node this agent does not host


async def test_eviction_kills_a_running_task_with_137(
    running_agent: NodeAgent, event_log: EventLog
) -> None:
    s = event_log.subjects
    watcher = Watcher(event_log, s.all_jobs())
    await put(event_log, s.job("ns", "b"), job("b", duration=None))
    await put(event_log, s.job("ns", "b"), commit("b", ("b-w-0", "n2"), ("b-w-1", "n2")))
    await watcher.until(is_(TaskStarted, "b-w-1"))
    evict = EvictionRequested(namespace="ns", name="b", task="b-w-1", reason="preempted")
    await put(event_log, s.job("ns", "b"), evict)
    finished = await watcher.until(is_(TaskFinished, "b-w-1"))
    assert (finished.exit_code, finished.reason) == (137, "evicted")  # type: ignore[attr-defined]
    # The agent folds its report after the append returns, still holding its lock: the watcher
    # can read the report first. Taking the lock waits for that fold (the lock is FIFO).
    async with running_agent._lock:
        pass
    assert [r.task for r in running_agent.state.runs.values() if not r.finished] == ["b-w-0"]


async def test_restart_registers_nothing_new_and_reports_nothing_twice(
    event_log: EventLog,
) -> None:
    s = event_log.subjects
    first = NodeAgent(event_log, [node("n1")])
    await first.recover()
    await put(event_log, s.job("ns", "c"), job("c", duration=None))
    await put(event_log, s.job("ns", "c"), commit("c", ("c-w-0", "n1")))
    await drain(first)
    await first.aclose()
    before = await event_log.last_sequence()
    assert (
        sum(isinstance(e, TaskStarted) for e in decoded([m async for m in event_log.replay()])) == 1
    )
    # A second agent for the same nodes, with a fresh consumer that re-reads the whole log.
    again = NodeAgent(event_log, [node("n1")], name="nodeagent-again")
    await again.recover()
    assert await drain(again) >= 4
    await again.aclose()
    assert await event_log.last_sequence() == before
    # Lost by the monitor's verdict: the living node registers again, exactly once.
    await put(event_log, s.node("n1"), NodeLost(node="n1", reason="test"))
    await drain(again)
    await drain(again)
    assert [
        type(e).__name__ for e in decoded([m async for m in event_log.replay(1, s.node("n1"))])
    ] == [
        "NodeRegistered",
        "NodeLost",
        "NodeRegistered",
    ]


async def drain(agent: NodeAgent) -> int:
    return len(await drained(agent.service))


async def test_reports_continue_their_own_commits_trace_whoever_appends_them(event_log: EventLog) -> None:
    """Two jobs' pods fall due together and are reported by one timer pass or by another
    job's delivery: each `TaskStarted`/`TaskFinished` continues the trace of its own commit,
    never the one being handled when it was appended."""
    from opentelemetry.sdk.trace import TracerProvider

    from contracts.envelope import TYPE
    from contracts.registry import default_registry
    from services.runtime.eventlog import Entry
    from services.runtime.telemetry import inject

    tracer = TracerProvider().get_tracer("test")
    agent = NodeAgent(event_log, [node("n1"), node("n2")])
    agent.service.tracer = tracer
    await agent.recover()
    stopping = asyncio.Event()
    loop = asyncio.create_task(agent.service.run(stopping, poll=0.1))
    s, reg = event_log.subjects, default_registry()
    traces: dict[str, str] = {}
    try:
        for name in ("a", "b"):
            await put(event_log, s.job("ns", name), job(name, 0.05))
        for name in ("a", "b"):
            ev = commit(name, (f"{name}-w-0", "n1"), (f"{name}-w-1", "n2"))
            headers = reg.envelope(ev, msg_id=f"commit-{name}").to_headers()
            with tracer.start_as_current_span(f"allocate {name}") as span:
                inject(headers)
                traces[name] = f"{span.get_span_context().trace_id:032x}"
            await event_log.append(Entry(s.job("ns", name), reg.encode(ev), headers))
        watcher = Watcher(event_log, s.all_jobs())
        for name in ("a", "b"):
            for i in range(2):
                await watcher.until(lambda e, n=name, i=i: isinstance(e, TaskFinished) and e.task == f"{n}-w-{i}")
    finally:
        stopping.set()
        await loop
        await agent.aclose()
    reports = [m async for m in event_log.replay(1, s.all_jobs())
               if m.headers.get(TYPE) in ("TaskStarted", "TaskFinished")]  # fmt: skip
    assert len(reports) == 8
    for m in reports:
        job_name = s.parse(m.subject)[1][1]
        assert m.headers["traceparent"].split("-")[1] == traces[job_name], (m.subject, m.headers.get(TYPE))


@pytest.mark.parametrize("stop", ["deleted", "evicted"])
async def test_a_kill_continues_the_trace_of_what_asked_for_it(event_log: EventLog, stop: str) -> None:
    """`tessera delete pod` (or an eviction) kills a running pod: its `TaskFinished` is the
    deletion's consequence, a child of the agent's span handling that deletion, which it also
    names as its causation — not of the commit minutes before (the reviewer's trace showed it
    there, and the deletion's span without children)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from contracts.envelope import CAUSATION_ID, TYPE
    from contracts.events import JobDeleted
    from contracts.registry import default_registry
    from services.runtime.eventlog import Entry
    from services.runtime.telemetry import inject

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    agent = NodeAgent(event_log, [node("n1"), node("n2")])
    agent.service.tracer = tracer
    await agent.recover()
    stopping = asyncio.Event()
    loop = asyncio.create_task(agent.service.run(stopping, poll=0.1))
    s, reg = event_log.subjects, default_registry()
    watcher = Watcher(event_log, s.all_jobs())

    async def traced(event: Event, mid: str, name: str) -> str:
        headers = reg.envelope(event, msg_id=mid).to_headers()
        with tracer.start_as_current_span(name) as span:
            inject(headers)
        await event_log.append(Entry(s.job("ns", "a"), reg.encode(event), headers))
        return f"{span.get_span_context().trace_id:032x}"

    try:
        await put(event_log, s.job("ns", "a"), job("a", None))  # runs until stopped
        await traced(commit("a", ("a-w-0", "n1"), ("a-w-1", "n2")), "commit-a", "allocate a")
        for i in range(2):
            await watcher.until(lambda e, i=i: isinstance(e, TaskStarted) and e.task == f"a-w-{i}")
        if stop == "deleted":
            asked = await traced(JobDeleted(namespace="ns", name="a"), "stop-a", "tessera delete")
        else:
            evict = EvictionRequested(namespace="ns", name="a", task="a-w-0", reason="preempted")
            asked = await traced(evict, "stop-a", "session")
        await watcher.until(lambda e: isinstance(e, TaskFinished) and e.reason == stop)
    finally:
        stopping.set()
        await loop
        await agent.aclose()
    (handling,) = [sp for sp in exporter.get_finished_spans()
                   if sp.name.startswith("process ") and sp.attributes.get("tessera.event.type") == stop_type(stop)]  # type: ignore[union-attr]  # fmt: skip
    kills = [m async for m in event_log.replay(1, s.all_jobs())
             if m.headers.get(TYPE) == "TaskFinished"]  # fmt: skip
    assert len(kills) == (2 if stop == "deleted" else 1)
    for m in kills:
        _, trace_id, parent, _ = m.headers["traceparent"].split("-")
        assert (trace_id, parent) == (asked, f"{handling.context.span_id:016x}")
        assert m.headers[CAUSATION_ID] == "stop-a"


def stop_type(stop: str) -> str:
    return "JobDeleted" if stop == "deleted" else "EvictionRequested"


async def test_a_restarted_agent_beats_while_it_rebuilds(event_log: EventLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its heartbeats started only once its rebuild (a replay of the job events since its
    snapshot) was over: a replay longer than the monitor's node timeout made its own nodes
    lost, and the pods on them failed."""
    beats: list[bytes] = []
    replaying = asyncio.Event()

    async def beat(_subject: str, payload: bytes) -> None:
        beats.append(payload)

    agent = NodeAgent(event_log, [node("n1")], heartbeat_every=0.05, beat=beat)

    async def slow_rebuild() -> None:
        await replaying.wait()

    monkeypatch.setattr(agent, "_rebuild", slow_rebuild)
    recovering = asyncio.create_task(agent.recover())
    try:

        async def beating() -> bool:
            return len(beats) >= 2

        await wait_until(beating, 10, "heartbeats while the rebuild runs")
        assert not recovering.done()
    finally:
        replaying.set()
        await recovering
        await agent.aclose()
