"""The scheduler's session metrics: Volcano's names where Volcano has the metric, Tessera's
where it does not (where a session's time goes).

The gauges of queues and waiting jobs are computed from each session's decisions
(`services.core.observe.volcano`) and exported at scrape time; the timings and attempt counts
are measured here, in the shell, because they are about the clock, not the decisions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from prometheus_client import Counter, Histogram

from services.core.observe import MetricSpec, Series, volcano
from services.runtime.metrics import ServiceMetrics


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """client_golang's `ExponentialBuckets`: `count` bounds, `start` then each `factor` × the last."""
    return [start * factor**i for i in range(count)]


#: Volcano's e2e session latency buckets (pkg/scheduler/metrics/metrics.go,
#: `ExponentialBuckets(5, 2, 15)`: 5 ms … 81,920 ms), so its dashboards' quantiles and any
#: `le` an alert names read the same; a session of several seconds (a backlog on 5,000 nodes,
#: benchmarks/results/scheduler.md) lands in a bucket of its own, not in +Inf
E2E_BUCKETS = exponential_buckets(5, 2, 15)


#: what the session loop found at its last turn (`Scheduler.run_sessions`), in its order of
#: checks: an operator tells a stuck scheduler (`catching_up` or `resyncing` for minutes, or
#: `holding` past its 30 s) from an idle one (`idle`: nothing waits; `settled`: jobs wait and
#: nothing changed that could place them) and from a standby replica
LOOP_STATES = ("starting", "holding", "standby", "resyncing", "catching_up", "idle", "settled",
               "deciding", "failed")  # fmt: skip

SPECS = (
    MetricSpec("tessera_leader",
               "1 while this replica holds its service's lease and decides, 0 on a standby",
               ("service",)),
    MetricSpec("tessera_scheduler_last_session_timestamp_seconds",
               "Unix time the last scheduling session closed (absent until the first)"),
    MetricSpec("tessera_scheduler_loop_state",
               "The session loop's state at its last turn: 1 on the current state, 0 on the others",
               ("state",)),
    MetricSpec("tessera_scheduler_loop_timestamp_seconds",
               "Unix time of the session loop's last turn (it turns at least once a period)"),
)  # fmt: skip


class SessionMetrics:
    """Registered on the scheduler's registry; `series` holds the last session's gauges."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        registry = metrics.registry
        # Volcano: one session from open to close, binding dispatch included, in ms
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
            buckets=E2E_BUCKETS, registry=registry,
        )  # fmt: skip
        self.attempts = Counter(
            "volcano_schedule_attempts",  # the client appends _total, as Volcano's name has it
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result"], registry=registry,
        )  # fmt: skip
        self.stages = Histogram(
            "tessera_session_seconds",
            "Time of one scheduling session by stage: decide (the pure session over the "
            "snapshot) and append (writing its decisions to the log)",
            ["stage"], registry=registry,
        )  # fmt: skip
        self.series: tuple[Series, ...] = ()  # replaced whole, never mutated (scrape thread)
        metrics.export(volcano.SPECS, lambda: self.series)
        #: whether this replica decides (the lease's holder, or no lease at all): set by the
        #: scheduler, asked at scrape time
        self.leader: Callable[[], bool] = lambda: True
        self.last_session: float | None = None  # time.time() the last session closed
        self.state = "starting"
        self.turned: float | None = None  # time.time() of the loop's last turn
        metrics.export(SPECS, self.liveness)

    def turn(self, state: str) -> None:
        """The session loop's turn and what it found (once per period or event batch)."""
        self.state, self.turned = state, time.time()

    def liveness(self) -> list[Series]:
        """The scheduler's own liveness gauges, at scrape time (`SPECS`)."""
        out = [Series("tessera_leader", ("scheduler",), 1.0 if self.leader() else 0.0)]
        if self.last_session is not None:
            out.append(Series("tessera_scheduler_last_session_timestamp_seconds", (), self.last_session))
        state = self.state
        out += [Series("tessera_scheduler_loop_state", (s,), 1.0 if s == state else 0.0) for s in LOOP_STATES]
        if self.turned is not None:
            out.append(Series("tessera_scheduler_loop_timestamp_seconds", (), self.turned))
        return out

    def session(self, decide_s: float, append_s: float, scheduled: int, unschedulable: int,
                series: Sequence[Series]) -> None:  # fmt: skip
        self.e2e.observe((decide_s + append_s) * 1000)
        self.stages.labels("decide").observe(decide_s)
        self.stages.labels("append").observe(append_s)
        self.attempts.labels("scheduled").inc(scheduled)
        self.attempts.labels("unschedulable").inc(unschedulable)
        self.series = tuple(series)
        self.last_session = time.time()

    def gauges(self, series: Sequence[Series]) -> None:
        """The gauges alone, of a session opened and closed with no actions (nothing waits):
        no session latency or attempts observed (`Scheduler._refresh_gauges`)."""
        self.series = tuple(series)

    def failed(self) -> None:
        self.attempts.labels("error").inc()
