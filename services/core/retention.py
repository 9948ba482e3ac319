"""How long a service remembers a finished job: the `keep` most recently finished, by log order.

A service that keeps every job it ever saw grows with history (issue 12 item 7). What it may
forget is decided by the fold, never by a clock: a job is forgotten when `keep` other jobs
finished after it, so a replay from sequence 1 forgets exactly what the live service forgot,
and a snapshot plus its tail equals a full replay. A job submitted again under the same name
is live again and leaves the order.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from contracts.base import Event
from contracts.events import JobDeleted, JobPhaseChanged

#: Job phases after which no proposal of the job may be committed (the queue service's terminal
#: phases; a `Completed` PodGroup phase without a reason is the PodGroup's, not the job's end).
ENDED_PHASES = frozenset({"Failed", "Aborted", "Terminated"})

#: What `--keep-finished` defaults to in every service (and `tessera compact`).
DEFAULT_KEEP_FINISHED = 100


def ended(event: Event) -> str:
    """Why an event ends the job ("" if it does not)."""
    if isinstance(event, JobDeleted):
        return "the job was deleted"
    if isinstance(event, JobPhaseChanged) and (
        event.phase in ENDED_PHASES or (event.phase == "Completed" and event.reason)
    ):
        return f"the job is {event.phase}"
    return ""


K = TypeVar("K", bound=Hashable)


@dataclass
class FinishedOrder(Generic[K]):
    """Finished jobs in the order they finished; `finished` says which ones fall out."""

    keep: int = DEFAULT_KEEP_FINISHED
    order: dict[K, None] = field(default_factory=dict)

    def finished(self, key: K) -> list[K]:
        """`key` finished now (again: it moves to the newest); the keys to forget, oldest first."""
        self.order.pop(key, None)
        self.order[key] = None
        out: list[K] = []
        while len(self.order) > max(0, self.keep):
            oldest = next(iter(self.order))
            del self.order[oldest]
            out.append(oldest)
        return out

    def revived(self, key: K) -> None:
        """Submitted again: live, not to be forgotten."""
        self.order.pop(key, None)
