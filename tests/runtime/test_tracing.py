"""Decisions are watchable as traces: a handled event's span continues the trace of the span
that appended it, and a group commit's span links every proposal it carried, while what it
appends for each proposal continues that proposal's trace."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.events import NodeLost, PlacementProposed
from services.runtime.eventlog import MemoryLog
from services.runtime.service import EventService, Outgoing, Received
from services.runtime.telemetry import subject_template


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def test_consumer_span_continues_the_producer_trace() -> None:
    provider, exporter = traced()
    tracer = provider.get_tracer("test")
    log = MemoryLog()
    seen: list[str] = []

    async def on_lost(event: NodeLost, rx: Received) -> None:
        seen.append(event.node)

    svc = EventService("watcher", log, [log.subjects.all_nodes()], {NodeLost: on_lost}, tracer=tracer)  # type: ignore[dict-item]
    with tracer.start_as_current_span("operator action") as root:
        await svc.publish(Outgoing(log.subjects.node("n1"), NodeLost(node="n1", reason="test")))
    consumer = await log.consumer("watcher", svc.filter_subjects)
    delivery = await consumer.next(timeout=1)
    assert delivery is not None and await svc.handle(delivery) == "handled"
    (process,) = [s for s in exporter.get_finished_spans() if s.name.startswith("process")]
    assert seen == ["n1"]
    assert process.context.trace_id == root.get_span_context().trace_id
    assert process.parent is not None and process.parent.span_id == root.get_span_context().span_id


async def test_group_span_links_every_producer() -> None:
    provider, exporter = traced()
    tracer = provider.get_tracer("test")
    log = MemoryLog()
    got: list[int] = []

    async def one(event: PlacementProposed, rx: Received) -> None:
        raise AssertionError("the group handler takes all of them")

    answered: list[str] = []

    async def group(items: list) -> int:
        got.append(len(items))
        for event, rx in items:  # what the group appends for each continues that one's trace
            out = Outgoing(log.subjects.job("ns", event.name), NodeLost(node=event.name))
            answered.append(svc.entry(out, rx).headers["traceparent"].split("-")[1])
        return len(items)

    svc = EventService("alloc", log, [log.subjects.all_jobs()], {PlacementProposed: one},  # type: ignore[dict-item]
                       group_handlers={PlacementProposed: group}, tracer=tracer)  # type: ignore[dict-item]  # fmt: skip
    roots = []
    for i in range(3):
        with tracer.start_as_current_span(f"session {i}") as root:
            roots.append(root.get_span_context().trace_id)
            p = PlacementProposed(namespace="ns", name=f"j{i}", based_on=0, placements=())
            await svc.publish(Outgoing(log.subjects.job("ns", f"j{i}"), p))
    consumer = await log.consumer("alloc", svc.filter_subjects)
    first = await consumer.next(timeout=1)
    assert first is not None
    batch = [first]
    while (d := consumer.ready()) is not None:
        batch.append(d)
    await svc.handle_group("PlacementProposed", batch)
    assert got == [3]
    (span,) = [s for s in exporter.get_finished_spans() if s.attributes.get("tessera.group.size") == 3]  # type: ignore[union-attr]
    assert span.name == f"process {subject_template(log.subjects.job('ns', 'j0'))}"  # a template, no count
    assert span.name.endswith(".ev.job.{ns}.{job}")
    assert span.attributes["messaging.batch.message_count"] == 3  # type: ignore[index]
    assert sorted(link.context.trace_id for link in span.links) == sorted(roots)
    assert answered == [f"{r:032x}" for r in roots]


async def test_without_an_exporter_the_trace_still_travels_through_a_handler() -> None:
    """No tracer provider (`--trace-exporter none`): no span is made per message, but what a
    handler appends carries its cause's trace, so a collector added later on another service
    still joins the decisions up."""
    from opentelemetry import trace

    provider, _ = traced()
    log = MemoryLog()
    carried: list[str] = []

    async def on_lost(event: NodeLost, rx: Received) -> None:
        out = Outgoing(log.subjects.node("n2"), NodeLost(node="n2", reason="follow-up"))
        carried.append(svc.entry(out).headers["traceparent"])  # the current context's trace

    svc = EventService("quiet", log, [log.subjects.all_nodes()], {NodeLost: on_lost},  # type: ignore[dict-item]
                       tracer=trace.NoOpTracer())  # fmt: skip
    with provider.get_tracer("test").start_as_current_span("operator action") as root:
        await svc.publish(Outgoing(log.subjects.node("n1"), NodeLost(node="n1", reason="test")))
    consumer = await log.consumer("quiet", svc.filter_subjects)
    delivery = await consumer.next(timeout=1)
    assert delivery is not None and await svc.handle(delivery) == "handled"
    ctx = root.get_span_context()
    assert [c.split("-")[1:3] for c in carried] == [[f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"]]
    assert not trace.get_current_span().get_span_context().is_valid  # detached after handling


def test_the_command_gives_its_spans_two_seconds_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """`TESSERA_TRACE_EXPORTER=otlp tessera apply …` with no collector listening held the command
    8 s at exit (the exporter's 10 s default, retried); the command now gives up after 2 s,
    and an operator's own OpenTelemetry timeout still wins."""
    from services.runtime import telemetry

    def cli_exporter_timeout() -> float:
        exporter = telemetry._otlp_exporter(telemetry.export_timeout_for_cli())
        return exporter._client._timeout  # (where the SDK's HTTP exporter keeps it)

    for name in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    assert cli_exporter_timeout() == telemetry.CLI_EXPORT_TIMEOUT == 2.0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")
    assert cli_exporter_timeout() == 7.0


@pytest.mark.parametrize("variable, value", [("TESSERA_TRACE_EXPORTER", "jaeger"), ("OTEL_TRACES_EXPORTER", "zipkin")])
def test_an_unknown_exporter_is_one_line_naming_the_variable(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    """`TESSERA_TRACE_EXPORTER=jaeger tessera apply -f x.yaml` printed a traceback: now one line
    (the name, the variable it came from, what is accepted), exit 2, before anything is asked."""
    from services.cli.main import main
    from services.runtime import telemetry

    for name in telemetry.EXPORTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    manifest = tmp_path / "x.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i}]}\n")
    telemetry.cli_tracer.cache_clear()
    try:
        code = main(["apply", "-f", str(manifest), "--nats", "nats://127.0.0.1:1"])  # nothing listens
    finally:
        telemetry.cli_tracer.cache_clear()
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"'{value}'" in err and variable in err and "none, console, otlp" in err


def test_a_list_of_exporters_uses_each_and_a_service_refuses_an_unknown_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`OTEL_TRACES_EXPORTER=console,otlp` (a list, as OpenTelemetry allows) used the console
    alone, silently; a service's `--trace-exporter` takes the same list and refuses a bad name."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from services.runtime import telemetry
    from services.runtime.bootstrap import common_parser

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console, otlp")
    monkeypatch.delenv("TESSERA_TRACE_EXPORTER", raising=False)
    assert telemetry.default_exporter() == "console,otlp"
    provider = telemetry.make_provider("test", telemetry.default_exporter())
    processors = provider._active_span_processor._span_processors  # (where the SDK keeps them)
    exporters = {type(getattr(p, "span_exporter", None) or p._batch_processor._exporter).__name__
                 if isinstance(p, BatchSpanProcessor) else type(p.span_exporter).__name__ for p in processors}  # fmt: skip
    provider.shutdown()
    assert exporters == {"ConsoleSpanExporter", "OTLPSpanExporter"}
    assert common_parser("queue").parse_args(["--trace-exporter", "otlp,console"]).trace_exporter == "otlp,console"
    with pytest.raises(SystemExit) as refused:
        common_parser("queue").parse_args(["--trace-exporter", "jaeger"])
    assert refused.value.code == 2 and "unknown trace exporter 'jaeger'" in capsys.readouterr().err


def test_console_spans_are_one_json_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--trace-exporter console` writes into the service's log: OpenTelemetry's indented span
    JSON made 2,247 of 2,321 lines of a scheduler.log unparseable after one apply ("log lines
    are JSON" no longer held). Each span is now one line, and every line parses."""
    import io
    import json

    from services.runtime import telemetry

    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    provider = telemetry.make_provider("test", "console")
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("session", attributes={"tessera.job": "default/a"}):
        with tracer.start_as_current_span("decide tessera.ev.job.{ns}.{job}"):
            pass
    provider.shutdown()
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["decide tessera.ev.job.{ns}.{job}", "session"]
