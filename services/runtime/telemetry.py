"""OpenTelemetry wiring: W3C trace context travels in NATS headers next to every event.

Span names follow the messaging conventions with subject *templates*
(`process tessera.ev.job.{ns}.{job}`), never ids, so traces group by kind; decision facts go into
attributes. No exporter is configured unless asked for: `console` (to stderr, one JSON line per
span: a service's stdout is the pipe its supervisor reads the ready line from, and may be closed
after it) or `otlp`
(HTTP/protobuf, or gRPC when `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`; endpoint, headers, timeouts and
batching from the standard `OTEL_*` variables), so the default costs almost nothing.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from functools import cache

from opentelemetry import context, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR: TextMapPropagator = TraceContextTextMapPropagator()
TRACEPARENT_HEADER = "traceparent"  # the one header the propagator reads (W3C trace context)

_TEMPLATES = {
    "sched": "{scheduler}",
    "pc": "{priorityclass}",
    "queue": "{queue}",
    "job": "{ns}.{job}",
    "node": "{node}",
    "card": "{node}.{card}",
}


def subject_template(subject: str) -> str:
    """`tessera.ev.job.default.train` → `tessera.ev.job.{ns}.{job}` (low-cardinality span name)."""
    parts = subject.split(".")
    if len(parts) >= 3 and parts[1] == "ev" and parts[2] in _TEMPLATES:
        return ".".join([*parts[:3], _TEMPLATES[parts[2]]])
    if len(parts) >= 3 and parts[1] in ("dlq", "api"):
        return ".".join([*parts[:2], "{service}"])
    return subject


EXPORTERS = ("none", "console", "otlp")
#: where a service or command reads its exporter when no `--trace-exporter` names one, in order
EXPORTER_VARIABLES = ("TESSERA_TRACE_EXPORTER", "OTEL_TRACES_EXPORTER")


class UnknownTraceExporter(ValueError):
    """An exporter name we do not have: said in one line by whoever reads it (a command's exit 2,
    a service's usage error), naming where it came from — a traceback named neither."""


def exporter_setting() -> tuple[str, str]:
    """The configured exporter and where it came from: `TESSERA_TRACE_EXPORTER`, else
    OpenTelemetry's own `OTEL_TRACES_EXPORTER`, else none."""
    for variable in EXPORTER_VARIABLES:
        if value := os.environ.get(variable, "").strip():
            return value, variable
    return "none", "the default"


def exporter_names(value: str, source: str = "--trace-exporter") -> tuple[str, ...]:
    """The exporters `value` names: one, or a comma-separated list as OpenTelemetry allows
    (`console,otlp`: both; the first alone was used before, silently); `none` adds nothing."""
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    for name in names:
        if name not in EXPORTERS:
            raise UnknownTraceExporter(
                f"unknown trace exporter {name!r} in {source}={value!r}: accepted are "
                f"{', '.join(EXPORTERS)}, or a comma-separated list of them")  # fmt: skip
    return tuple(n for n in names if n != "none")


def exporter_argument(value: str) -> str:
    """`--trace-exporter`'s type: checked as the variables are (argparse's usage error, exit 2)."""
    import argparse

    try:
        return ",".join(exporter_names(value)) or "none"
    except UnknownTraceExporter as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def default_exporter() -> str:
    """The configured exporter(s) as written, checked (`UnknownTraceExporter`), or "none"."""
    value, source = exporter_setting()
    return ",".join(exporter_names(value, source)) or "none"


#: s the `tessera` command gives its spans to reach a collector: the exporter's own default (10
#: s, retried with backoff) held every command 8 s at exit when none listened
CLI_EXPORT_TIMEOUT = 2.0


def export_timeout_for_cli() -> float | None:
    """The CLI's export timeout, unless the operator set OpenTelemetry's own (then theirs)."""
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return None
    return CLI_EXPORT_TIMEOUT


def _otlp_exporter(timeout: float | None = None) -> SpanExporter:
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                      os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")) == "grpc":  # fmt: skip
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError("OTLP over gRPC needs the otlp extra (pip install 'tessera[otlp]')") from exc
        return GrpcExporter(timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(timeout=timeout)


def make_provider(
    service: str, exporter: str = "none", extra: SpanExporter | None = None,
    export_timeout: float | None = None,
) -> TracerProvider:
    """Build (not install) a provider; services install theirs in their bootstrap. `exporter`:
    one name of EXPORTERS or a comma-separated list (`UnknownTraceExporter` for another).
    `OTEL_RESOURCE_ATTRIBUTES` are kept; `service.name` is always `tessera-<service>`, so a
    trace shows which service did what."""
    names = exporter_names(exporter)  # before the provider: a bad name builds nothing
    provider = TracerProvider(resource=Resource.create({"service.name": f"tessera-{service}"}))
    if "console" in names:  # one line per span: a service's log stays one JSON document a line
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr, formatter=span_line)))
    if "otlp" in names:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(export_timeout)))
    if extra is not None:
        provider.add_span_processor(SimpleSpanProcessor(extra))
    return provider


def span_line(span: ReadableSpan) -> str:
    """A span as the console exporter writes it: OpenTelemetry's JSON of it on one line (its
    default is indented over ~40 lines, which broke "every log line is JSON" in the service logs
    the exporter writes into)."""
    return span.to_json(indent=None) + "\n"


@cache
def cli_tracer() -> trace.Tracer:
    """The `tessera` command's tracer: a provider of its own (spans get real ids even with no
    exporter, so a service continues the command's trace), exported as the services' are;
    built on first use, so commands that send no request never load it."""
    value, source = exporter_setting()
    exporter_names(value, source)  # a bad name is the command's one-line error, saying where
    return make_provider("cli", value, export_timeout=export_timeout_for_cli()).get_tracer("tessera.cli")


def inject(headers: MutableMapping[str, str], ctx: context.Context | None = None) -> None:
    _PROPAGATOR.inject(headers, context=ctx)


def extract(headers: Mapping[str, str] | None) -> context.Context:
    # most messages carry no trace (none is started without an exporter): the propagator's
    # copy and lookups cost 5 µs a message in every service for an empty context (issue 29)
    if not headers or TRACEPARENT_HEADER not in headers:
        return context.Context()
    return _PROPAGATOR.extract(dict(headers))


def current_trace_id() -> str:
    span_ctx = trace.get_current_span().get_span_context()
    return f"{span_ctx.trace_id:032x}" if span_ctx.is_valid else ""


def context_trace_id(ctx: context.Context | None) -> str:
    """The trace id of a context (a job's, carried from its messages' `traceparent`): with no
    exporter no span is made current, yet the id is known, and a log line saying it joins
    `tessera events` and the traces of any service that does export."""
    if ctx is None:
        return ""
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return f"{span_ctx.trace_id:032x}" if span_ctx.is_valid else ""


def header_trace_id(headers: Mapping[str, str]) -> str:
    """The trace id of a message's W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), read
    from the header itself: what a log line about it says when no span of it is current."""
    value = headers.get(TRACEPARENT_HEADER, "")
    return value[3:35] if len(value) >= 55 and value[2] == "-" and value[35] == "-" else ""


class TraceIdFilter(logging.Filter):
    """Puts the active trace id on every log record, so logs join traces; a record that names
    its own (`extra={"trace_id": …}`, a line about a job written outside its handling) keeps
    it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "trace_id", ""):
            record.trace_id = current_trace_id()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line (ts, level, service, logger, trace_id, msg, and the
    exception), so a log shipper parses it and a trace id joins it to its trace."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        row = {"ts": self.formatTime(record), "level": record.levelname, "service": self.service,
               "logger": record.name, "trace_id": getattr(record, "trace_id", ""),
               "msg": record.getMessage()}  # fmt: skip
        if record.exc_info:
            row["exc"] = self.formatException(record.exc_info)
        return json.dumps(row)


def configure_logging(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(TraceIdFilter())
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
