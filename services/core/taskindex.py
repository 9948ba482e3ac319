"""A mapping keyed by tuples that also knows the keys under each leading part (a job).

A job's submission, deletion or forgetting drops what was known of its pods. Walking every key
for that made each such event cost time in proportion to every task the process held: the node
agent keeps finished tasks until their job is deleted, the queue service those of its last 100
ended jobs and every live one — about 1 ms per event at 10,000 tasks, growing with the cluster.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=tuple[Hashable, ...])
V = TypeVar("V")


class ByJob(dict[K, V], Generic[K, V]):
    """A dict whose `of_job` and `forget_job` cost what the job holds, not what all jobs do.
    The job is the key's first `width` parts. Only `[k] = v`, `del`, `pop` and `clear` change
    it (`update` and `setdefault` are not used on it, and would bypass the index)."""

    def __init__(self, width: int = 2, items: Mapping[K, V] | None = None) -> None:
        super().__init__()
        self.width = width
        self._jobs: dict[tuple[Hashable, ...], set[K]] = {}
        for key, value in (items or {}).items():
            self[key] = value

    def __reduce__(self) -> tuple[type[ByJob[K, V]], tuple[int, dict[K, V]]]:
        """Copies and pickles rebuild the index (the default would set items before it exists)."""
        return type(self), (self.width, dict(self))

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self._jobs.setdefault(key[: self.width], set()).add(key)

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self._unindex(key)

    def pop(self, key: K, *default: V) -> V:  # type: ignore[override]
        if key in self:
            self._unindex(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        super().clear()
        self._jobs.clear()

    def of_job(self, *job: Hashable) -> list[K]:
        return sorted(self._jobs.get(job, ()))  # type: ignore[type-var]

    def forget_job(self, *job: Hashable) -> list[K]:
        """Drop the job's keys; returns them (sorted)."""
        keys = self.of_job(*job)
        for key in keys:
            super().pop(key, None)
        self._jobs.pop(job, None)
        return keys

    def _unindex(self, key: K) -> None:
        job = key[: self.width]
        keys = self._jobs.get(job)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._jobs[job]
