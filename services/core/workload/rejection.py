"""Why admission refused an object: field path, offending value and the rule (Volcano webhook /
HAMi admission / Kubernetes strict field validation) it broke."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rejection:
    kind: str
    namespace: str
    name: str
    path: str
    value: str
    rule: str

    def message(self) -> str:
        """`<Kind>: <path>: <rule> (value: <value>)` — the kind first so readers can route it."""
        shown = f" (value: {self.value})" if self.value else ""
        return f"{self.kind}: {self.path}: {self.rule}{shown}"


class Rejected(Exception):
    """Raised inside admission while normalizing one object; carries every rejection found."""

    def __init__(self, rejections: list[Rejection]) -> None:
        super().__init__("; ".join(r.message() for r in rejections))
        self.rejections = rejections
