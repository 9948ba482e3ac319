"""Admission's projection (`Known`) as a stored value: what a snapshot holds and how the log's
tail is folded onto it (`services.runtime.snapshot`)."""

from __future__ import annotations

from contracts.base import Event
from contracts.subjects import Subjects
from services.admission.plan import Known, fold_known
from services.core.retention import FinishedOrder
from services.runtime.eventlog import StoredMessage
from services.runtime.snapshot import msgpack_codec, shape_of

_ENCODER, _DECODER = msgpack_codec(Known)


class KnownFold:
    name = "admission"

    def __init__(self, subjects: Subjects, types: frozenset[str], keep_finished: int) -> None:
        self.subjects = subjects
        self.patterns = (subjects.all_priority_classes(), subjects.all_queues(), subjects.all_jobs(),
                         subjects.all_nodes(), subjects.all_quotas(), subjects.all_hypernodes(),
                         subjects.all_namespaces())  # fmt: skip
        self.types: frozenset[str] | None = types
        self.keep_finished = keep_finished

    def version(self) -> str:
        return f"{shape_of(Known)} keep-finished={self.keep_finished}"

    def empty(self) -> Known:
        return Known(finished=FinishedOrder(self.keep_finished))

    def fold(self, state: Known, msg: StoredMessage, event: Event) -> Known:
        kind, _ = self.subjects.parse(msg.subject)
        fold_known(state, msg.seq, kind, event)
        return state

    def encode(self, state: Known) -> bytes:
        return _ENCODER.encode(state)

    def decode(self, data: bytes) -> Known:
        return _DECODER.decode(data)
