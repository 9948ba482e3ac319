"""`cdp`, cooldown protection (Volcano `plugins/cdp`): a running pod whose label or annotation
`volcano.sh/cooldown-time` (a Go duration) has not passed since it started is no victim of
preemption or reclaim, so an elastic job's pods brought back are not taken again at once.

Volcano counts from the pod's PodScheduled transition; Tessera from its start in the log
(`TaskStarted.at`, the kubelet's Running, a little later), kept for such pods only
(`Snapshot.started`). The session's clock is the service's wall clock (scheduler/service.py),
so the protection ends on a quiet cluster too. An unparsable duration protects nothing, as in
Volcano (which logs it; admission warns of it)."""

from __future__ import annotations

from services.core.godurations import go_duration
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import PERMIT


def cooldown_text(task: TaskInfo) -> str | None:
    """The pod's cooldown time as written, label first (as Volcano reads it); None: none."""
    raw = task.spec.labels.get(st.COOLDOWN_TIME)
    return task.spec.annotations.get(st.COOLDOWN_TIME) if raw is None else raw


def cooldown_of(task: TaskInfo) -> float | None:
    """Seconds of the pod's cooldown time; None when it has none (or no valid one)."""
    raw = cooldown_text(task)
    return None if raw is None else go_duration(raw)


class CdpPlugin:
    name = "cdp"

    def __init__(self, conf: PluginConf) -> None:
        self.now = 0.0
        self.started: dict[str, float] = {}
        self.kept: dict[str, str] = {}  # the session's (Session.kept)

    def on_session_open(self, ssn: Session) -> None:
        self.now, self.started, self.kept = ssn.now, ssn.snapshot.started, ssn.kept

    def cooling(self, task: TaskInfo) -> bool:
        """Still within its cooldown time (only a running pod is protected)."""
        if task.status != st.RUNNING:
            return False
        cooldown = cooldown_of(task)
        since = self.started.get(task.uid)
        return cooldown is not None and since is not None and since + cooldown > self.now

    def revisit_at(self, ssn: Session) -> float | None:
        """When the first pod still cooling stops cooling: it may be taken from then on, so an
        unchanged cluster needs no session before it (scheduler/service.py)."""
        ends = []
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if self.cooling(task) and (cooldown := cooldown_of(task)) is not None:
                    ends.append(self.started[task.uid] + cooldown)
        return min(ends, default=None)

    def _filter(self, actor: TaskInfo, tasks: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        out = []
        for t in tasks:
            if not self.cooling(t):
                out.append(t)
            elif actor.job not in self.kept:  # (words that do not change while it cools: no new event)
                self.kept[actor.job] = (f"preemption held back: {t.pod} is within its cooldown time "
                                        f"({st.COOLDOWN_TIME}: {cooldown_text(t)} from its start; cdp)")  # fmt: skip
        return out, PERMIT

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return self._filter(preemptor, preemptees)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        return self._filter(reclaimer, reclaimees)
