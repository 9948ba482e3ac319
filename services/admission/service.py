"""The admission service's shell: a request/reply `apply` in front of the log.

It keeps `Known` (queues and which jobs are live) from the queue and job subjects, judges each
request with the pure `plan_apply`, appends the accepted objects' events with an expected last
subject sequence (so two racing applies of one name cannot both land) and a message id derived
from that sequence (so a retried request is not written twice), and replies per object.
A request that cannot be read is answered with an error; nothing about it reaches the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace

import msgspec
from opentelemetry import context, trace
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from contracts.api import (
    ACCEPTED,
    CONFIGURED,
    REJECTED,
    UNCHANGED,
    ApplyReply,
    ApplyRequest,
    ObjectResult,
    decode,
    encode,
)
from contracts.base import Event
from contracts.envelope import TYPE, content_id
from contracts.events import (
    BindingFailed,
    HyperNodeChanged,
    HyperNodeDeleted,
    JobDeleted,
    JobPhaseChanged,
    JobRejected,
    JobSubmitted,
    JobUpdated,
    NamespaceChanged,
    NamespaceDeleted,
    NodeRegistered,
    PriorityClassCreated,
    QueueCreated,
    QueueDeleted,
    QueueStateChanged,
    QueueUpdated,
    QuotaChanged,
    QuotaDeleted,
)
from contracts.subjects import subject_of
from contracts.workloads import JobSpec
from services.admission.guard import DEFAULT_LIMITS, Limits
from services.admission.plan import (
    Known,
    PlacedPod,
    Plan,
    Write,
    already_exists,
    created_only,
    fold_known,
    plan_apply,
    plan_documents,
)
from services.admission.recovery import KnownFold
from services.core.devices import VendorRegistry, build_vendors
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.core.workload.devicerequests import hami_parser
from services.core.workload.limits import NATS_DEFAULT_MAX_PAYLOAD, WorkloadLimits
from services.core.workload.schedulernames import DEFAULT_SCHEDULER_NAMES
from services.runtime.eventlog import Conflict, EventLog
from services.runtime.service import (
    EventService,
    Handler,
    Outgoing,
    Received,
    TransientError,
    recording,
)
from services.runtime.snapshot import Retention, Snapshots
from services.runtime.telemetry import subject_template

log = logging.getLogger(__name__)
tracer = trace.get_tracer("tessera.admission")
_IDS = RandomIdGenerator()  # a job's own trace id where no span is made (`admit_span`)

FOLDED: tuple[type[Event], ...] = (
    HyperNodeChanged,
    HyperNodeDeleted,
    NamespaceChanged,
    NamespaceDeleted,
    PriorityClassCreated,
    QueueCreated,
    QueueStateChanged,
    QueueUpdated,
    QueueDeleted,
    JobSubmitted,
    JobUpdated,
    JobRejected,
    JobDeleted,
    JobPhaseChanged,
    NodeRegistered,
    QuotaChanged,
    QuotaDeleted,
)


class AdmissionService:
    def __init__(
        self,
        event_log: EventLog,
        vendors: VendorRegistry | None = None,
        limits: Limits = DEFAULT_LIMITS,
        max_payload: int = NATS_DEFAULT_MAX_PAYLOAD,
        plugins_off: frozenset[str] = frozenset(),
        scheduler_names: Collection[str] = DEFAULT_SCHEDULER_NAMES,
    ) -> None:
        """`max_payload` is the NATS connection's (the server's INFO): no appended event and no
        reply may be larger, so objects are judged against it before anything is written.
        `scheduler_names`: the pods' schedulerNames Tessera serves; an applied pod naming another
        is placed with a warning (on a cluster it would not be Tessera's)."""
        self.log = event_log
        self.subjects = event_log.subjects
        self.vendors = vendors or build_vendors()
        self.parser = hami_parser(self.vendors)
        self.device_names = self.vendors.resource_names()
        self.limits = limits
        self.max_payload = max_payload
        self.workload_limits = replace(WorkloadLimits.for_payload(max_payload), plugins_off=plugins_off,
                                       scheduler_names=tuple(scheduler_names))  # fmt: skip
        self.known = Known()
        self.watermark = 0  # events at or below were folded during recovery
        self.keep_finished = DEFAULT_KEEP_FINISHED
        self.folded = 0  # the highest sequence folded into `known`
        self._lock = asyncio.Lock()
        #: told of each binding the API server refused (`BindingFailed`) after the start: the
        #: cluster's pod source reads a pod the binding met no more (None: no cluster)
        self.binding_refused: Callable[[BindingFailed], None] | None = None
        handlers: dict[type[Event], Handler] = dict.fromkeys(FOLDED, self.on_event)  # type: ignore[arg-type]
        handlers[BindingFailed] = self.on_binding_failed  # type: ignore[assignment]
        self.service = EventService(
            name="admission",
            log=event_log,
            filter_subjects=[
                self.subjects.all_priority_classes(),
                self.subjects.all_queues(),
                self.subjects.all_jobs(),
                self.subjects.all_nodes(),
                self.subjects.all_quotas(),
                self.subjects.all_hypernodes(),
                self.subjects.all_namespaces(),
            ],
            handlers=handlers,
        )
        self.snapshots = Snapshots(event_log, self._projection(), on_poison=self.service.park_once)

    def _projection(self) -> KnownFold:
        return KnownFold(self.subjects, frozenset(cls.type_name() for cls in FOLDED), self.keep_finished)

    def retain(self, retention: Retention) -> None:
        """Snapshots and how many finished jobs to remember (before `recover`)."""
        self.keep_finished = retention.keep_finished
        self.snapshots.projection = self._projection()
        self.snapshots.store, self.snapshots.every = retention.store, retention.snapshot_every

    # --- projection ----------------------------------------------------------------------------

    def _fold(self, seq: int, subject: str, event: Event) -> None:
        kind, _ = self.subjects.parse(subject)
        fold_known(self.known, seq, kind, event)
        self.folded = max(self.folded, seq)

    async def recover(self) -> None:
        self.watermark = await self.log.last_sequence()
        self.known = await self.snapshots.recover(self.watermark)
        self.folded = self.watermark
        log.info(
            "admission knows %d queues, %d jobs (up to #%d; finished jobs kept: %d)",
            len(self.known.queues), len(self.known.jobs), self.watermark, self.keep_finished,
        )  # fmt: skip

    async def on_event(self, event: Event, rx: Received) -> None:
        if rx.message.seq > self.watermark:
            self._fold(rx.message.seq, rx.message.subject, event)

    async def on_binding_failed(self, event: BindingFailed, rx: Received) -> None:
        """Not folded (nothing admission judges depends on it): passed on, so a job whose pod
        the API server no longer has is ended by the source that admitted it."""
        if rx.message.seq > self.watermark and self.binding_refused is not None:
            self.binding_refused(event)

    # --- apply ---------------------------------------------------------------------------------

    async def api_apply(self, data: bytes) -> bytes:
        try:
            request = decode(data, ApplyRequest)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return encode(ApplyReply(error=f"request not understood: {exc}"))
        return self._bounded(await self.apply(request.manifest, dry_run=request.dry_run, create=request.create))

    def _bounded(self, reply: ApplyReply) -> bytes:
        """The encoded reply, shortened to fit one NATS message: thousands of rejected objects
        would otherwise make the reply itself fail with "maximum payload exceeded"."""
        data = encode(reply)
        budget = self.max_payload - 1024  # the reply's headers and subject
        if len(data) <= budget:
            return data
        short = tuple(msgspec.structs.replace(r, reasons=_first_reason(r)) for r in reply.results)
        data = encode(msgspec.structs.replace(reply, results=short))
        if len(data) <= budget:
            return data
        rejected = sum(r.outcome == REJECTED for r in reply.results)
        return encode(ApplyReply(error=(
            f"the reply for {len(reply.results)} objects ({rejected} rejected) is larger than "
            f"a NATS message ({self.max_payload} bytes); apply fewer objects at a time")))  # fmt: skip

    async def apply(self, manifest: str, dry_run: bool = False, create: bool = False) -> ApplyReply:
        with tracer.start_as_current_span("apply", attributes={"tessera.bytes": len(manifest)}) as span:
            async with self._lock:
                plan = plan_apply(manifest, self.known, self.parser, self.device_names, self.limits,
                                  self.workload_limits)  # fmt: skip
                if create:
                    plan = created_only(plan)
                results = list(plan.results)
                if not dry_run and plan.writes:
                    await self._write(plan, results)
                if create:  # the same object written by another request between our plan and
                    # our append (`unchanged` after the write): it existed, as the API server says
                    results = [already_exists(r) if r.outcome == UNCHANGED else r for r in results]
            span.set_attribute("tessera.objects", len(results))
            span.set_attribute("tessera.rejected", sum(r.outcome == REJECTED for r in results))
            say_results(results, plan.error, dry_run)
        return ApplyReply(results=tuple(results), error=plan.error)

    async def admit_documents(self, docs: list[dict],
                              placed: Mapping[tuple[str, str], Iterable[PlacedPod]] | None = None,
                              ) -> list[ObjectResult]:  # fmt: skip
        """Objects read from the API server (watched Pods, PriorityClasses): the same rules and
        writes as `apply`, per object. `placed`: Volcano Jobs' pods bound already (by job)."""
        with tracer.start_as_current_span("admit", attributes={"tessera.objects": len(docs)}):
            async with self._lock:
                plan = plan_documents(docs, self.known, self.parser, self.device_names,
                                      self.workload_limits, keep_text=False, placed=placed)  # fmt: skip
                results = list(plan.results)
                if plan.writes:
                    await self._write(plan, results)
            say_results(results)
        return results

    async def delete_job(self, namespace: str, name: str, cause: str,
                         admitted_from: Callable[[JobSpec], bool] | None = None) -> bool:  # fmt: skip
        """The object behind a live job is gone from the API server: `JobDeleted` (once).
        `admitted_from`: whether the live job is the deleted object's — a job is known by its
        name, and another object may carry that name (a pod and a Volcano Job `train`)."""
        async with self._lock:
            job = self.known.jobs.get((namespace, name))
            if job is None or (admitted_from is not None and not admitted_from(job.spec)):
                return False
            subject = self.subjects.job(namespace, name)
            for _attempt in range(10):  # other services append to the job meanwhile: re-read
                last = await self.log.last(subject)  # ended (its pod failed) or deleted?
                if last is None or last.headers.get(TYPE) == JobDeleted.type_name():
                    return False
                event = JobDeleted(namespace=namespace, name=name)
                out = Outgoing(subject, event, last.seq, f"delete:{namespace}/{name}:{cause}:{last.seq}")
                res = await self.service.publish(out)
                if not isinstance(res, Conflict):
                    self._fold(getattr(res, "seq", 0), out.subject, event)
                    return True
            raise TransientError(f"{namespace}/{name}: job kept changing while being deleted")

    async def keep_placed(self, namespace: str, name: str, placed: Collection[str], reason: str,
                          admitted_from: Callable[[JobSpec], bool] | None = None) -> bool:  # fmt: skip
        """A live job whose object is gone but whose placed pods still hold their nodes keeps
        those pods' tasks only (`JobUpdated`, its minAvailable at most their number): nothing
        more of it is placed, bound (the other pods are gone or going) or preempted for, as
        Volcano schedules no job without its PodGroup. `placed`: the pod names that are on a
        node. False when nothing was to drop (or the job is not the object's, `delete_job`)."""
        async with self._lock:
            job = self.known.jobs.get((namespace, name))
            if job is None or not job.live or (admitted_from is not None and not admitted_from(job.spec)):
                return False
            spec = job.spec
            kept = tuple(t for t in spec.tasks if t.pod_names and set(t.pod_names) <= set(placed))
            if not kept or len(kept) == len(spec.tasks):
                return False
            new = msgspec.structs.replace(spec, tasks=kept, min_available=min(spec.min_available, len(kept)))
            subject = self.subjects.job(namespace, name)
            for _attempt in range(10):  # other services append to the job meanwhile: re-read
                last = await self.log.last(subject)
                if last is None or last.headers.get(TYPE) == JobDeleted.type_name():
                    return False
                event = JobUpdated(namespace=namespace, name=name, spec=new, reason=reason)
                mid = f"keep:{namespace}/{name}:{content_id('Job', self.service.registry.encode(event))}:{last.seq}"
                res = await self.service.publish(Outgoing(subject, event, last.seq, mid))
                if not isinstance(res, Conflict):
                    self._fold(getattr(res, "seq", 0), subject, event)
                    return True
            raise TransientError(f"{namespace}/{name}: job kept changing while its tasks were dropped")

    async def delete_cluster_object(self, kind: str, name: str) -> bool:
        """A HyperNode or Namespace gone from the API server: its `…Deleted` (once)."""
        known, subject_of_name, deleted = {
            "HyperNode": (self.known.hypernodes, self.subjects.hypernode, HyperNodeDeleted),
            "Namespace": (self.known.namespaces, self.subjects.namespace, NamespaceDeleted),
        }[kind]  # fmt: skip
        async with self._lock:
            last = known.get(name)
            if last is None or isinstance(last[0], deleted):
                return False
            event = deleted(name=name)
            out = Outgoing(subject_of_name(name), event, last[1], f"delete:{kind.lower()}:{name}:{last[1]}")
            res = await self.service.publish(out)
            if isinstance(res, Conflict):
                raise TransientError(f"{kind} {name} changed while being deleted")
            self._fold(getattr(res, "seq", 0), out.subject, event)
            return True

    async def _written_already(self, out: Outgoing) -> bool:
        """A conflict whose winner wrote exactly what we meant: the queue service's default
        queue `root` and the API server's Queue `root` (which the job controller made from it)
        race to the same QueueCreated. Read from the log, so it holds at any later time, and
        folded like any write of ours; anything else on the subject stays a conflict."""
        last = await self.log.last(out.subject)
        if last is None or last.headers.get(TYPE) != out.event.type_name():
            return False
        try:
            found = self.service.registry.decode(last.headers[TYPE], last.data)
        except Exception:
            return False
        if found != out.event:
            return False
        self._fold(last.seq, out.subject, found)
        return True

    async def _write(self, plan: Plan, results: list[ObjectResult]) -> None:
        # re-submission of a name we know (its old job ended): its subject's last sequence, read
        # for all such writes at once. A name we never folded is written expecting an empty
        # subject — a read per submitted pod cost a round trip each (issue 29) — and only if
        # the log says otherwise (a name retention forgot) is it read and written again.
        reread = [subject_of(self.subjects, w.event) for w in plan.writes if w.kind == "Job"
                  and w.expected_seq is not None and w.key in self.known.jobs]  # fmt: skip
        lasts = dict(zip(reread, await asyncio.gather(*(self.log.last(s) for s in reread)), strict=True))
        todo: list[tuple[Write, int | None]] = []
        for w in plan.writes:
            subject = subject_of(self.subjects, w.event)
            expected = w.expected_seq
            if subject in lasts and (last := lasts[subject]) is not None:
                # a name we know (its old job ended): a message we have not folded yet is a
                # concurrent writer's: expect our view, and conflict
                expected = last.seq
            todo.append((w, expected))
        for round_ in range(2):
            again = await self._append_round(todo, results, forgotten_ok=round_ == 0)
            if not again:
                return
            todo = again

    async def _append_round(
        self, todo: list[tuple[Write, int | None]], results: list[ObjectResult], forgotten_ok: bool
    ) -> list[tuple[Write, int | None]]:
        """Append the writes; those that met a name retention forgot (a conflict with what we
        folded already) come back with the sequence to expect, for one more round."""
        outs: list[tuple[Write, Outgoing]] = []
        roots: list[trace.Span | None] = []  # each submitted job's root span, ended by what became of it
        again: list[tuple[Write, int | None]] = []
        try:
            for w, expected in todo:
                subject = subject_of(self.subjects, w.event)
                # same object, same version → same id (a retried request is written once); a
                # different object under the same name has another id and meets the sequence check
                body = self.service.registry.encode(w.event)
                mid = f"admit:{subject}:{expected}:{content_id(w.kind, body)}"
                ctx, root = admit_span(subject, w.event)
                roots.append(root)
                outs.append((w, Outgoing(subject, w.event, expected, mid, context=ctx)))
            appended = await self.log.append_pipelined([self.service.entry(o) for _, o in outs])
            for (w, out), res in zip(outs, appended, strict=True):
                if forgotten_ok and w.kind == "Job" and w.expected_seq == 0 and w.key not in self.known.jobs \
                        and out.expected_last_subject_seq == 0:  # fmt: skip
                    # a name we folded and forgot: written again over its old job. Its old first
                    # submission may be this very write (same object, same id): then the log
                    # answers "duplicate" with a sequence we folded long ago
                    if isinstance(res, Conflict) and 0 < res.actual <= self.folded:
                        again.append((w, res.actual))
                        continue
                    if getattr(res, "duplicate", False) and getattr(res, "seq", 0) <= self.folded:
                        last = await self.log.last(out.subject)
                        if last is not None and last.seq > res.seq:
                            again.append((w, last.seq))
                            continue
                if isinstance(w.event, JobRejected):  # a record of a refusal: the result stands
                    if not isinstance(res, Conflict):
                        self._fold(getattr(res, "seq", 0), out.subject, out.event)
                    continue
                if isinstance(res, Conflict) and await self._written_already(out):
                    results[w.result] = msgspec.structs.replace(results[w.result], outcome=UNCHANGED)
                    continue
                if isinstance(res, Conflict):
                    r = results[w.result]
                    results[w.result] = msgspec.structs.replace(r, outcome=REJECTED, reasons=(
                        f"metadata.name: {r.kind} {r.name} {CONCURRENT} "
                        f"(expected version {res.expected}, found {res.actual}); apply again",))  # fmt: skip
                    continue
                if getattr(res, "duplicate", False):  # the very same write landed already
                    results[w.result] = msgspec.structs.replace(results[w.result], outcome=UNCHANGED)
                self._fold(getattr(res, "seq", 0), out.subject, out.event)
        except BaseException as exc:
            for root in roots:
                if root is not None:
                    root.set_status(Status(StatusCode.ERROR, f"admission failed: {exc!r}"))
                    root.end()
            raise
        retried = {id(w) for w, _ in again}
        for (w, _), root, res in zip(outs, roots, appended, strict=True):
            if root is not None:
                admitted(root, res, "retried" if id(w) in retried else results[w.result].outcome)
        return again


#: the words of a write another writer's append beat (its expected sequence passed): nothing
#: was judged wrong, and an object read from the API server is judged again (podsource.py)
CONCURRENT = "was created or changed concurrently"


def admit_span(subject: str, event: Event) -> tuple[context.Context | None, trace.Span | None]:
    """A job's trace starts where it is admitted: the root of a trace of its own per submitted
    job, which every service's handling of the job then continues (README "Traces": one trace
    per job). In the request's trace (`tessera apply`, a batch of watched pods) a whole
    manifest of jobs and all their later finishes made one ever-growing trace; so the job's
    root links the request's span and the request's span links each job it submitted, as a
    session links the decisions it made. The root is returned open: it ends with what the log
    answered (`admitted`), so a write another writer beat, or a retry the log already held,
    is not a trace that looks like a job's start and never goes on."""
    if not isinstance(event, JobSubmitted):
        return None, None
    key = f"{event.spec.namespace}/{event.spec.name}"
    request = trace.get_current_span()
    asked = request.get_span_context()
    if not recording(tracer):
        # exported nowhere: no span, but a traced request's job still gets a trace id of its
        # own (sampled, so a service that exports continues it); an untraced one stays untraced
        # (messages without a traceparent cost the services nothing to read, issue 29)
        if not asked.is_valid:
            return None, None
        own = SpanContext(_IDS.generate_trace_id(), _IDS.generate_span_id(), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))  # fmt: skip
        return trace.set_span_in_context(NonRecordingSpan(own)), None
    span = tracer.start_span(
        f"admit {subject_template(subject)}", context=context.Context(), kind=SpanKind.PRODUCER,
        links=[Link(asked, {"tessera.link": "request"})] if asked.is_valid else (),
        attributes={"messaging.system": "nats", "messaging.operation.type": "send",
                    "messaging.operation.name": "admit", "messaging.destination.template": subject_template(subject),
                    "tessera.job": key, "tessera.queue": event.spec.queue, "tessera.kind": event.spec.kind},
    )  # fmt: skip
    if asked.is_valid and span.get_span_context().is_valid:
        request.add_link(span.get_span_context(), {"tessera.job": key})
    return trace.set_span_in_context(span), span


def admitted(root: trace.Span, result: object, outcome: str) -> None:
    """End a job's root span with what became of its write: appended (at which sequence), the
    same job there already (a retry, a concurrent identical apply: the job's trace is the first
    write's), written again in a second round (`retried`), or refused because another writer's
    came first — no job goes on from those."""
    if outcome == REJECTED:
        root.set_attribute("tessera.outcome", "conflict")
        if isinstance(result, Conflict):
            root.set_status(Status(StatusCode.ERROR, f"another write came first (expected version "
                                                     f"{result.expected}, found {result.actual})"))  # fmt: skip
    elif outcome in (UNCHANGED, "retried"):
        root.set_attribute("tessera.outcome", outcome)
    else:
        root.set_attribute("tessera.outcome", "appended")
        if seq := getattr(result, "seq", 0):
            root.set_attribute("tessera.stream.seq", seq)
    root.end()


def say_results(results: list[ObjectResult], error: str = "", dry_run: bool = False) -> None:
    """One short INFO line per object admitted, changed or refused (refusals with every rule
    they broke; warnings counted, said at DEBUG), in the trace of the request: what admission
    did, in its own log. Unchanged objects and dry runs, which write nothing, at DEBUG."""
    level = logging.DEBUG if dry_run else logging.INFO
    if error:
        log.log(level, "refused a request%s: %s", " (dry run)" if dry_run else "", error)
    for r in results:
        name = f"{r.namespace}/{r.name}" if r.namespace else r.name
        if r.outcome == REJECTED:
            log.log(level, "rejected %s %s: %s", r.kind, name, "; ".join(r.reasons))
        elif r.outcome in (ACCEPTED, CONFIGURED):
            log.log(level, "%s %s %s%s", "admitted" if r.outcome == ACCEPTED else "configured", r.kind, name,
                    f" ({len(r.warnings)} warning{'s' * (len(r.warnings) > 1)})" if r.warnings else "")  # fmt: skip
            for warning in r.warnings:  # (the reply tells the user; a rounding per pod at INFO was 150 bytes)
                log.debug("%s %s: %s", r.kind, name, warning)
        else:
            log.debug("%s %s %s", r.outcome, r.kind, name)


def _first_reason(result: ObjectResult) -> tuple[str, ...]:
    """A result's first reason and how many more it had (for a reply that must shrink)."""
    more = len(result.reasons) - 1
    return result.reasons[:1] + ((f"... and {more} more",) if more > 0 else ())
