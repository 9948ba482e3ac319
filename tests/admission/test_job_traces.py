"""One trace per job (README "Traces"): each job `tessera apply` submits starts a trace of its
own at its `admit` span, linked both ways with the request's span, so a manifest of fourteen
jobs is fourteen traces (it was one, which their finishes kept growing) and the request's trace
still shows what it submitted."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.envelope import TRACEPARENT, TYPE
from services.admission import service as admission_service
from services.admission.service import AdmissionService
from services.runtime.eventlog import EventLog

PODS = "---".join(f"""
apiVersion: v1
kind: Pod
metadata: {{name: infer-{i}}}
spec:
  containers:
    - name: server
      image: ascend-vllm:0.9
      resources: {{limits: {{huawei.com/Ascend910B3: "1"}}}}
""" for i in range(3))


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def submitted_traces(log: EventLog) -> dict[str, str]:
    """Job subject → the trace id its `JobSubmitted` carries ("" for none)."""
    return {m.subject: m.headers[TRACEPARENT].split("-")[1] if TRACEPARENT in m.headers else ""
            async for m in log.replay(1, log.subjects.all_jobs()) if m.headers.get(TYPE) == "JobSubmitted"}  # fmt: skip


async def test_each_applied_job_is_a_trace_of_its_own_linked_with_the_request(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = traced()
    monkeypatch.setattr(admission_service, "tracer", provider.get_tracer("tessera.admission"))
    svc = AdmissionService(event_log)
    await svc.recover()
    with provider.get_tracer("cli").start_as_current_span("tessera apply") as request:
        await svc.apply(PODS)
    asked = f"{request.get_span_context().trace_id:032x}"
    jobs = await submitted_traces(event_log)
    assert len(jobs) == 3 and len(set(jobs.values())) == 3 and asked not in jobs.values()
    spans = exporter.get_finished_spans()
    admits = {f"{s.context.trace_id:032x}": s for s in spans if s.name.startswith("admit ") and s.name.endswith(".ev.job.{ns}.{job}")}
    assert set(admits) == set(jobs.values())
    (apply,) = [s for s in spans if s.name == "apply"]
    assert f"{apply.context.trace_id:032x}" == asked
    for admit in admits.values():
        assert admit.parent is None  # the job trace's root…
        assert [link.context.span_id for link in admit.links] == [apply.context.span_id]  # …from the request
    assert sorted(link.context.trace_id for link in apply.links) == sorted(s.context.trace_id for s in admits.values())
    assert sorted(str(link.attributes["tessera.job"]) for link in apply.links) == [  # type: ignore[index]
        f"default/infer-{i}" for i in range(3)]


async def test_exported_nowhere_a_traced_requests_jobs_still_get_traces_of_their_own(event_log: EventLog) -> None:
    """Admission with no exporter makes no span; the jobs of a traced request (the command
    always has real ids) still each carry a sampled trace of their own, which a service that
    exports continues; an untraced request's jobs carry none (nothing to read for anyone)."""
    provider, _ = traced()
    svc = AdmissionService(event_log)
    await svc.recover()
    with provider.get_tracer("cli").start_as_current_span("tessera apply") as request:
        await svc.apply(PODS)
    asked = f"{request.get_span_context().trace_id:032x}"
    traceparents = [m.headers[TRACEPARENT] async for m in event_log.replay(1, event_log.subjects.all_jobs())]
    assert len(traceparents) == 3 and len({t.split("-")[1] for t in traceparents}) == 3
    assert all(t.split("-")[1] != asked and t.endswith("-01") for t in traceparents)
    await svc.apply(PODS.replace("infer-", "plain-"))
    assert [t for s, t in (await submitted_traces(event_log)).items() if "plain" in s] == ["", "", ""]


async def test_a_jobs_root_span_ends_with_what_became_of_its_write(event_log: EventLog,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The root was made and ended before the append: a write another writer beat (or the log
    already held) left a finished "admit" span that read as a job's start, and nothing went on
    from it (helper-38's review). It ends now with what became of the write."""
    provider, exporter = traced()
    monkeypatch.setattr(admission_service, "tracer", provider.get_tracer("tessera.admission"))

    async def admission() -> AdmissionService:
        svc = AdmissionService(event_log)
        await svc.recover()
        return svc

    def roots() -> dict[str, ReadableSpan]:
        ended = {str(s.attributes["tessera.job"]): s for s in exporter.get_finished_spans()  # type: ignore[index]
                 if s.name.startswith("admit ") and s.attributes}  # fmt: skip
        exporter.clear()
        return ended

    first, same, other = await admission(), await admission(), await admission()  # all before infer-*
    await first.apply(PODS)
    appended = roots()
    assert sorted(appended) == [f"default/infer-{i}" for i in range(3)]
    for s in appended.values():
        assert s.attributes["tessera.outcome"] == "appended" and int(s.attributes["tessera.stream.seq"]) > 0  # type: ignore[index,arg-type]
    reply = await same.apply(PODS)  # the very same pods, by a writer that had not seen them
    assert {r.outcome for r in reply.results} == {"unchanged"}
    assert {s.attributes["tessera.outcome"] for s in roots().values()} == {"unchanged"}  # type: ignore[index]
    reply = await other.apply(PODS.replace('Ascend910B3: "1"', 'Ascend910B3: "2"'))  # other pods, same names
    assert {r.outcome for r in reply.results} == {"rejected"}
    beaten = roots()
    assert len(beaten) == 3
    for s in beaten.values():
        assert s.attributes["tessera.outcome"] == "conflict"  # type: ignore[index]
        assert s.status.status_code.name == "ERROR" and "another write came first" in str(s.status.description)
