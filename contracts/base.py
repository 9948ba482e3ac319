"""The base every event derives from.

Events are frozen, keyword-only and tagged so that one msgspec decoder can read any of them and
new optional fields can be added without breaking old readers (msgspec schema-evolution rules):
new fields always get defaults, fields are never retyped, unknown fields are ignored.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", omit_defaults=True):
    """A fact that happened. The tag (the class name) is also sent as the `Tessera-Type` header."""

    #: Schema version of this event type; bumped when a field's meaning changes.
    VERSION: ClassVar[int] = 1

    @classmethod
    def type_name(cls) -> str:
        return cls.__struct_config__.tag  # type: ignore[return-value]


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A value object nested inside events (specs, usages); never sent on its own."""
