"""The node agent's runtime (`NodeRuntime`) as a stored value: its persistent maps as sorted
pairs (a HAMT iterates in hash order, which differs between processes)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import msgspec
from immutables import Map

from contracts.base import Event
from contracts.envelope import Envelope, EnvelopeError
from contracts.subjects import Subjects
from services.nodeagent.runtime import JobKey, NodeRuntime, Run, TaskKey, TaskProfile, evolve
from services.runtime.eventlog import StoredMessage
from services.runtime.snapshot import shape_of


class StoredRuntime(msgspec.Struct, frozen=True, kw_only=True):
    profiles: list[tuple[JobKey, dict[str, TaskProfile]]]
    runs: list[tuple[TaskKey, Run]]
    todo: list[TaskKey]
    ends: list[tuple[TaskKey, float]]
    ended: list[JobKey]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StoredRuntime)


class RuntimeFold:
    def __init__(self, subjects: Subjects, name: str, nodes: frozenset[str], types: frozenset[str],
                 keep_finished: int) -> None:  # fmt: skip
        self.name = name
        self.patterns = (subjects.all_jobs(),)
        self.types: frozenset[str] | None = types
        self.nodes = nodes
        self.keep_finished = keep_finished

    def version(self) -> str:
        """Runs exist only for the hosted nodes: another inventory is another state."""
        hosted = hashlib.sha256("\n".join(sorted(self.nodes)).encode()).hexdigest()[:12]
        return f"{shape_of(StoredRuntime)} nodes={hosted} keep-finished={self.keep_finished}"

    def empty(self) -> NodeRuntime:
        return NodeRuntime(nodes=self.nodes, keep=self.keep_finished)

    def fold(self, state: NodeRuntime, msg: StoredMessage, event: Event) -> NodeRuntime:
        try:
            env = Envelope.from_headers(msg.headers)
        except EnvelopeError:
            return state
        return evolve(state, event, env.msg_id or f"seq:{msg.seq}")

    def encode(self, state: NodeRuntime) -> bytes:
        return _ENCODER.encode(StoredRuntime(
            profiles=_sorted(state.profiles), runs=_sorted(state.runs), todo=sorted(state.todo.keys()),
            ends=_sorted(state.ends), ended=list(state.ended),
        ))  # fmt: skip

    def decode(self, data: bytes) -> NodeRuntime:
        s = _DECODER.decode(data)
        return NodeRuntime(nodes=self.nodes, profiles=Map(s.profiles), runs=Map(s.runs),
                           todo=Map(dict.fromkeys(s.todo, True)), ends=Map(s.ends),
                           ended=tuple(s.ended), keep=self.keep_finished)  # fmt: skip


def _sorted(m: Mapping) -> list:
    return sorted(m.items(), key=lambda kv: kv[0])
