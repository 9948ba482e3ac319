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

Beyond appends, a service may touch only what it owns (issue 23), so one compromised or buggy
service cannot undo the others: no stream update (a `max_msgs`/`max_age` is a purge of the
truth), its own durable consumer only, its own snapshot bucket only, and replies on its own
inbox prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from contracts.generated import write_or_check
from contracts.subjects import Subjects

#: The aggregate kinds each service appends to (token 3 of `<root>.ev.<kind>.…`).
APPENDS: dict[str, tuple[str, ...]] = {
    "admission": ("queue", "pc", "job", "quota", "topo", "pdb", "ns"),  # QueueCreated/Updated/…, PriorityClassCreated, JobSubmitted/Updated, QuotaChanged, HyperNodeChanged, DisruptionBudgetChanged, NamespaceChanged
    "queue": ("queue", "job", "node", "log"),  # default queues, phases; its node monitor's NodeLost; its compaction's LogCompacted
    "scheduler": ("job", "sched"),  # PlacementProposed, EvictionRequested, JobUnschedulable; SchedulerConfigured
    "allocator": ("card", "job", "vol"),  # the ledgers; PlacementCommitted/Rejected, BindingFailed; ClaimChanged…
    "nodeagent": ("node", "job", "use", "inv"),  # NodeRegistered/Lost, TaskStarted/Finished, NodeUsage, NodesListed
}
#: Request/reply endpoints each service serves (`<root>.api.<service>.*`).
SERVES = frozenset({"admission", "queue", "allocator"})
#: Heartbeats (`<root>.hb.<node>`, core NATS): the node agent sends, the queue's monitor listens.
HEARTBEAT_SENDERS = frozenset({"nodeagent"})
HEARTBEAT_LISTENERS = frozenset({"queue"})
#: Services holding a lease in the `<stream>_leases` KV bucket.
LEASE_HOLDERS = frozenset({"scheduler"})
#: Services that purge the log's finished jobs (automatic retention, `--compact-every`): the
#: one stream purge a service may send. The server checks subjects, not the request's body, so
#: the rule "only up to a sequence" (`services/runtime/compaction.py`) is the code's, not NATS'.
COMPACTORS = frozenset({"queue"})
#: Services keeping a snapshot of their projection (`services/runtime/snapshot.py`), each in a
#: bucket of its own: replacing an object purges its old chunks, and a purge right on a shared
#: bucket would let one service delete the others' (the allocator keeps none).
SNAPSHOTTERS = frozenset({"admission", "queue", "scheduler", "nodeagent"})

CLI = "cli"
ADMIN = "admin"
USERS = (*APPENDS, CLI, ADMIN)
API = "$JS.API"


def nats_user(user: str) -> str:
    """The NATS user name of a role (`up`'s credential files, the chart's Secret and config)."""
    return f"tessera-{user}"


def role_of(name: str) -> str:
    """The role of a NATS user name ("" for a name that is not one of ours)."""
    role = name.removeprefix("tessera-")
    return role if role != name and role in USERS else ""


def inbox_prefix(name: str) -> str:
    """Where a client's replies come (nats-py `inbox_prefix`): under its own NATS user name, the
    only user allowed to subscribe there, so no service reads the answers meant for another."""
    return f"_INBOX.{name}"


def durable_of(user: str) -> str:
    """The one durable consumer a service may create, pull from and ack: named by its user."""
    return user


def snapshot_bucket(stream: str, service: str) -> str:
    """The object store holding one service's snapshot."""
    return f"{stream}_snapshots_{service}"


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    #: may answer the requests it received (services behind `nats.micro` endpoints)
    responses: bool = False

    def may_publish(self, subject: str) -> bool:
        return any(matches(p, subject) for p in self.publish)

    def may_subscribe(self, subject: str) -> bool:
        return any(matches(p, subject) for p in self.subscribe)


def matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: `*` one token, `>` one or more trailing tokens."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def _read_stream(stream: str) -> list[str]:
    """The JetStream API a reader of `stream` calls: info, direct gets (replay/follow and
    last-per-subject), and ephemeral ordered consumers (flow-control replies on `$JS.FC`).
    The bare `CONSUMER.CREATE.<stream>` subject takes ephemeral consumers only: the server
    refuses a durable name there, so a reader cannot rewrite a service's durable."""
    return [f"{API}.STREAM.INFO.{stream}", f"{API}.DIRECT.GET.{stream}",
            f"{API}.DIRECT.GET.{stream}.>", f"{API}.STREAM.MSG.GET.{stream}",
            f"{API}.CONSUMER.CREATE.{stream}", f"{API}.CONSUMER.INFO.{stream}.*",
            f"$JS.FC.{stream}.>"]  # fmt: skip


def _durable(stream: str, name: str) -> list[str]:
    """Create (both API forms, with or without a filter token), pull and ack one durable, and
    reset it (what a killed process of it left unsettled, delivered again at the next start)."""
    return [f"{API}.CONSUMER.DURABLE.CREATE.{stream}.{name}", f"{API}.CONSUMER.CREATE.{stream}.{name}",
            f"{API}.CONSUMER.CREATE.{stream}.{name}.>", f"{API}.CONSUMER.MSG.NEXT.{stream}.{name}",
            f"{API}.CONSUMER.RESET.{stream}.{name}", f"$JS.ACK.{stream}.{name}.>"]  # fmt: skip


def permissions(user: str, subjects: Subjects | None = None, stream: str = "TESSERA") -> Permissions:
    """The rights of one NATS user: a service of `APPENDS`, `CLI` (read the log and ask the
    services; no append, no purge) or `ADMIN` (everything: `compact`, `down --purge`, and the
    stream updates an upgrade needs).

    A service creates the streams it uses when they are missing (`JetStreamLog.ensure`; a create
    of an existing stream with another configuration is refused by the server, so it cannot
    shorten one) but never updates, purges or deletes one — but the queue service's compaction
    purge of the log and each snapshotter's purge of its own bucket."""
    s = subjects or Subjects()
    root, dlq = s.root, f"{stream}_DLQ"
    inbox = f"{inbox_prefix(nats_user(user))}.>"
    if user == ADMIN:
        return Permissions(publish=(">",), subscribe=(">",), responses=True)
    if user == CLI:
        publish = [f"{root}.api.>", *_read_stream(stream), *_read_stream(dlq), f"{API}.INFO"]
        return Permissions(publish=tuple(publish), subscribe=(inbox,))
    if user not in APPENDS:
        raise ValueError(f"user {user!r}: not a service ({', '.join(APPENDS)}), {CLI} or {ADMIN}")
    publish = [f"{root}.ev.{kind}.>" for kind in APPENDS[user]]
    publish += [s.dlq_all, f"{API}.INFO", f"{API}.STREAM.NAMES"]  # names: which stream holds
    # a subject, asked by nats-py's subscribe without a stream (the object store's reads)
    for name in (stream, dlq):
        publish += [*_read_stream(name), f"{API}.STREAM.CREATE.{name}"]
    publish += _durable(stream, durable_of(user))
    subscribe = [inbox, s.events]
    if user in SERVES:
        subscribe += [f"{s.api(user)}.>", "$SRV.>"]
    if user in HEARTBEAT_SENDERS:
        publish.append(f"{root}.hb.*")
    if user in HEARTBEAT_LISTENERS:
        subscribe.append(f"{root}.hb.*")
    if user in SNAPSHOTTERS:  # chunks and meta on `$O.<bucket>.>`; a replaced object's old
        bucket = snapshot_bucket(stream, user)  # chunks purged
        publish += [*_read_stream(f"OBJ_{bucket}"), f"{API}.STREAM.CREATE.OBJ_{bucket}",
                    f"$O.{bucket}.>", f"{API}.STREAM.PURGE.OBJ_{bucket}"]  # fmt: skip
    if user in COMPACTORS:
        publish.append(f"{API}.STREAM.PURGE.{stream}")
    if user in LEASE_HOLDERS:
        bucket = f"{stream}_leases"
        publish += [*_read_stream(f"KV_{bucket}"), f"{API}.STREAM.CREATE.KV_{bucket}",
                    f"$KV.{bucket}.>"]  # fmt: skip
    return Permissions(publish=tuple(publish), subscribe=tuple(subscribe), responses=user in SERVES)


def rights_of(name: str, subjects: Subjects | None = None, stream: str = "TESSERA") -> Permissions | None:
    """The permissions of a connection by its NATS user name; None when unrestricted (no
    credentials, the operator, or a user of another naming on an external NATS)."""
    role = role_of(name)
    if not role or role == ADMIN:
        return None
    return permissions(role, subjects, stream)


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
