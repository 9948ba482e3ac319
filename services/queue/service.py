"""The queue service's shell: queue and job lifecycles over the log, plus node liveness.

It folds queue, job and node events into a `Flow`, asks `flow` what the affected job (and the
queues) owe after each one, and appends that with message ids derived from the causing event.
Its own appends are folded at once (so a second event for the same job does not decide the same
thing again before the first answer comes back) and skipped when the consumer delivers them.
At start it creates `root` and `default` when the log has none, and sweeps every job once so
anything owed from before a crash is appended. It hosts the `NodeMonitor` (heartbeats → NodeLost
and the lost node's tasks failed), and answers vcctl-style commands over request/reply (queue
open/close/delete; job suspend, resume, restart, terminate, complete, delete).
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
from opentelemetry import trace

from contracts.api import CommandReply, CommandRequest, decode, encode
from contracts.base import Event
from contracts.events import (
    ALL_EVENTS,
    JobPhaseChanged,
    QueueCreated,
    QueueStateChanged,
    TaskFinished,
)
from contracts.subjects import subject_of
from services.core.retention import DEFAULT_KEEP_FINISHED
from services.core.scheduling import lifecycle
from services.nodeagent.monitor import NodeMonitor
from services.queue import flow as fl
from services.queue.recovery import QueueFold
from services.runtime.compaction import keep_compacted
from services.runtime.eventlog import EventLog
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import (
    EventService,
    Handler,
    Outgoing,
    Received,
    chain,
)
from services.runtime.snapshot import Retention, Snapshots

log = logging.getLogger(__name__)
tracer = trace.get_tracer("tessera.queue")


class QueueService:
    def __init__(
        self,
        event_log: EventLog,
        monitor: NodeMonitor | None = None,
        monitor_nc: object | None = None,
    ) -> None:
        self.log = event_log
        self.subjects = event_log.subjects
        self.flow = fl.Flow()
        self.watermark = 0
        self.folded_to = 0  # the last message this process folded or skipped as its own
        self.own: set[int] = set()
        self.monitor = monitor
        self.monitor_nc = monitor_nc
        self._lock = asyncio.Lock()
        handlers: dict[type[Event], Handler] = dict.fromkeys(ALL_EVENTS, self.on_event)  # type: ignore[arg-type]
        if monitor is not None:
            for cls, h in monitor.handlers.items():
                handlers[cls] = chain(h, handlers[cls])  # the monitor first: it never fails, so
                # a redelivery after the host's failure is one the monitor folded already
        s = self.subjects
        self.service = EventService(
            name="queue",
            log=event_log,
            filter_subjects=[s.all_queues(), s.all_jobs(), s.all_nodes()],
            handlers=handlers,
        )
        if monitor is not None:
            monitor.publisher = self.service
        self.keep_finished = DEFAULT_KEEP_FINISHED
        self.compact_every = 0.0  # s between compactions of the log (0: never; `--compact-every`)
        self.snapshots = Snapshots(event_log, QueueFold(self.subjects, self.keep_finished),
                                   on_poison=self.service.park_once)  # fmt: skip

    def retain(self, retention: Retention) -> None:
        """Snapshots and how many finished jobs to remember (before `recover`)."""
        self.keep_finished = retention.keep_finished
        self.snapshots.projection = QueueFold(self.subjects, self.keep_finished)
        self.snapshots.store, self.snapshots.every = retention.store, retention.snapshot_every

    # --- start ---------------------------------------------------------------------------------

    async def recover(self) -> None:
        self.watermark = await self.log.last_sequence()
        state = await self.snapshots.recover(self.watermark)
        self.flow = state.flow
        await self._default_queues()
        await self._sweep()
        if self.monitor is not None:
            await self.monitor.recover(tasks=(state.tasks, self.watermark))
        log.info("queue service recovered to #%d: %d live jobs, %d queues, %d finished jobs "
                 "kept (--keep-finished %d)", self.watermark, len(self.flow.projection.jobs),
                 len(self.flow.projection.queues), len(self.flow.finished.order),
                 self.keep_finished)  # fmt: skip

    async def _default_queues(self) -> None:
        for spec in lifecycle.default_queues(self.flow.projection.queues):
            out = Outgoing(self.subjects.queue(spec.name), QueueCreated(spec=spec), 0,
                           f"queue:default:{spec.name}")  # fmt: skip
            await self._publish([out])

    async def _sweep(self) -> None:
        outs: list[Outgoing] = []
        for key in sorted(self.flow.projection.jobs):
            outs += self._outgoing(fl.job_events(self.flow, key))
        outs += self._outgoing(fl.queue_events(self.flow))
        tagged = [Outgoing(o.subject, o.event, msg_id=f"queue:sweep:{self.watermark}#{i}")
                  for i, o in enumerate(outs)]  # fmt: skip
        await self._publish(tagged)

    async def background(self, stopping: asyncio.Event) -> None:
        if self.monitor is not None:
            await self.monitor.start(self.monitor_nc)
        try:
            if self.compact_every > 0 and isinstance(self.log, JetStreamLog):
                # the stream's retention: by what is finished, never by age or count, which
                # would drop the oldest messages — a live job's JobSubmitted among them
                await keep_compacted(self.log, self.keep_finished, self.compact_every, stopping)
            await stopping.wait()
        finally:
            if self.monitor is not None:
                await self.monitor.aclose()

    # --- events --------------------------------------------------------------------------------

    async def on_event(self, event: Event, rx: Received) -> None:
        seq = rx.message.seq
        async with self._lock:
            if seq in self.own:
                self.own.discard(seq)
            elif seq > max(self.watermark, self.folded_to):
                self.flow.apply(seq, event)
            # first deliveries come in stream order: one at or below what was folded is a
            # redelivery to this process (a rider's part unsettled past ack_wait, a nak after
            # the fold), whose fold — a restart's retry counted again — was done already
            self.folded_to = max(self.folded_to, seq)
            owed: list[Event] = []
            if isinstance(event, TaskFinished):
                owed += fl.pod_failed(self.flow, event, seq) or fl.task_completed(self.flow, event, seq)
            key = fl.job_key(event)
            if key is not None and not owed:
                owed += fl.job_events(self.flow, key)
            owed += fl.queue_events(self.flow)
            await self._publish(self._outgoing(owed), rx)

    def _outgoing(self, events: list[Event]) -> list[Outgoing]:
        return [Outgoing(subject_of(self.subjects, ev), ev) for ev in events]

    async def _publish(self, outs: list[Outgoing], cause: Received | None = None) -> None:
        if not outs:
            return
        entries = [self.service.entry(out, cause, i) for i, out in enumerate(outs)]
        results = await self.log.append_pipelined(entries)
        for out, res in zip(outs, results, strict=True):
            seq = getattr(res, "seq", 0)
            if seq and not getattr(res, "duplicate", False):
                self.own.add(seq)
                self.flow.apply(seq, out.event)
                if isinstance(out.event, JobPhaseChanged | QueueStateChanged):
                    say_phase(out.event)

    # --- commands ------------------------------------------------------------------------------

    async def api_command(self, data: bytes) -> bytes:
        try:
            req = decode(data, CommandRequest)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return encode(CommandReply(ok=False, message=f"request not understood: {exc}"))
        return encode(await self.command(req.action, req.namespace, req.name, req.kind))

    async def command(self, action: str, namespace: str, name: str, kind: str = "", uid: str = "") -> CommandReply:
        with tracer.start_as_current_span(f"command {action}"):
            async with self._lock:
                try:
                    events = fl.command(self.flow, action, namespace, name, kind, uid)
                except fl.Refused as exc:
                    return CommandReply(ok=False, message=str(exc))
                # ids naming the queue as their producer, and the log position the command was
                # judged at: a retried request lands once, and `replay --verify` does not count
                # a user's terminate or restart as a scheduler's unrecorded decisions
                tag = f"queue:cmd:{self.flow.projection.seq}:{action}:{namespace}/{name}"
                await self._publish([Outgoing(o.subject, o.event, msg_id=f"{tag}#{i}")
                                     for i, o in enumerate(self._outgoing(events))])  # fmt: skip
        if action == "delete" and kind == "pod":
            return CommandReply(ok=True, message=fl.pod_deleted(namespace, name, events))
        queue = action in ("open", "close") or kind == "queue"
        what = f"queue {name}" if queue else f"job {namespace}/{name}"
        if action in fl.JOB_ACTIONS or action == fl.OBJECT_DELETED:  # where it went: Restarting, Failed at maxRetry, Terminating, …
            phase = next(e for e in reversed(events) if isinstance(e, JobPhaseChanged))
            return CommandReply(ok=True, message=f"{what} {phase.phase} ({phase.reason})")
        if action == "resume" and (moved := [e for e in events if isinstance(e, JobPhaseChanged)]):
            # a resume spends a retry (Volcano's ResumeJob), and fails the job at maxRetry
            word = "resumed" if moved[-1].phase != "Failed" else "Failed"
            return CommandReply(ok=True, message=f"{what} {word} ({moved[-1].reason})")
        # the child queues that closed or opened with it (Volcano's hierarchical queues)
        tree = [f"{e.queue} ({e.state})" for e in events if isinstance(e, QueueStateChanged) and e.queue != name]
        also = f"; with it its child queues {', '.join(tree)}" if tree and queue else ""
        closing = next((e for e in events if isinstance(e, QueueStateChanged) and e.state == "Closing"
                        and e.queue == name), None)  # fmt: skip
        if action == "close" and closing is not None:
            # Volcano's Closing: "closed" read as done while its jobs still run, and new ones refused
            live = sum(1 for j in self.flow.projection.jobs.values() if j.spec.queue == name)
            return CommandReply(ok=True, message=f"queue {name} closing ({live} job(s) still in it: "
                                                 f"Closed when they end; new jobs are refused now){also}")  # fmt: skip
        done = {"open": "opened", "close": "closed", "suspend": "suspended",
                "resume": "resumed", "delete": "deleted"}[action]  # fmt: skip
        return CommandReply(ok=True, message=f"{what} {done}{also}")


#: a job's phases another service's line says already (admitted, committed): DEBUG here
_SAID_ELSEWHERE = frozenset({"Pending", "Inqueue", "Running"})


def say_phase(event: JobPhaseChanged | QueueStateChanged) -> None:
    """One INFO line per phase the queue service moves a job to that no other service's line
    says — its end (Completed, Failed, Aborted, Terminated), a restart, a policy's action — and
    per queue state; Pending, Inqueue and Running at DEBUG (admission's "admitted" and the
    allocator's "committed" lines say them)."""
    if isinstance(event, QueueStateChanged):
        log.info("queue %s %s%s", event.queue, event.state, f" ({event.reason})" if event.reason else "")
        return
    level = logging.DEBUG if event.phase in _SAID_ELSEWHERE else logging.INFO
    log.log(level, "job %s/%s %s%s", event.namespace, event.name, event.phase,
            f" ({event.reason})" if event.reason else "")  # fmt: skip
