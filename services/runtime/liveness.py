"""Is a service stuck, or idle? Gauges of its place in the log, read at scrape time.

A service's counters rise only when it handles something, so a quiet one reads the same
whether nothing happens or it stopped reading (the scheduler in issue 29's stuck state logged
"lease taken" and then nothing, `/readyz` ok). These say where it is: the NATS connection, the
highest log sequence it folded, the log's last sequence and how many messages of its subjects
it has still to handle, and when it last handled one. Nothing is counted per delivery beyond
two stores (`EventService.position` / `handled_at`); the log is asked at each scrape, on the
service's event loop (nats-py's connection belongs to it), with a short timeout: a scrape of a
service whose loop or broker does not answer leaves out the log's figures and says the rest.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from services.core.observe import MetricSpec, Series
from services.kube.reach import SPECS as REACH_SPECS
from services.kube.reach import Reachability
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.health import Health
from services.runtime.service import EventService

log = logging.getLogger(__name__)

SPECS = (
    MetricSpec("tessera_nats_connected", "1 while this service's NATS connection is up, else 0", ("service",)),
    MetricSpec("tessera_log_folded_sequence",
               "The highest log (stream) sequence this service has folded: recovered at start, "
               "handled since, or its durable consumer's acknowledged floor", ("service",)),
    MetricSpec("tessera_log_last_sequence", "The log's (stream's) last sequence, read at scrape time",
               ("service",)),
    MetricSpec("tessera_log_pending_messages",
               "Messages of this service's subjects in the log that it has not handled yet (its "
               "durable consumer's pending and unacknowledged; a follower's distance to the log's "
               "end): above 0 and not falling means it is stuck, 0 that it is caught up",
               ("service",)),
    MetricSpec("tessera_last_event_handled_timestamp_seconds",
               "Unix time this process last began handling a delivery (absent until the first)",
               ("service",)),
)  # fmt: skip

#: seconds a scrape waits for the log's answer (Prometheus' own scrape timeout is 10 s)
ASK_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class LogState:
    """What the log says at one scrape (None where it cannot say)."""

    last: int
    pending: int | None
    floor: int


class Liveness:
    """The gauges of one service process (`SPECS`), for `ServiceMetrics.export`."""

    def __init__(self, service: EventService, connected: Callable[[], bool],
                 loop: asyncio.AbstractEventLoop, timeout: float = ASK_TIMEOUT) -> None:  # fmt: skip
        self.service, self.connected, self.loop, self.timeout = service, connected, loop, timeout
        self.thread = threading.get_ident()  # the loop's (made on it): never asked from there

    def folded(self) -> int:
        """The highest sequence handled here, or recovered before following from the next."""
        svc = self.service
        return max(svc.position, svc.follow_from - 1)

    async def ask(self) -> LogState:
        """The log's last sequence and our backlog in it (runs on the service's loop)."""
        svc, event_log = self.service, self.service.log
        async with asyncio.timeout(self.timeout):
            if svc.follow_from or not isinstance(event_log, JetStreamLog):
                last = await event_log.last_sequence()
                # a follower of the whole log (the scheduler) is `last - folded` behind; of a
                # part of it, or carried by another's consumer, we cannot say from here
                whole = svc.follow_from and list(svc.filter_subjects) == [event_log.subjects.events]
                return LogState(last, max(last - self.folded(), 0) if whole else None, 0)
            stream = await event_log.js.stream_info(event_log.stream)
            if svc.carried:
                return LogState(stream.state.last_seq, None, 0)
            info = await event_log.js.consumer_info(event_log.stream, svc.durable)
            return LogState(stream.state.last_seq, (info.num_pending or 0) + (info.num_ack_pending or 0),
                            info.ack_floor.stream_seq if info.ack_floor else 0)  # fmt: skip

    def _log_state(self) -> LogState | None:
        """`ask` on the service's loop, from the scrape's thread (None: no answer in time)."""
        if not self.connected() or self.loop.is_closed():
            return None
        if threading.get_ident() == self.thread:
            return None  # never from the loop's own thread (it would wait on itself)
        try:
            return asyncio.run_coroutine_threadsafe(self.ask(), self.loop).result(self.timeout + 0.5)
        except Exception as exc:  # a timeout, the broker gone, a consumer not made yet
            log.debug("liveness: the log did not answer: %r", exc)
            return None

    def series(self) -> list[Series]:
        name = self.service.name
        connected = self.connected()
        out = [Series("tessera_nats_connected", (name,), 1.0 if connected else 0.0)]
        folded = self.folded()
        state = self._log_state()
        if state is not None:
            folded = max(folded, state.floor)
            out.append(Series("tessera_log_last_sequence", (name,), float(state.last)))
            if state.pending is not None:
                out.append(Series("tessera_log_pending_messages", (name,), float(state.pending)))
        out.append(Series("tessera_log_folded_sequence", (name,), float(folded)))
        if (at := self.service.handled_at) is not None:
            out.append(Series("tessera_last_event_handled_timestamp_seconds", (name,),
                              time.time() - (time.monotonic() - at)))  # fmt: skip
        return out


def watch(service: EventService, connected: Callable[[], bool]) -> Liveness:
    """Export `service`'s liveness gauges on its metrics (call on its running loop)."""
    assert service.metrics is not None
    live = Liveness(service, connected, asyncio.get_running_loop())
    service.metrics.export(SPECS, live.series)
    return live


def watch_reach(service: EventService, reach: Reachability, health: Health, unready_after: float) -> None:
    """The API server's reachability on `service`'s metrics and in its readiness: `/readyz`
    fails once the server has gone unanswered `unready_after` s; `/healthz` never reads it (the
    kubelet would restart a service whose cluster is away, and the restarted one would find it
    away too)."""
    assert service.metrics is not None
    service.metrics.export(REACH_SPECS, lambda: reach.series(service.name))
    health.problems.append(lambda: reach.problem(unready_after))
