"""Type name → decoder. Built once by `build_registry`, never filled by import side effects."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import msgspec

from contracts.base import Event
from contracts.envelope import Envelope
from contracts.events import ALL_EVENTS


class UnknownEventType(LookupError):
    """The type header names no registered event: skip it (a newer writer, most likely)."""


class UndecodableEvent(ValueError):
    """The body does not match its declared type: park it on the dead-letter subject."""


class Registry:
    def __init__(self, events: Iterable[type[Event]]) -> None:
        self._decoders: dict[str, msgspec.json.Decoder] = {}
        self._types: dict[str, type[Event]] = {}
        for cls in events:
            name = cls.type_name()
            if name in self._types:
                raise ValueError(f"event type {name!r} registered twice")
            self._types[name] = cls
            self._decoders[name] = msgspec.json.Decoder(cls)
        self._encoder = msgspec.json.Encoder()

    def __contains__(self, type_name: str) -> bool:
        return type_name in self._types

    @property
    def types(self) -> dict[str, type[Event]]:
        return dict(self._types)

    def encode(self, event: Event) -> bytes:
        return self._encoder.encode(event)

    def envelope(self, event: Event, **fields: str) -> Envelope:
        return Envelope(type=event.type_name(), version=type(event).VERSION, **fields)

    def decode(self, type_name: str, body: bytes) -> Event:
        decoder = self._decoders.get(type_name)
        if decoder is None:
            raise UnknownEventType(type_name)
        try:
            return decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UndecodableEvent(f"{type_name}: {exc}") from None


@cache
def default_registry() -> Registry:
    return Registry(ALL_EVENTS)
