"""Re-run every recorded scheduling session from the log and compare its decisions (DESIGN §6:
decisions are deterministic given snapshot and configuration).

A session's decisions carry its `record.SessionRef`: the sequence its snapshot was based on, its
clock, the `SchedulerConfigured` it ran with, and digests of each input. `verify` folds the log
in order through the same `SchedulerView` the scheduler folds it through; when the view holds
exactly the log up to a session's `based_on`, it decides again with the recorded configuration
and compares the events it would append with the recorded ones, whole (so decisions that gain
fields stay compared). The first difference is reported with the job, both events, the fields
that differ, and the inputs whose digest differs from the one the scheduler recorded.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import zip_longest

import msgspec

from contracts.base import Event
from contracts.envelope import TYPE
from contracts.events import (
    EvictionRequested,
    PlacementProposed,
    SchedulerConfigured,
    TaskPlacement,
)
from contracts.registry import UndecodableEvent, UnknownEventType, default_registry
from services.core.scheduling import record
from services.core.scheduling.config import PIPELINES_END, SchedulerConf
from services.core.scheduling.decide import decide
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog.model import StoredMessage

#: (seq, headers, event) of one stored, decoded message
Stored = tuple[int, Mapping[str, str], Event]


@dataclass(frozen=True)
class Divergence:
    session: int
    based_on: int
    job: str
    recorded: Event | None  # None: the re-run decides something the log does not hold
    rederived: Event | None  # None: the log holds a decision the re-run does not make
    fields: tuple[str, ...] = ()  # `path: recorded → re-derived` for every differing field
    inputs: tuple[str, ...] = ()  # inputs whose digest differs from the recorded one
    seq: int = 0  # the recorded event's sequence (0 when it is missing)

    def lines(self) -> list[str]:
        head = f"session {self.session} (based on #{self.based_on}), job {self.job}"
        if self.seq:
            head += f", decision #{self.seq}"
        out = [head]
        out.append(f"  recorded:    {_show(self.recorded)}")
        out.append(f"  re-derived:  {_show(self.rederived)}")
        out += [f"  differs:     {f}" for f in self.fields]
        if self.inputs:
            out.append("  inputs that differ from what the scheduler saw: " + ", ".join(self.inputs))
        elif self.recorded is None:
            out.append("  the log holds no such decision: this session's was removed, or an earlier "
                       "session's whose decisions are all gone (such a session leaves no record, and "
                       "the re-run makes its decision here)")  # fmt: skip
        else:
            out.append("  every input digest matches what the scheduler recorded: the recorded "
                       "decision itself differs")  # fmt: skip
        return out


@dataclass
class Verdict:
    sessions: int = 0  # re-run, every decision reproduced
    decisions: int = 0  # compared
    unrecorded: int = 0  # decisions without a session record (an older scheduler wrote them)
    events: int = 0  # folded
    divergence: Divergence | None = None
    #: sessions whose decisions matched although an input digest differed (name: count)
    input_notes: dict[str, int] = field(default_factory=dict)
    #: the first such session: (session, based on, the inputs that differ)
    first_input_note: tuple[int, int, tuple[str, ...]] | None = None
    #: the last session, when the log ends inside it (a file cut by `head`, `--until` a sequence
    #: within its decisions): (session, based on, re-derived decisions the log does not reach)
    incomplete: tuple[int, int, int] | None = None
    #: sessions not re-run because the log lacks sequences their state held (compacted)
    unverifiable: int = 0

    @property
    def ok(self) -> bool:
        return self.divergence is None


@dataclass
class _Session:
    ref: record.SessionRef
    decisions: list[tuple[int, Event]] = field(default_factory=list)


def _by_scheduler(headers: Mapping[str, str]) -> bool:
    """Whether a decision type was written by a scheduler: its message id names the producer
    (`sched:<based_on>#i`); another service's (`queue:…`) never came from a session."""
    producer, sep, _ = headers.get("Nats-Msg-Id", "").partition(":")
    return not sep or producer == "sched"


def decoded(messages: Iterable[StoredMessage]) -> tuple[list[Stored], int]:
    """What a service folds: unknown types skipped, undecodable bodies counted and skipped
    (the scheduler parks those and goes on, so its sessions never saw them either)."""
    registry = default_registry()
    out: list[Stored] = []
    poisoned = 0
    for m in messages:
        kind = m.headers.get(TYPE, "")
        if kind not in registry:
            continue
        try:
            out.append((m.seq, m.headers, registry.decode(kind, m.data)))
        except (UndecodableEvent, UnknownEventType):
            poisoned += 1
    return out, poisoned


def verify(messages: Iterable[Stored], complete_below: int | None = None) -> Verdict:
    """Every recorded session re-run; stops at the first divergence.

    `complete_below`: the first sequence the log lacks (`tessera compact` purged finished jobs
    and card history). A session based on a state that held it cannot be rebuilt from what is
    left — re-run, it "diverged" on a log nothing but compaction changed (the newcomer's
    review) — so only the sessions whose state and decisions all precede it are re-run, the
    rest counted `unverifiable`."""
    stored = list(messages)
    configs: dict[int, SchedulerConfigured] = {}
    sessions: dict[tuple[int, int], _Session] = {}
    verdict = Verdict()
    for seq, headers, event in stored:
        if isinstance(event, SchedulerConfigured):
            configs[seq] = event
        elif event.type_name() in record.DECISION_TYPES:
            ref = record.ref_of(headers)
            if ref is None:
                if _by_scheduler(headers):  # the queue service's restarts and Running phases
                    verdict.unrecorded += _decision(event)  # are no sessions' to replay
                continue
            s = sessions.setdefault((ref.conf_seq, ref.based_on), _Session(ref))
            s.decisions.append((seq, event))
    views = {mode: SchedulerView(assume=mode == "service")
             for mode in {c.mode for c in configs.values()} or {"service"}}  # fmt: skip
    proposed: dict[str, dict[str, tuple[TaskPlacement, ...]]] = {m: {} for m in views}
    confs: dict[int, SchedulerConf | str] = {}
    due = sorted(sessions.values(), key=lambda s: (s.ref.based_on, s.ref.conf_seq))
    if complete_below is not None:  # (a session with a decision past the gap may have lost one to it)
        whole = [s for s in due if max((seq for seq, _ in s.decisions), default=s.ref.based_on) < complete_below]
        verdict.unverifiable = len(due) - len(whole)
        due = whole
        stored = [m for m in stored if m[0] < complete_below]
    last = stored[-1][0] if stored else 0
    i = 0
    for seq, _, event in stored:
        while i < len(due) and due[i].ref.based_on < seq:
            verdict.divergence = _rerun(due[i], configs, confs, views, proposed, verdict, last)
            i += 1
            if verdict.divergence is not None:
                return verdict
        for view in views.values():
            view.apply(seq, event)
        verdict.events += 1
    for s in due[i:]:
        verdict.divergence = _rerun(s, configs, confs, views, proposed, verdict, last)
        if verdict.divergence is not None:
            break
    return verdict


def _decision(event: Event) -> bool:
    """A phase change is a session's decision only when it admits (Inqueue); the queue
    service writes the others."""
    return getattr(event, "phase", "Inqueue") == "Inqueue"


def _rerun(
    s: _Session,
    configs: Mapping[int, SchedulerConfigured],
    confs: dict[int, SchedulerConf | str],
    views: Mapping[str, SchedulerView],
    proposed: Mapping[str, dict[str, tuple[TaskPlacement, ...]]],
    verdict: Verdict,
    last: int,
) -> Divergence | None:
    """`last`: the log's last sequence. A session whose recorded decisions reach it and whose
    re-run decides more after them all is cut by the log's end, not divergent: what the log
    holds of it is compared, the rest is counted as not verified."""
    ref = s.ref
    first_seq, first = s.decisions[0]
    config = configs.get(ref.conf_seq)
    if config is None:
        return Divergence(ref.session, ref.based_on, _job(first), first, None,
                          (f"configuration #{ref.conf_seq} is not in the log",), ("conf",), first_seq)  # fmt: skip
    if ref.conf_seq not in confs:
        try:
            confs[ref.conf_seq] = record.conf_of(config)
        except ValueError as exc:  # ConfigError, CatalogueError: not a configuration at all
            confs[ref.conf_seq] = f"configuration #{ref.conf_seq} does not parse: {exc}"
    conf = confs[ref.conf_seq]
    if isinstance(conf, str):
        return Divergence(ref.session, ref.based_on, _job(first), first, None, (conf,), ("conf",),
                          first_seq)  # fmt: skip
    view = views[config.mode]
    snap = view.snapshot()
    if snap.now != ref.now:  # the session's clock is in its record: the simulation's virtual
        snap = replace(snap, now=ref.now)  # one, the service's wall clock when ahead of the log
    digests = record.input_digests(snap, config)
    differ = tuple(n for n in record.INPUT_NAMES
                   if n in ref.inputs and ref.inputs[n] != digests.get(n))  # fmt: skip
    decisions = decide(snap, conf)
    again = record.decision_events(
        decisions, session=ref.session, mode=config.mode, outstanding=view.outstanding,
        last_reasons=view.unschedulable, proposed=proposed[config.mode],
        admits_in_proposal=config.admits_in_proposal, verdicts_by_words=config.verdicts_by_words,
        pipelines_end=conf.rules >= PIPELINES_END,
    )  # fmt: skip
    for n, (got, want) in enumerate(zip_longest(s.decisions, again)):
        if got is None and s.decisions[-1][0] == last:
            verdict.incomplete = (ref.session, ref.based_on, len(again) - n)
            return None
        seq, recorded = got if got is not None else (0, None)
        if isinstance(recorded, PlacementProposed) and isinstance(want, PlacementProposed):
            # the session number is a counter of the process (a retry after a failed append
            # carries another): not a decision
            want = msgspec.structs.replace(want, session=recorded.session)
        if isinstance(recorded, EvictionRequested) and isinstance(want, EvictionRequested) and not recorded.for_job:
            want = msgspec.structs.replace(want, for_job="")  # recorded before evictions named it
        if recorded != want:
            job = _job(recorded if recorded is not None else want)
            return Divergence(ref.session, ref.based_on, job, recorded, want,
                              _differences(recorded, want), differ, seq)  # fmt: skip
        verdict.decisions += 1
    verdict.sessions += 1
    for name in differ:
        verdict.input_notes[name] = verdict.input_notes.get(name, 0) + 1
    if differ and verdict.first_input_note is None:
        verdict.first_input_note = (ref.session, ref.based_on, differ)
    return None


def _job(event: Event | None) -> str:
    if event is None:
        return "?"
    return f"{getattr(event, 'namespace', '')}/{getattr(event, 'name', '')}"


def _show(event: Event | None) -> str:
    if event is None:
        return "(none)"
    return msgspec.json.encode(event).decode()


def _differences(recorded: Event | None, rederived: Event | None) -> tuple[str, ...]:
    if recorded is None or rederived is None:
        return ()
    out: list[str] = []
    _diff(msgspec.to_builtins(recorded), msgspec.to_builtins(rederived), "", out)
    return tuple(out)


def _diff(a: object, b: object, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            _diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k), out)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{n}]", out)
    elif a != b:
        out.append(f"{path}: {_brief(a)} → {_brief(b)}")


def _brief(value: object) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 120 else text[:117] + "..."
