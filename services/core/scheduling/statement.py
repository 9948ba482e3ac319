"""The all-or-nothing transaction of a session (Volcano `framework/statement.go`, STYLE §5).

Every operation changes the session view at once and is recorded; `discard()` undoes them in
reverse order, `commit()` hands allocations and evictions to the session's outputs. A gang is
committed only when `JobReady`, so it is never partially bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.events import SliceAssignment

if TYPE_CHECKING:
    from services.core.scheduling.model import NodeInfo, TaskInfo
    from services.core.scheduling.session import Session


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[str, TaskInfo, str]] = []  # (op, task, previous status)

    def allocate(self, task: TaskInfo, node: NodeInfo, slices: tuple[SliceAssignment, ...]) -> None:
        prev = task.status
        self.ssn.allocate_task(task, node, slices, pipelined=False)
        self.ops.append(("allocate", task, prev))

    def pipeline(self, task: TaskInfo, node: NodeInfo, slices: tuple[SliceAssignment, ...]) -> None:
        prev = task.status
        self.ssn.allocate_task(task, node, slices, pipelined=True)
        self.ops.append(("pipeline", task, prev))

    def evict(self, task: TaskInfo, reason: str, for_job: str = "") -> None:
        prev = task.status
        self.ssn.evict_task(task, reason, for_job)
        self.ops.append(("evict", task, prev))

    def discard(self) -> None:
        for op, task, prev in reversed(self.ops):
            if op == "evict":
                self.ssn.unevict_task(task, prev)
            else:
                self.ssn.deallocate_task(task, prev)
        self.ops.clear()

    def commit(self) -> None:
        for op, task, _ in self.ops:
            if op == "evict":
                self.ssn.committed_evictions.append(task)
            elif op == "allocate":
                self.ssn.committed_allocations.append(task)
        self.ops.clear()

    def merge(self, other: Statement) -> None:
        self.ops.extend(other.ops)
        other.ops.clear()
