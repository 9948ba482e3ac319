"""Who may publish and subscribe where on the bus: the one table NATS authorization comes from.

Without it any client on the bus could append a `PlacementCommitted` or a `SliceReleased` with
an empty usage, or purge the stream (issue 15). The nats-server configuration of `tessera up`,
the chart's, and the in-process check of every append (`JetStreamLog(writer=…)`) are all derived
from `APPENDS` below, so what the server allows cannot drift from what the code appends: an
append outside the table fails in the process with the rule, before the server would refuse it
silently (a refused publish gets no answer at all).

Granularity is the aggregate kind (`Subjects.queue/job/node/card/pc`): the card ledgers are the
allocator's alone, while a job's subject is shared by every service that reports on the job (the
allocator's commit and the node agent's `TaskStarted` land on one subject, for the per-aggregate
optimistic concurrency of DESIGN §4), so subject permissions cannot tell those writers apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from contracts.generated import write_or_check
from contracts.subjects import Subjects

#: The aggregate kinds each service appends to (token 3 of `<root>.ev.<kind>.…`).
APPENDS: dict[str, tuple[str, ...]] = {
    "admission": ("queue", "pc", "job", "topo"),  # QueueCreated/Updated/…, PriorityClassCreated, JobSubmitted/Updated, HyperNodeChanged
    "queue": ("queue", "job", "node"),  # default queues, phases; its node monitor's NodeLost
    "scheduler": ("job", "sched"),  # PlacementProposed, EvictionRequested, JobUnschedulable; SchedulerConfigured
    "allocator": ("card", "job", "vol"),  # the ledgers; PlacementCommitted/Rejected, BindingFailed; ClaimChanged…
    "nodeagent": ("node", "job", "use"),  # NodeRegistered/Lost, TaskStarted/Finished, NodeUsage
}
#: Request/reply endpoints each service serves (`<root>.api.<service>.*`).
SERVES = frozenset({"admission", "queue", "allocator"})
#: Heartbeats (`<root>.hb.<node>`, core NATS): the node agent sends, the queue's monitor listens.
HEARTBEAT_SENDERS = frozenset({"nodeagent"})
HEARTBEAT_LISTENERS = frozenset({"queue"})
#: Services holding a lease in the `<stream>_leases` KV bucket.
LEASE_HOLDERS = frozenset({"scheduler"})
#: Services that purge the log's finished jobs (automatic retention, `--compact-every`).
COMPACTORS = frozenset({"queue"})

CLI = "cli"
ADMIN = "admin"
USERS = (*APPENDS, CLI, ADMIN)
INBOX = "_INBOX.>"


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    #: may answer the requests it received (services behind `nats.micro` endpoints)
    responses: bool = False

    def may_publish(self, subject: str) -> bool:
        return any(matches(p, subject) for p in self.publish)


def matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: `*` one token, `>` one or more trailing tokens."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def _read_stream(stream: str, consumers: bool) -> list[str]:
    """The JetStream API a reader of `stream` calls: info, direct gets (replay/follow and
    last-per-subject), and ephemeral ordered consumers (flow-control replies on `$JS.FC`).
    The bare `CONSUMER.CREATE.<stream>` subject takes ephemeral consumers only: the server
    refuses a durable name there, so a reader cannot rewrite a service's durable."""
    api = "$JS.API"
    reads = [f"{api}.STREAM.INFO.{stream}", f"{api}.DIRECT.GET.{stream}",
             f"{api}.DIRECT.GET.{stream}.>", f"{api}.STREAM.MSG.GET.{stream}"]  # fmt: skip
    if consumers:
        reads += [f"{api}.CONSUMER.CREATE.{stream}", f"{api}.CONSUMER.INFO.{stream}.*",
                  f"$JS.FC.{stream}.>"]  # fmt: skip
    return reads


def _own_stream(stream: str) -> list[str]:
    """What every service does to the streams at start (`JetStreamLog.ensure`) and with its
    durable consumer: never delete, purge or remove a message."""
    api = "$JS.API"
    return [f"{api}.STREAM.CREATE.{stream}", f"{api}.STREAM.UPDATE.{stream}",
            f"{api}.CONSUMER.DURABLE.CREATE.{stream}.*", f"{api}.CONSUMER.CREATE.{stream}.>",
            f"{api}.CONSUMER.MSG.NEXT.{stream}.*", f"$JS.ACK.{stream}.>"]  # fmt: skip


def permissions(user: str, subjects: Subjects | None = None, stream: str = "TESSERA") -> Permissions:
    """The rights of one NATS user: a service of `APPENDS`, `CLI` (read the log and ask the
    services; no append, no purge) or `ADMIN` (everything: `compact`, `down --purge`)."""
    s = subjects or Subjects()
    root, dlq = s.root, f"{stream}_DLQ"
    if user == ADMIN:
        return Permissions(publish=(">",), subscribe=(">",), responses=True)
    if user == CLI:
        publish = [f"{root}.api.>", *_read_stream(stream, True), *_read_stream(dlq, True),
                   "$JS.API.INFO"]  # fmt: skip
        return Permissions(publish=tuple(publish), subscribe=(INBOX,))
    if user not in APPENDS:
        raise ValueError(f"user {user!r}: not a service ({', '.join(APPENDS)}), {CLI} or {ADMIN}")
    publish = [f"{root}.ev.{kind}.>" for kind in APPENDS[user]]
    publish += [s.dlq_all, "$JS.API.INFO", "$JS.API.STREAM.NAMES"]  # names: which stream holds
    # a subject, asked by nats-py's subscribe without a stream (the object store's reads)
    for name in (stream, dlq):
        publish += [*_read_stream(name, True), *_own_stream(name)]
    subscribe = [INBOX, s.events]
    if user in SERVES:
        subscribe += [f"{s.api(user)}.>", "$SRV.>"]
    if user in HEARTBEAT_SENDERS:
        publish.append(f"{root}.hb.*")
    if user in HEARTBEAT_LISTENERS:
        subscribe.append(f"{root}.hb.*")
    # its projection's snapshot in the `<stream>_snapshots` object store: chunks and meta on
    # `$O.<bucket>.>`, and the purge of an object's old chunks when it is replaced
    objects = f"{stream}_snapshots"
    publish += [*_read_stream(f"OBJ_{objects}", True), *_own_stream(f"OBJ_{objects}"),
                f"$O.{objects}.>", f"$JS.API.STREAM.PURGE.OBJ_{objects}"]  # fmt: skip
    if user in COMPACTORS:
        publish.append(f"$JS.API.STREAM.PURGE.{stream}")
    if user in LEASE_HOLDERS:
        bucket = f"{stream}_leases"
        publish += [*_read_stream(f"KV_{bucket}", False), *_own_stream(f"KV_{bucket}"),
                    f"$KV.{bucket}.>"]  # fmt: skip
    return Permissions(publish=tuple(publish), subscribe=tuple(subscribe), responses=user in SERVES)


def may_append(user: str, subject: str, subjects: Subjects) -> bool:
    """Whether `user` may append an event on `subject` (the same rule the server enforces)."""
    kinds = APPENDS.get(user)
    if kinds is None:
        return user == ADMIN
    return any(matches(f"{subjects.root}.ev.{kind}.>", subject) for kind in kinds)


CHART_COPY = Path(__file__).resolve().parents[1] / "charts" / "tessera" / "files" / "permissions.json"


def render_chart_copy() -> str:
    """The table as the chart reads it (`.Files.Get`): Helm cannot import Python, so the chart
    gets a generated copy, checked against this module by the tests like the event schema."""
    doc = {}
    for user in USERS:
        p = permissions(user)
        doc[user] = {"publish": list(p.publish), "subscribe": list(p.subscribe),
                     "allow_responses": p.responses}  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"


def main() -> int:
    """`python -m contracts.permissions` rewrites the chart's copy; `--check` says if it is stale."""
    return write_or_check(CHART_COPY, render_chart_copy(), "python -m contracts.permissions")


if __name__ == "__main__":
    raise SystemExit(main())
