"""`pdb` (Volcano `plugins/pdb`): preemption and reclaim take no pod its PodDisruptionBudgets
do not allow to go. A call is offered, of a budget's pods, at most as many as it allows
(`status.disruptionsAllowed`; a pod the budget lists as already disrupted spends nothing).

Where Tessera reads more than Volcano's plugin: the allowance is what the budget says less its
pods already on their way out — evicted earlier in this session (Volcano gives every call the
whole allowance again, so a preemption over two nodes took two pods of a budget allowing one)
or by an earlier session before the disruption controller counted them (Releasing) — which
errs on the side of the budget until those pods are gone. Selectors read as policy/v1 and the
disruption controller read them: an empty one covers every pod of the namespace (Volcano's
plugin reads it as none, policy/v1beta1's way), and a pod without labels is covered by such a
one only (Volcano's plugin drops it from the victims). A Volcano Job's pods carry its
controller's labels (`volcano.sh/job-name`, `task-spec`…: a budget over a job selects them;
`TaskInfo.labels`)."""

from __future__ import annotations

from contracts.events import DisruptionBudgetChanged
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PluginConf
from services.core.scheduling.interpod import selects
from services.core.scheduling.model import TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT


class PdbPlugin:
    name = "pdb"

    def __init__(self, conf: PluginConf) -> None:
        self.kept: dict[str, str] = {}  # the session's (Session.kept)
        self.by_namespace: dict[str, list[DisruptionBudgetChanged]] = {}
        self.covered: dict[tuple[str, str], list[TaskInfo]] = {}  # budget → the pods it covers

    def on_session_open(self, ssn: Session) -> None:
        self.by_namespace, self.covered, self.kept = {}, {}, ssn.kept
        for b in ssn.snapshot.budgets:
            self.by_namespace.setdefault(b.namespace, []).append(b)
            self.covered[(b.namespace, b.name)] = []
        if not self.by_namespace:
            return
        for job in ssn.jobs.values():
            for t in job.tasks.values():
                for b in self.by_namespace.get(t.namespace, ()):
                    if selects(b.selector, t.labels):
                        self.covered[(b.namespace, b.name)].append(t)

    def allowed(self, tasks: list[TaskInfo], actor: TaskInfo | None = None) -> list[TaskInfo]:
        """The candidates within every budget that covers them, in order; the first one kept
        is said for `actor`'s job."""
        if not self.by_namespace:
            return tasks
        left: dict[tuple[str, str], int] = {}
        out = []
        for t in tasks:
            within = True
            for b in self.by_namespace.get(t.namespace, ()):
                if not selects(b.selector, t.labels) or t.pod in b.disrupted:
                    continue
                key = (b.namespace, b.name)
                if key not in left:
                    left[key] = b.allowed - sum(1 for c in self.covered[key]
                                                if c.status == st.RELEASING and c.pod not in b.disrupted)  # fmt: skip
                left[key] -= 1
                if left[key] < 0 and within and actor is not None:
                    self.kept.setdefault(actor.job, f"preemption held back: PodDisruptionBudget {b.namespace}/{b.name} "
                                                    f"allows {max(b.allowed, 0)} disruption(s) now, {t.pod} "
                                                    "would have gone (pdb)")  # fmt: skip
                within = within and left[key] >= 0
            if within:
                out.append(t)
        return out

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return self.allowed(preemptees, preemptor), PERMIT

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return self.allowed(reclaimees, reclaimer), PERMIT
