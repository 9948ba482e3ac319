"""A waiting job's words as a session would say them now, for `tessera explain`.

The scheduler appends a waiting job's `JobUnschedulable` again only when its rule changes, not
its amounts (`decisions.unschedulable_key`, or `by_words` where the record says so: an event
per pending job at every placement elsewhere would flood the log). So the log's last verdict
keeps the numbers of the session that first said it — "5 of the cluster's 8 are free, free 1
card" read an hour later, when 2 were free and 4 had to go. Here the scheduler's own view is
folded from the log as it stands, a session re-run as the scheduler would run it (the
configuration its last decision names, its clock) and the job's verdict taken when the
scheduler would not have logged it again: the same rule with the numbers of now. Pure: the
log's messages (and the clock) in, the outcome out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from contracts.events import SchedulerConfigured
from services.core.scheduling import record
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Unschedulable, by_words, unschedulable_key
from services.core.scheduling.verify import decoded
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog.model import StoredMessage


@dataclass(frozen=True)
class Now:
    """`verdict`: the job's words now (same rule); `placed`: a session now would place it (the
    scheduler has not run one over the log as it stands); neither: another rule, or no re-run."""

    verdict: Unschedulable | None = None
    placed: bool = False


def words_now(messages: Iterable[StoredMessage], namespace: str, job: str, logged_reason: str,
              logged_why: str, clock: float | None = None) -> Now:  # fmt: skip
    """The job's verdict from a session over the log as it stands. `clock`: the session's
    time (a live cluster's wall clock); else the newest session's recorded clock."""
    configs: dict[int, SchedulerConfigured] = {}
    conf_seq = 0
    newest = 0.0
    events, _ = decoded(messages)
    for seq, headers, ev in events:
        if (ref := record.ref_of(headers)) is not None:  # the configuration decisions use
            conf_seq, newest = ref.conf_seq, max(newest, ref.now)
        if isinstance(ev, SchedulerConfigured):
            configs[seq] = ev
    config = configs.get(conf_seq) or (configs[max(configs)] if configs else None)
    if config is None:
        return Now()  # which configuration ran is not in the log
    view = SchedulerView(assume=config.mode == "service")
    for seq, _, ev in events:
        view.apply(seq, ev)
    try:
        conf = record.conf_of(config)
    except ValueError:
        return Now()
    snap = view.snapshot()
    when = clock if clock is not None else newest
    if when > snap.now:  # (the session's clock, not only the log's events': holds, cooldowns)
        snap = dataclasses.replace(snap, now=when)
    decisions = decide(snap, conf)
    key = f"{namespace}/{job}"
    if any(f"{p.namespace}/{p.name}" == key for p in decisions.placements):
        return Now(placed=True)
    got = next((u for u in decisions.unschedulable if u.namespace == namespace and u.name == job), None)
    if got is None:
        return Now()
    logged = unschedulable_key(logged_reason, logged_why)
    same = by_words(got.key) == by_words(logged) if config.verdicts_by_words else got.key == logged
    return Now(verdict=got) if same else Now()


__all__ = ["Now", "words_now"]
