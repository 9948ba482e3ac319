"""One trace per job through the scheduler: the span of a job's decision continues the trace
its `JobSubmitted` carried (from `tessera apply` or the Kubernetes pod watch), so the allocator's
commit and the node agent's start, which continue the decision's, land in that trace too.

The session is one span of its own (a session decides many jobs, so it belongs to no job's
trace), linked to the decision span of every job it decided. Names are subject templates
(`decide tessera.ev.job.{ns}.{job}`), ids go into attributes (DESIGN §10).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanKind, Tracer

from contracts.base import Event
from contracts.envelope import TRACEPARENT, TRACESTATE
from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    JobUnschedulable,
    PlacementProposed,
)
from contracts.subjects import Subjects, subject_of
from services.core.scheduling.decisions import GANG_LINE
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog.model import StoredMessage
from services.runtime.service import recording
from services.runtime.telemetry import context_trace_id, extract, subject_template

log = logging.getLogger(__name__)


class JobTraces:
    """The trace context each job's decisions continue (headers as stored): its
    `JobSubmitted`'s as the live log delivers it, or, after a restart, its last message's; and
    the words of the reason each waiting job was last said to wait for (`say`)."""

    def __init__(self) -> None:
        self._headers: dict[str, dict[str, str]] = {}
        #: job → the reasons (`reason_words`) its INFO lines said it waits for, since it was
        #: last placed: the last `SAID`
        self.said: dict[str, tuple[int, ...]] = {}

    def observe(self, msg: StoredMessage, event: Event) -> None:
        match event:
            case JobSubmitted():
                self.resume(f"{event.spec.namespace}/{event.spec.name}", msg)
            case JobDeleted():
                key = f"{event.namespace}/{event.name}"
                self._headers.pop(key, None)
                self.said.pop(key, None)
            case _:
                pass

    def resume(self, key: str, msg: StoredMessage) -> bool:
        """Continue `key`'s trace from a message of its subject, if that carries one. A
        recovery folds the log (or a snapshot and its tail) without delivering it, so the
        `JobSubmitted` of a job that was waiting is never observed: its next decision began
        a trace of its own under the session, and its commit and start followed it there.
        Any message of a job continues the job's trace, so its last one is as good."""
        kept = {h: msg.headers[h] for h in (TRACEPARENT, TRACESTATE) if h in msg.headers}
        if TRACEPARENT in kept:
            self._headers[key] = kept
        return TRACEPARENT in kept

    def context(self, key: str) -> context.Context | None:
        headers = self._headers.get(key)
        return extract(headers) if headers else None


def rejecting_plugin(reason: str) -> str:
    """Which plugin the session's pending reason comes from (the gang plugin words its message;
    enqueue refuses a Pending PodGroup)."""
    if "in gang unschedulable" in reason:
        return "gang"
    if reason.startswith("PodGroup is Pending"):
        return "enqueue"
    return ""


def attributes(events: Sequence[Event], view: SchedulerView, key: str) -> dict[str, object]:
    """The facts of one job's decisions in a session: queue, node(s), cards, score, evictions,
    or why it waits."""
    job = view.projection.jobs.get(key)
    out: dict[str, object] = {"tessera.job": key, "tessera.queue": job.spec.queue if job else ""}
    outcome = []
    for e in events:
        match e:
            case PlacementProposed():
                outcome += ["inqueue", "placed"] if e.admits else ["placed"]
                nodes = list(dict.fromkeys(p.node for p in e.placements))
                out["tessera.node"] = ",".join(nodes)
                out["tessera.nodes"] = [p.node for p in e.placements]
                out["tessera.tasks"] = [p.task for p in e.placements]
                out["tessera.cards"] = [s.card for p in e.placements for s in p.slices]
                out["tessera.scores"] = [float(p.score) for p in e.placements]
                out["tessera.score"] = float(e.placements[0].score) if e.placements else 0.0
            case JobUnschedulable():
                outcome.append("unschedulable")
                out["tessera.reason"] = e.reason
                if plugin := getattr(e, "plugin", "") or rejecting_plugin(e.reason):
                    out["tessera.rejecting_plugin"] = plugin
                out["tessera.nodes_rejecting"] = sum(e.reason_counts.values()) or len(e.node_reasons)
            case EvictionRequested():
                outcome.append("evict")
                out.setdefault("tessera.evicted", [])
                out["tessera.evicted"].append(e.task)  # type: ignore[union-attr]
                out["tessera.eviction_reason"] = e.reason
            case JobPhaseChanged():
                outcome.append(e.phase.lower())
            case _:
                pass
    out["tessera.decision"] = ",".join(outcome)
    return out


def summary(key: str, facts: Mapping[str, object]) -> str:
    """One log line per job decided: what Volcano's scheduler logs, with the facts' names. A
    job of several pods says how many and where; each pod's cards and score are `task_lines`
    (DEBUG): a gang of 64 said every card of every pod in one line."""
    parts = [f"{key}: {facts.get('tessera.decision', '')}"]
    tasks = facts.get("tessera.tasks", ())
    if "tessera.node" in facts and len(tasks) > 1:  # type: ignore[arg-type]
        parts.append(f"{len(tasks)} pods on {facts['tessera.node']} "  # type: ignore[arg-type]
                     f"({len(facts.get('tessera.cards', ()))} card slices)")  # type: ignore[arg-type]
    elif "tessera.node" in facts:
        parts.append(f"on {facts['tessera.node']} cards {','.join(facts.get('tessera.cards', ())) or '-'} "  # type: ignore[arg-type]
                     f"score {facts.get('tessera.score', 0.0)}")
    if "tessera.reason" in facts:
        parts.append(str(facts["tessera.reason"]))
    return " ".join(parts)


def task_lines(key: str, events: Sequence[Event]) -> list[str]:
    """Each placed pod of a job of several: its node, cards and score (DEBUG)."""
    return [f"{key}: pod {p.task} on {p.node} cards {','.join(a.card for a in p.slices) or '-'} score {p.score}"
            for e in events if isinstance(e, PlacementProposed) and len(e.placements) > 1
            for p in e.placements]  # fmt: skip


#: the numbers of a reason (counts of nodes, pods, MB, cards' indexes): not what makes it news
_NUMBER = re.compile(r"\d+")
#: a group of nodes' reason code in a gang line, its counts already "#": "# #/# CardInsufficientMemory"
_CODE = re.compile(r"#/# ([A-Z][A-Za-z]+)")
#: the reasons remembered per waiting job (a reason said before is not news when it comes back)
SAID = 8


def reason_words(reason: str) -> int:
    """What makes a waiting job's reason news, hashed: an enqueue refusal's own words (the
    trial's line after it says how the nodes would take the gang now, which moves with every
    other job, and comes and goes), else the gang line's head and its nodes' reason codes — not
    the counts, the example nodes and cards, or the amounts free, which move with every
    placement elsewhere."""
    text = _NUMBER.sub("#", reason)
    head, sep, _ = text.partition("; ")
    if sep and GANG_LINE not in head:
        return hash(head)
    codes = tuple(sorted(set(_CODE.findall(text))))
    return hash((text.partition(": ")[0], codes)) if codes else hash(text)


def say(traces: JobTraces, key: str, facts: Mapping[str, object], events: Sequence[Event],
        trace_id: str) -> None:  # fmt: skip
    """Log one job's decision: INFO when it is news to an operator — placed, admitted, evicted,
    a phase, or a reason to wait that its INFO lines have not said since it was last placed
    (`reason_words`) — else DEBUG. A waiting job's `JobUnschedulable` is appended again when its rule's amounts move
    (`3/8 CardInsufficientMemory` → `4/8`), which on a backlog is every waiting job at every
    placement: INFO repeated ~600 bytes per pod per session (issue 29's 500 pods: 1.9 MB)."""
    outcome = str(facts.get("tessera.decision", "")).split(",")
    again = False
    if "unschedulable" in outcome:
        words = reason_words(str(facts.get("tessera.reason", "")))
        said = traces.said.get(key, ())
        again = words in said
        if not again:
            traces.said[key] = (*said[1 - SAID:], words)
    if "placed" in outcome:
        traces.said.pop(key, None)  # waiting again later is news again
    news = not again or any(o != "unschedulable" for o in outcome)
    extra = {"trace_id": trace_id}
    log.log(logging.INFO if news else logging.DEBUG, "%s", summary(key, facts), extra=extra)
    if log.isEnabledFor(logging.DEBUG):
        for line in task_lines(key, events):
            log.debug("%s", line, extra=extra)


def decision_spans(tracer: Tracer, session: Span, started: int, events: Sequence[Event],
                   view: SchedulerView, traces: JobTraces, subjects: Subjects) -> dict[str, context.Context]:  # fmt: skip
    """One span per job decided (from the session's start to now), in the job's trace; the
    session links to each. Returns the context each job's events are appended in."""
    by_job: dict[str, list[Event]] = {}
    for e in events:
        by_job.setdefault(f"{e.namespace}/{e.name}", []).append(e)  # type: ignore[attr-defined]
    contexts = {}
    spans = recording(tracer)
    for key, evs in by_job.items():
        parent = traces.context(key) or trace.set_span_in_context(session)
        facts = attributes(evs, view, key)
        if not spans:  # exported nowhere: the log line, and the job's own trace goes on
            # (a span, its attributes and a context manager per job were a twentieth of
            # the scheduler's CPU, issue 29); the line carries the job's trace id all the same
            say(traces, key, facts, evs, context_trace_id(parent))
            contexts[key] = parent
            continue
        subject = subject_template(subject_of(subjects, evs[0]))
        span = tracer.start_span(
            f"decide {subject}", context=parent, kind=SpanKind.PRODUCER, start_time=started,
            attributes={"messaging.system": "nats", "messaging.operation.type": "send",
                        "messaging.operation.name": "decide", "messaging.destination.template": subject,
                        **facts},  # type: ignore[dict-item]
        )  # fmt: skip
        session.add_link(span.get_span_context(), {"tessera.job": key})
        with trace.use_span(span, end_on_exit=True):  # the log line carries the job's trace id
            say(traces, key, facts, evs, context_trace_id(trace.set_span_in_context(span)))
        contexts[key] = trace.set_span_in_context(span)
    return contexts
