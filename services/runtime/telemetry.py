"""OpenTelemetry wiring: W3C trace context travels in NATS headers next to every event.

Span names follow the messaging conventions with subject *templates*
(`process tessera.ev.job.{ns}.{job}`), never ids, so traces group by kind; decision facts go into
attributes. No exporter is configured unless asked for (console, or OTLP when its package is
installed), so the default costs almost nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping

from opentelemetry import context, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR: TextMapPropagator = TraceContextTextMapPropagator()

_TEMPLATES = {
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


def make_provider(
    service: str, exporter: str = "none", extra: SpanExporter | None = None
) -> TracerProvider:
    """Build (not install) a provider; services install theirs in their bootstrap."""
    provider = TracerProvider(resource=Resource.create({"service.name": f"tessera-{service}"}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore
                OTLPSpanExporter,
            )
        except ImportError as exc:  # pragma: no cover - depends on optional package
            raise RuntimeError(
                "OTLP export needs opentelemetry-exporter-otlp (pip install it)"
            ) from exc
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter != "none":
        raise ValueError(f"unknown trace exporter {exporter!r} (none, console, otlp)")
    if extra is not None:
        provider.add_span_processor(SimpleSpanProcessor(extra))
    return provider


def inject(headers: MutableMapping[str, str], ctx: context.Context | None = None) -> None:
    _PROPAGATOR.inject(headers, context=ctx)


def extract(headers: Mapping[str, str] | None) -> context.Context:
    return _PROPAGATOR.extract(dict(headers or {}))


def current_trace_id() -> str:
    span_ctx = trace.get_current_span().get_span_context()
    return f"{span_ctx.trace_id:032x}" if span_ctx.is_valid else ""


class TraceIdFilter(logging.Filter):
    """Puts the active trace id on every log record, so logs join traces."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = current_trace_id()
        return True


def configure_logging(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(TraceIdFilter())
    handler.setFormatter(
        logging.Formatter(
            '{"ts":"%(asctime)s","level":"%(levelname)s","service":"'
            + service
            + '","logger":"%(name)s","trace_id":"%(trace_id)s","msg":%(message)r}'
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
