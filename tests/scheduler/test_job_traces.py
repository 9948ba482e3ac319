"""A job's decisions continue the job's trace, also when the scheduler that decides them was
restarted while the job waited (recovered from a snapshot or by a full replay): the reviewer's
`kill -9` of the scheduler put a waiting job's placement, commit and start in a trace of their own,
rooted at the new process's session."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.events import JobSubmitted, JobUnschedulable, JobUpdated
from contracts.registry import default_registry
from services.runtime.eventlog import Appended, Entry, EventLog
from services.runtime.service import decode_stored
from services.runtime.snapshot import MemoryStore, Retention
from services.runtime.telemetry import inject
from services.scheduler import service as scheduler_service
from services.scheduler.service import Scheduler
from tests.allocator.scenario import ascend_node, put
from tests.scheduler.test_scheduler_service import inference_job, seed


async def submit_traced(log: EventLog, tracer_provider: TracerProvider, name: str, replicas: int = 1) -> str:
    """Append a `JobSubmitted` in a trace of its own (as `tessera apply` does); its trace id."""
    reg = default_registry()
    event = JobSubmitted(spec=inference_job(name, replicas=replicas))
    headers = reg.envelope(event, msg_id=f"submit-{name}").to_headers()
    with tracer_provider.get_tracer("test").start_as_current_span(f"apply {name}") as span:
        inject(headers)
    result = await log.append(Entry(log.subjects.job("default", name), reg.encode(event), headers))
    assert isinstance(result, Appended)
    return f"{span.get_span_context().trace_id:032x}"


@pytest.mark.parametrize("from_snapshot", [True, False], ids=["snapshot", "replay"])
async def test_a_restarted_scheduler_decides_a_waiting_job_in_the_jobs_trace(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch, from_snapshot: bool
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(scheduler_service, "tracer", provider.get_tracer("tessera.scheduler"))
    await seed(event_log)
    waiting = await submit_traced(event_log, provider, "huge", replicas=9)  # more than n1 holds
    store = MemoryStore()
    first = Scheduler(event_log)
    if from_snapshot:
        first.retain(Retention(store=store, snapshot_every=1))
    await first.recover()
    outs = first.session_events()  # the job waits: its reason, in its trace
    assert JobUnschedulable in {type(o.event) for o in outs}
    for o in outs:
        await event_log.append(first.service.entry(o))
    # restarted (the first one gone without a word): the job's subject now ends in the verdict
    fits = await submit_traced(event_log, provider, "small")
    again = Scheduler(event_log)
    if from_snapshot:
        again.retain(Retention(store=store, snapshot_every=1_000))
    await again.recover()
    assert bool(again.snapshots.used) == from_snapshot
    # room for the waiting job now: a second node
    await put(event_log, event_log.subjects.node("n2"), ascend_node("n2", cards=16))
    for msg in [m async for m in event_log.replay(again.recovered_seq + 1, event_log.subjects.events)]:
        event = await decode_stored(msg)
        assert event is not None
        again._fold(msg.seq, event)
    exporter.clear()
    outs = again.session_events()
    traces = {o.event.name: again.service.entry(o).headers["traceparent"].split("-")[1] for o in outs}  # type: ignore[attr-defined]
    assert traces["huge"] == waiting and traces["small"] == fits
    decided = {s.attributes["tessera.job"]: f"{s.context.trace_id:032x}"  # type: ignore[index]
               for s in exporter.get_finished_spans() if s.name.startswith("decide ")}  # fmt: skip
    assert decided == {"default/huge": waiting, "default/small": fits}


async def test_after_a_restart_a_jobs_trace_is_its_submissions_not_its_subjects_last(event_log: EventLog,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The job's subject may end in a message of another trace (here a `JobUpdated` written
    under its request's, as admission writes it): resumed from that, the restarted scheduler's
    decisions went to the update's request (helper-38's review)."""
    provider = TracerProvider()
    monkeypatch.setattr(scheduler_service, "tracer", provider.get_tracer("tessera.scheduler"))
    await seed(event_log)
    waiting = await submit_traced(event_log, provider, "huge", replicas=9)
    reg = default_registry()
    update = JobUpdated(namespace="default", name="huge", spec=inference_job("huge", replicas=10))
    headers = reg.envelope(update, msg_id="update-huge").to_headers()
    with provider.get_tracer("test").start_as_current_span("apply again"):
        inject(headers)
    assert isinstance(await event_log.append(Entry(event_log.subjects.job("default", "huge"), reg.encode(update),
                                                   headers)), Appended)  # fmt: skip
    again = Scheduler(event_log)
    await again.recover()
    await put(event_log, event_log.subjects.node("n2"), ascend_node("n2", cards=16))
    for msg in [m async for m in event_log.replay(again.recovered_seq + 1, event_log.subjects.events)]:
        event = await decode_stored(msg)
        assert event is not None
        again._fold(msg.seq, event)
    outs = again.session_events()
    traces = {o.event.name: again.service.entry(o).headers["traceparent"].split("-")[1] for o in outs}  # type: ignore[attr-defined]
    assert traces["huge"] == waiting


@pytest.mark.parametrize("from_snapshot", [True, False], ids=["snapshot", "replay"])
async def test_a_restarted_scheduler_numbers_its_sessions_on_from_the_log(event_log: EventLog,
                                                                         from_snapshot: bool) -> None:  # fmt: skip
    """Session numbers name sessions in `explain`, `replay --verify` and the traces: a restart
    began again at 1, so the log held two different "session 1"s (helper-35's review). The
    number is the log's: read from its decisions' headers, and kept in the view's snapshot."""
    await seed(event_log)
    await put(event_log, event_log.subjects.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9)))
    first = Scheduler(event_log)
    await first.recover()
    for _ in range(2):  # a verdict, then (a node later) a proposal: two sessions in the log
        for o in first.session_events():
            await event_log.append(first.service.entry(o))
        await put(event_log, event_log.subjects.node("n2"), ascend_node("n2", cards=16))
        async for msg in event_log.replay(first.view.seq + 1, event_log.subjects.events):
            first.view.note_session(msg.headers)
            first._fold(msg.seq, await decode_stored(msg))  # type: ignore[arg-type]
    assert first.sessions == 2
    store = MemoryStore()
    if from_snapshot:  # a replica that snapshots the whole log, then one that starts from it
        writer = Scheduler(event_log)
        writer.retain(Retention(store=store, snapshot_every=1))
        await writer.recover()
    await put(event_log, event_log.subjects.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    again = Scheduler(event_log)
    again.retain(Retention(store=store, snapshot_every=1_000))
    await again.recover()
    assert bool(again.snapshots.used) == from_snapshot
    outs = again.session_events()
    assert outs and {again.service.entry(o).headers["Tessera-Session"] for o in outs} == {"3"}
