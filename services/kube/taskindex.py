"""A mapping keyed by (namespace, job, pod) that also knows each job's keys.

A job's submission or deletion forgets what was known of its pods. Walking every key for that
made each `JobSubmitted` cost time in proportion to every task the process ever saw (the node
agent keeps finished tasks until their job is deleted: 1 ms per submission at 10,000 tasks).
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V")
TaskKey = tuple[str, str, str]


class ByJob(dict[TaskKey, V]):
    """A dict whose `of_job` and `forget_job` cost what the job holds, not what all jobs do.
    Only `[k] = v`, `del`, `pop` and `clear` change it (`update`/`setdefault` are not used)."""

    def __init__(self) -> None:
        super().__init__()
        self._jobs: dict[tuple[str, str], set[TaskKey]] = {}

    def __setitem__(self, key: TaskKey, value: V) -> None:
        super().__setitem__(key, value)
        self._jobs.setdefault(key[:2], set()).add(key)  # type: ignore[arg-type]

    def __delitem__(self, key: TaskKey) -> None:
        super().__delitem__(key)
        self._unindex(key)

    def pop(self, key: TaskKey, *default: V) -> V:  # type: ignore[override]
        if key in self:
            self._unindex(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        super().clear()
        self._jobs.clear()

    def of_job(self, namespace: str, job: str) -> list[TaskKey]:
        return sorted(self._jobs.get((namespace, job), ()))

    def forget_job(self, namespace: str, job: str) -> list[TaskKey]:
        """Drop the job's keys; returns them (sorted)."""
        keys = self.of_job(namespace, job)
        for key in keys:
            super().pop(key, None)
        self._jobs.pop((namespace, job), None)
        return keys

    def _unindex(self, key: TaskKey) -> None:
        keys = self._jobs.get(key[:2])  # type: ignore[call-overload]
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._jobs[key[:2]]  # type: ignore[arg-type]
