"""Request/reply bodies of the services' NATS APIs (not log events: nothing here is stored).

The CLI and tests speak these to `<root>.api.<service>.<endpoint>`; JSON so that
`nats req tessera.api.admission.apply '{"manifest": "..."}'` works by hand too.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from contracts.base import Record

#: What happened to one submitted object.
ACCEPTED = "accepted"
UNCHANGED = "unchanged"
CONFIGURED = "configured"  # an existing object changed (a Queue's weight, capability, …)
REJECTED = "rejected"


#: how the API server names a kind's resource in its answers (kubectl prints them: `Error from
#: server (NotFound): jobs.batch.volcano.sh "x" not found`, AlreadyExists alike)
KIND_RESOURCES = {"Pod": "pods", "Job": "jobs.batch.volcano.sh", "PodGroup": "podgroups.scheduling.volcano.sh",
                  "Queue": "queues.scheduling.volcano.sh", "PriorityClass": "priorityclasses.scheduling.k8s.io",
                  "ResourceQuota": "resourcequotas", "HyperNode": "hypernodes.topology.volcano.sh",
                  "Namespace": "namespaces", "Node": "nodes"}  # fmt: skip


class ApplyRequest(Record, frozen=True):
    manifest: str  # YAML (one or many documents) or JSON
    dry_run: bool = False  # validate and answer, write nothing
    #: `kubectl create`: an object that exists already is refused (AlreadyExists), not changed
    create: bool = False


class ObjectResult(Record, frozen=True):
    kind: str
    name: str
    namespace: str = ""
    outcome: str = ACCEPTED  # accepted | unchanged | configured | rejected
    reasons: tuple[str, ...] = ()  # every violated rule: "<path>: <rule> (value: <v>)"
    #: accepted, but a value was changed (HAMi's clamps, e.g. `-core: 150` → 100), same form
    warnings: tuple[str, ...] = ()


class ApplyReply(Record, frozen=True):
    results: tuple[ObjectResult, ...] = ()
    error: str = ""  # the whole request was unreadable (bad YAML, too large, too deep …)

    @property
    def rejected(self) -> bool:
        return bool(self.error) or any(r.outcome == REJECTED for r in self.results)


class CommandRequest(Record, frozen=True):
    """A vcctl-style command on one object: queue open/close/delete, job suspend/resume/delete."""

    action: str  # open | close | suspend | resume | delete
    name: str
    namespace: str = ""
    kind: str = ""  # "queue" for `queue delete`; otherwise implied by the action (job)


class CommandReply(Record, frozen=True):
    ok: bool
    message: str = ""


_T = TypeVar("_T")
_encoder = msgspec.json.Encoder()


def encode(value: msgspec.Struct) -> bytes:
    return _encoder.encode(value)


def decode(data: bytes, kind: type[_T]) -> _T:
    """Strict decode: a malformed request is a `msgspec.ValidationError`/`DecodeError`."""
    return msgspec.json.decode(data, type=kind)
