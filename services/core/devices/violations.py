"""Typed rejections of device requests and device configuration.

Admission must say *which* resource, *which* value and *which* rule, and report every broken
rule of a container at once (a user fixing one typo at a time is the HAMi experience we avoid).
Exceptions are kept for the two places where the caller cannot go on: a bad catalogue and a
container that cannot be turned into device requests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken request rule: ``resource=value`` and the rule's reason."""

    resource: str
    value: str
    rule: str
    #: A rule HAMi applies by changing the value (e.g. cores > 100 % clamped to 100): the
    #: request is accepted, and the user is told what it became instead of finding out later.
    warning: bool = False

    @property
    def message(self) -> str:
        if self.value == "":
            return f"{self.resource}: {self.rule}"
        return f"{self.resource}={self.value} {self.rule}"

    def __str__(self) -> str:
        return self.message


class RequestRejected(ValueError):
    """A container's device resources break one or more HAMi request rules (all listed)."""

    def __init__(self, violations: tuple[Violation, ...]) -> None:
        self.violations = violations
        super().__init__("; ".join(v.message for v in violations))


class CatalogueError(ValueError):
    """The device catalogue (HAMi ``device-config.yaml``) is malformed; ``path`` names the key."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)
