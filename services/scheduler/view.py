"""The scheduler's `SchedulerView` (services/core/scheduling/view.py: the projection plus the
proposals it assumed and the last reason it logged per job) as a snapshot, so recovery can
start from one (`services.runtime.snapshot`) and fold only the log's tail.

Every field is a fold of the log (the scheduler's own proposals and reasons included, read back
from the log), so a snapshot plus the tail equals a replay from #1.
"""

from __future__ import annotations

import msgspec

from contracts.base import Event
from contracts.devices import SliceSpec
from services.core.scheduling.projection_state import ProjectionState, projection_of, state_of
from services.core.scheduling.snapshot import Refused
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog import StoredMessage
from services.runtime.snapshot import shape_of


class StoredView(msgspec.Struct, frozen=True, kw_only=True):
    projection: ProjectionState
    outstanding: dict[str, int]
    assumed_tasks: dict[str, list[str]]  # sets, sorted: the same bytes in every process
    assumed: dict[str, dict[str, SliceSpec]]
    unschedulable: dict[str, str]
    refused: dict[str, Refused] = {}
    session: int = 0


#: bumped when `SchedulerView.apply` folds some log differently (2: a job's second proposal
#: while one is outstanding is not booked; 3: a BindingFailed with a retry holds its job back;
#: 4: a Namespace's labels, in the projection, lift refusals): a snapshot folded by older rules
#: is not resumed
FOLD_RULES = 4

_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StoredView)


class ViewFold:
    name = "scheduler"
    types: frozenset[str] | None = None

    def __init__(self, pattern: str) -> None:
        self.patterns = (pattern,)

    def version(self) -> str:
        return f"{shape_of(StoredView)}+fold{FOLD_RULES}"

    def empty(self) -> SchedulerView:
        return SchedulerView()

    def fold(self, state: SchedulerView, msg: StoredMessage, event: Event) -> SchedulerView:
        state.note_session(msg.headers)
        state.apply(msg.seq, event)
        return state

    def encode(self, state: SchedulerView) -> bytes:
        return _ENCODER.encode(StoredView(
            projection=state_of(state.projection), outstanding=state.outstanding,
            assumed_tasks={k: sorted(v) for k, v in state.assumed_tasks.items()},
            assumed=state.assumed, unschedulable=state.unschedulable,
            refused=state.refused, session=state.session,
        ))  # fmt: skip

    def decode(self, data: bytes) -> SchedulerView:
        s = _DECODER.decode(data)
        return SchedulerView(projection_of(s.projection), s.outstanding,
                             {k: set(v) for k, v in s.assumed_tasks.items()}, s.assumed,
                             s.unschedulable, refused=s.refused, session=s.session)  # fmt: skip
