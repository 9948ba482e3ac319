"""The envelope: what travels in NATS headers next to every event body.

Dispatch reads the envelope first (STYLE §9): the `Tessera-Type` header picks a decoder, so an
unknown type can be skipped without touching the body, and a body that fails to decode can be
parked with a precise reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import msgspec

from contracts.base import Record

TYPE = "Tessera-Type"
VERSION = "Tessera-Version"
MSG_ID = "Nats-Msg-Id"
CORRELATION_ID = "Tessera-Correlation-Id"
CAUSATION_ID = "Tessera-Causation-Id"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
DLQ_REASON = "Tessera-Dlq-Reason"
DLQ_SOURCE = "Tessera-Dlq-Source"


class EnvelopeError(ValueError):
    """The headers do not form a valid envelope (no type, bad version)."""


class Envelope(Record, frozen=True):
    type: str
    version: int = 1
    msg_id: str = ""
    correlation_id: str = ""
    causation_id: str = ""
    traceparent: str = ""
    tracestate: str = ""

    def to_headers(self) -> dict[str, str]:
        headers = {TYPE: self.type, VERSION: str(self.version)}
        for key, value in (
            (MSG_ID, self.msg_id),
            (CORRELATION_ID, self.correlation_id),
            (CAUSATION_ID, self.causation_id),
            (TRACEPARENT, self.traceparent),
            (TRACESTATE, self.tracestate),
        ):
            if value:
                headers[key] = value
        return headers

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | None) -> Envelope:
        if not headers or not headers.get(TYPE):
            raise EnvelopeError(f"missing {TYPE} header")
        raw_version = headers.get(VERSION, "1")
        try:
            version = int(raw_version)
        except ValueError:
            raise EnvelopeError(f"{VERSION} header {raw_version!r} is not an integer") from None
        return cls(
            type=headers[TYPE],
            version=version,
            msg_id=headers.get(MSG_ID, ""),
            correlation_id=headers.get(CORRELATION_ID, ""),
            causation_id=headers.get(CAUSATION_ID, ""),
            traceparent=headers.get(TRACEPARENT, ""),
            tracestate=headers.get(TRACESTATE, ""),
        )


def msg_id(cause: str, index: int = 0, producer: str = "") -> str:
    """Deterministic message id from the producer, the causing fact and the output's index.

    Re-processing the same cause yields the same ids, so JetStream's duplicate window drops the
    second copy. That is only a fast path: the window lasts two minutes, so every handler must
    also recognise an older redelivery from the log itself (DESIGN §4). The
    producer (the service name) keeps two services that react to the same event apart — without
    it the queue service's answer to a TaskFinished and the allocator's release batch for it
    would share ids, and the later one would be dropped (or refused, inside an atomic batch).
    """
    if len(cause) > 100:
        cause = hashlib.sha256(cause.encode()).hexdigest()[:40]
    return f"{producer}:{cause}#{index}" if producer else f"{cause}#{index}"


def content_id(kind: str, body: bytes) -> str:
    """A stable id for an externally submitted fact (same manifest → same id)."""
    return f"{kind}:{hashlib.sha256(body).hexdigest()[:32]}"


_json = msgspec.json.Encoder()


def dumps(value: object) -> bytes:
    return _json.encode(value)
