"""Subjects of the log, one per aggregate, and the escaping that makes any Kubernetes name a token.

NATS tokens may not contain `.`, `*`, `>` or whitespace; Kubernetes names may contain dots (DNS
subdomains) and, for labels or uuids, other characters. The escape is reversible and leaves the
common `[a-z0-9-]` names untouched so subjects stay readable in `nats stream view`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contracts.base import Event

# Bytes left as they are; everything else becomes `_XX` (hex). `_` itself is escaped.
_SAFE = re.compile(r"[A-Za-z0-9\-]")
_ESCAPE_RE = re.compile(r"_([0-9A-F]{2})")


def escape(name: str) -> str:
    """Turn an arbitrary name into one valid NATS subject token (never empty)."""
    if not name:
        return "_"
    out: list[str] = []
    for ch in name:
        if _SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"_{b:02X}" for b in ch.encode())
    return "".join(out)


def unescape(token: str) -> str:
    """Inverse of :func:`escape`."""
    if token == "_":
        return ""
    raw = bytearray()
    i = 0
    while i < len(token):
        m = _ESCAPE_RE.match(token, i)
        if m:
            raw.append(int(m.group(1), 16))
            i = m.end()
        else:
            raw.extend(token[i].encode())
            i += 1
    return raw.decode()


class Subjects:
    """Subject builders under one root, so several installations (or tests) can share a server."""

    def __init__(self, root: str = "tessera") -> None:
        if not root or not all(_SAFE.fullmatch(c) for c in root):
            raise ValueError(f"subject root {root!r} must be a non-empty [A-Za-z0-9-] token")
        self.root = root
        self.events = f"{root}.ev.>"
        self.dlq_all = f"{root}.dlq.>"

    def queue(self, queue: str) -> str:
        return f"{self.root}.ev.queue.{escape(queue)}"

    def priority_class(self, name: str) -> str:
        return f"{self.root}.ev.pc.{escape(name)}"

    def all_priority_classes(self) -> str:
        return f"{self.root}.ev.pc.>"

    def job(self, namespace: str, job: str) -> str:
        return f"{self.root}.ev.job.{escape(namespace)}.{escape(job)}"

    def node(self, node: str) -> str:
        return f"{self.root}.ev.node.{escape(node)}"

    def usage(self, node: str) -> str:
        """What other schedulers' pods hold on a node (`NodeUsage`)."""
        return f"{self.root}.ev.use.{escape(node)}"

    def all_usage(self) -> str:
        return f"{self.root}.ev.use.>"

    def card(self, node: str, uuid: str) -> str:
        return f"{self.root}.ev.card.{escape(node)}.{escape(uuid)}"

    def all_cards(self) -> str:
        return f"{self.root}.ev.card.>"

    def all_nodes(self) -> str:
        return f"{self.root}.ev.node.>"

    def all_jobs(self) -> str:
        return f"{self.root}.ev.job.>"

    def all_queues(self) -> str:
        return f"{self.root}.ev.queue.>"

    def storage(self, kind: str, name: str, namespace: str = "") -> str:
        """A claim (`pvc`, in its namespace), volume (`pv`) or storage class (`sc`)."""
        ns = f"{escape(namespace)}." if kind == "pvc" else ""
        return f"{self.root}.ev.vol.{kind}.{ns}{escape(name)}"

    def all_storage(self) -> str:
        return f"{self.root}.ev.vol.>"

    def hypernode(self, name: str) -> str:
        """A HyperNode (`HyperNodeChanged` / `HyperNodeDeleted`)."""
        return f"{self.root}.ev.topo.{escape(name)}"

    def all_hypernodes(self) -> str:
        return f"{self.root}.ev.topo.>"

    def scheduler(self, name: str) -> str:
        """A scheduler's configuration history (`SchedulerConfigured`)."""
        return f"{self.root}.ev.sched.{escape(name)}"

    def dlq(self, service: str) -> str:
        return f"{self.root}.dlq.{escape(service)}"

    def api(self, service: str) -> str:
        """Request/reply endpoints (not in the log)."""
        return f"{self.root}.api.{escape(service)}"

    def parse(self, subject: str) -> tuple[str, tuple[str, ...]]:
        """Split a log subject into (aggregate kind, unescaped ids)."""
        parts = subject.split(".")
        if len(parts) < 4 or parts[0] != self.root or parts[1] != "ev":
            raise ValueError(f"{subject!r} is not a {self.root} event subject")
        return parts[2], tuple(unescape(p) for p in parts[3:])


def subject_of(subjects: Subjects, event: Event) -> str:
    """The aggregate subject an event is appended to — one answer for every writer."""
    from contracts import events as ev  # events do not import subjects; kept local to stay so

    match event:
        case ev.QueueCreated() | ev.QueueUpdated():
            return subjects.queue(event.spec.name)
        case ev.QueueStateChanged() | ev.QueueDeleted():
            return subjects.queue(event.queue)
        case ev.SchedulerConfigured():
            return subjects.scheduler(event.scheduler)
        case ev.PriorityClassCreated():
            return subjects.priority_class(event.name)
        case ev.JobSubmitted():
            return subjects.job(event.spec.namespace, event.spec.name)
        case ev.NodeRegistered() | ev.NodeLost():
            return subjects.node(event.node)
        case ev.NodeUsage():
            return subjects.usage(event.node)
        case ev.ClaimChanged():
            return subjects.storage("pvc", event.name, event.namespace)
        case ev.VolumeChanged():
            return subjects.storage("pv", event.name)
        case ev.StorageClassChanged():
            return subjects.storage("sc", event.name)
        case ev.StorageDeleted():
            return subjects.storage(event.kind, event.name, event.namespace)
        case ev.HyperNodeChanged() | ev.HyperNodeDeleted():
            return subjects.hypernode(event.name)
        case ev.CardRegistered():
            return subjects.card(event.card.node, event.card.uuid)
        case ev.SliceReserved() | ev.SliceReleased() | ev.CardHealthChanged() | ev.CardRetired():
            return subjects.card(event.node, event.card)
        case _:  # every other event belongs to a job
            return subjects.job(event.namespace, event.name)  # type: ignore[attr-defined]
