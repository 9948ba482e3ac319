"""Why admission refused an object: field path, offending value and the rule (Volcano webhook /
HAMi admission / Kubernetes strict field validation) it broke."""

from __future__ import annotations

import json
from dataclasses import dataclass

#: Longest value shown in a rejection; a hostile 1 MB name is cut so the reply stays small.
SHOWN_MAX = 256


@dataclass(frozen=True, slots=True)
class Rejection:
    kind: str
    namespace: str
    name: str
    path: str
    value: str
    rule: str

    def line(self) -> str:
        """`<path>: <rule> (value: <value>)`, the form of every reason and warning in a reply."""
        shown = f" (value: {self.value})" if self.value else ""
        return f"{self.path}: {self.rule}{shown}"

    def message(self) -> str:
        """`<Kind>: <path>: <rule> (value: <value>)` — the kind first so readers can route it."""
        return f"{self.kind}: {self.line()}"


class Rejected(Exception):
    """Raised inside admission while normalizing one object; carries every rejection found."""

    def __init__(self, rejections: list[Rejection]) -> None:
        super().__init__("; ".join(r.message() for r in rejections))
        self.rejections = rejections


def quoted(value: object) -> str:
    """A value as the API server's field errors show it (Go `%q` for strings), cut to
    `SHOWN_MAX` characters so the reply to a hostile object stays bounded."""
    if isinstance(value, str):
        if len(value) > SHOWN_MAX:
            return json.dumps(value[:SHOWN_MAX]) + f"... ({len(value)} characters)"
        return json.dumps(value)
    return str(value)


def invalid(value: object, detail: str) -> str:
    """The API server's `field.Invalid` body: `Invalid value: "<v>": <detail>`."""
    return f"Invalid value: {quoted(value)}: {detail}"


def required(detail: str = "") -> str:
    """The API server's `field.Required` body: `Required value[: <detail>]`."""
    return f"Required value: {detail}" if detail else "Required value"


def too_long(limit: int, unit: str = "bytes") -> str:
    """The API server's `field.TooLong` body for a size limit."""
    return f"Too long: must have at most {limit} {unit}"
