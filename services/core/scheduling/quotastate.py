"""The namespaces' ResourceQuotas as the log says them: each its last `QuotaChanged` (gone after
`QuotaDeleted`), folded in the projection and frozen per namespace for sessions (quota.py and
plugins/resourcequota.py decide with them). A cluster without quotas costs nothing: the frozen
view is rebuilt only after a quota event, never per session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from contracts.base import Event
from contracts.events import QuotaChanged, QuotaDeleted


@dataclass(frozen=True, slots=True)
class Quotas:
    """The frozen view a session reads: namespace → its ResourceQuotas (scoped ones included,
    the plugin skips them)."""

    by_namespace: MappingProxyType[str, tuple[QuotaChanged, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def __bool__(self) -> bool:
        return bool(self.by_namespace)


NO_QUOTAS = Quotas()


class QuotaState:
    """The mutable fold (a part of `ClusterProjection`); `frozen()` is cached until it changes,
    so sessions of a cluster without quotas pay nothing."""

    __slots__ = ("_frozen", "quotas")

    def __init__(self, quotas: dict[str, QuotaChanged] | None = None) -> None:
        self.quotas = quotas if quotas is not None else {}  # "ns/name" → its last QuotaChanged
        self._frozen: Quotas | None = None

    def apply(self, event: Event) -> bool:
        """Fold one event; False when it is no quota event (the caller tries other folds)."""
        match event:
            case QuotaChanged():
                self.quotas[f"{event.namespace}/{event.name}"] = event
            case QuotaDeleted():
                self.quotas.pop(f"{event.namespace}/{event.name}", None)
            case _:
                return False
        self._frozen = None
        return True

    def frozen(self) -> Quotas:
        if self._frozen is None:
            if not self.quotas:
                self._frozen = NO_QUOTAS
            else:
                by_ns: dict[str, list[QuotaChanged]] = {}
                for key in sorted(self.quotas):
                    q = self.quotas[key]
                    by_ns.setdefault(q.namespace, []).append(q)
                self._frozen = Quotas(MappingProxyType({ns: tuple(qs) for ns, qs in by_ns.items()}))
        return self._frozen
