"""Heartbeats: liveness on core NATS, never in the log (DESIGN §4).

One subject per node, `<root>.hb.<node>`, so a monitor subscribes to `<root>.hb.*` and a human
can watch one node with `nats sub`. The body says who and when (the sender's wall clock; the
monitor uses its own receive time to decide, so clock skew cannot keep a dead node alive).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

from contracts.subjects import Subjects, escape

#: Publishes one heartbeat body on a subject (core NATS `publish`, or a test double).
BeatSink = Callable[[str, bytes], Awaitable[None]]


class Beat(msgspec.Struct, frozen=True):
    node: str
    at: float


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Beat)


def heartbeat_subject(subjects: Subjects, node: str) -> str:
    return f"{subjects.root}.hb.{escape(node)}"


def all_heartbeats(subjects: Subjects) -> str:
    return f"{subjects.root}.hb.*"


def encode_beat(node: str, at: float) -> bytes:
    return _encoder.encode(Beat(node, at))


def decode_beat(data: bytes) -> Beat | None:
    """None for a body that is not a heartbeat (ignored: liveness must not crash the monitor)."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError:
        return None


def nats_sink(nc: object) -> BeatSink:
    """A sink over a nats-py client (`nc.publish`)."""

    async def publish(subject: str, body: bytes) -> None:
        await nc.publish(subject, body)  # type: ignore[attr-defined]

    return publish
