"""A waiting job's words as a session would say them now, for `tessera explain`.

The scheduler appends a waiting job's `JobUnschedulable` again only when its rule changes, not
its amounts (`decisions.unschedulable_key`: an event per pending job at every placement
elsewhere would flood the log). So the log's last verdict keeps the numbers of the session
that first said it — "5 of the cluster's 8 are free, free 1 card" read an hour later, when 2
were free and 4 had to go. Here the scheduler's own view is folded from the log as it stands,
the session re-run (its configuration from the log, as `replay --verify` does) and the job's
verdict taken when it names the same rule: the same words with the numbers of now. Pure: the
log's messages in, the verdict out.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.events import SchedulerConfigured
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from services.core.scheduling import record
from services.core.scheduling.config import default_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Unschedulable, unschedulable_key
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog.model import StoredMessage


def words_now(messages: Iterable[StoredMessage], namespace: str, job: str, logged_reason: str,
              logged_why: str) -> Unschedulable | None:  # fmt: skip
    """The job's verdict from a session over the log as it stands, if it names the same rule
    as the logged one (`logged_reason`, `logged_why`); None otherwise (placed now, another
    rule, a configuration that does not parse)."""
    registry = default_registry()
    config: SchedulerConfigured | None = None
    events = []
    for m in messages:
        kind = m.headers.get("Tessera-Type", "")
        if kind not in registry:
            continue
        try:
            ev = registry.decode(kind, m.data)
        except (UndecodableEvent, UnknownEventType):
            continue
        if isinstance(ev, SchedulerConfigured):
            config = ev
        events.append((m.seq, ev))
    view = SchedulerView(assume=config is None or config.mode == "service")
    for seq, ev in events:
        view.apply(seq, ev)
    try:
        conf = record.conf_of(config) if config is not None else default_conf()
    except ValueError:
        return None
    decisions = decide(view.snapshot(), conf)
    got = next((u for u in decisions.unschedulable if u.namespace == namespace and u.name == job), None)
    if got is None or got.key != unschedulable_key(logged_reason, logged_why):
        return None
    return got


__all__ = ["words_now"]
