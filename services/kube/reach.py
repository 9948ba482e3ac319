"""Does the API server answer? One process's view, from every request its client makes.

During an API-server outage of 24 s every service answered `/readyz` 200, no metric said
anything, and the logs got one WARNING per watch per second (655 lines; an hour's outage would
be ~100k) and never a line saying since when the server was gone or when it came back. What an
SRE has from kube-scheduler and client-go instead, and what this gives:

- one WARNING when the first request goes unanswered ("unreachable since …") and one INFO at
  the first answer after it ("reachable again after N s"), per process, whatever the number of
  watches (each reflector stays quiet about failures this already said, and backs off);
- `unreachable_for()`: what readiness reads (not ready once the server has been gone longer
  than `--kube-unready-after`; liveness never reads it, so the kubelet restarts nothing —
  a restart would not bring the API server back);
- `series()`: `tessera_kube_api_reachable` and `tessera_kube_requests_total{method,code}`, the
  latter as client-go's `rest_client_requests_total` counts (code `<error>` for no answer).

An answer of any status is "reachable": a 403 or a 500 is the server speaking (its own errors
are counted by code). The clock is passed in, so tests need no sleeps.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable

from services.core.observe import MetricSpec, Series
from services.runtime.waits import within

log = logging.getLogger("services.kube.client")

#: the `code` of a request that got no answer (client-go's word in rest_client_requests_total)
NO_ANSWER_CODE = "<error>"
#: seconds the API server may be unreachable before a service says it is not ready (the default
#: of `--kube-unready-after`): longer than a blip or an API server's rolling restart, shorter
#: than a kubelet's default readiness window for a rollout to notice
UNREADY_AFTER = 10.0

SPECS = (
    MetricSpec("tessera_kube_api_reachable",
               "1 while this service's requests to the Kubernetes API server get answers, 0 from "
               "the first one unanswered (refused, cut, timed out) until the next answer", ("service",)),
    MetricSpec("tessera_kube_api_unreachable_seconds",
               "Seconds since the API server last answered, while it does not (else 0)", ("service",)),
    MetricSpec("tessera_kube_requests_total",
               "Requests to the Kubernetes API server by method (WATCH for a watch) and answer "
               "status code, <error> for no answer (client-go's rest_client_requests_total)",
               ("service", "method", "code"), kind="counter"),
)  # fmt: skip


class Reachability:
    """Whether the API server answers; `answered`/`unanswered` are called by the client for
    every request, on its event loop (the scrape thread only reads)."""

    def __init__(self, host: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.host, self.clock = host, clock
        self.since: float | None = None  # clock of the first unanswered request of an outage
        self.since_wall = ""
        self.cause = ""
        self.unanswered_count = 0  # requests unanswered in the current (or last) outage
        self.outages = 0
        #: (method, code) -> requests; only ever inserted into on the loop, copied whole by the
        #: scrape (a dict copy of str-keyed entries holds the GIL throughout)
        self.requests: dict[tuple[str, str], int] = {}
        self._back: asyncio.Event | None = None
        #: the two lines at DEBUG (a one-shot CLI command says its own error instead)
        self.quiet = False

    @property
    def down(self) -> bool:
        return self.since is not None

    def answered(self, method: str, status: int) -> None:
        key = (method, str(status))
        self.requests[key] = self.requests.get(key, 0) + 1
        if self.since is None:
            return
        log.log(logging.DEBUG if self.quiet else logging.INFO, "API server %s reachable again after %.0f s (unreachable since %s, %d requests "
                 "unanswered)", self.host, self.clock() - self.since, self.since_wall,
                 self.unanswered_count)  # fmt: skip
        self.since = None
        if self._back is not None:
            self._back.set()
            self._back = None

    def unanswered(self, method: str, cause: BaseException | str) -> None:
        key = (method, NO_ANSWER_CODE)
        self.requests[key] = self.requests.get(key, 0) + 1
        if self.since is not None:
            self.unanswered_count += 1
            return
        self.since = self.clock()
        self.since_wall = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.cause = cause if isinstance(cause, str) else repr(cause)
        self.unanswered_count = 1
        self.outages += 1
        log.log(logging.DEBUG if self.quiet else logging.WARNING, "API server %s unreachable since %s (%s): requests and watches retried with "
                    "backoff; said again when it answers", self.host, self.since_wall, self.cause)  # fmt: skip

    def unreachable_for(self) -> float:
        """Seconds since the first unanswered request of this outage (0 while it answers)."""
        return 0.0 if self.since is None else max(0.0, self.clock() - self.since)

    def problem(self, limit: float) -> str:
        """Readiness' words: '' while the server answers or has been gone `limit` s or less."""
        gone = self.unreachable_for()
        if self.since is None or gone <= limit:
            return ""
        return f"Kubernetes API server {self.host} unreachable for {gone:.0f}s (since {self.since_wall}: {self.cause})"

    async def wait_answered(self, timeout: float) -> None:
        """Sleep `timeout` s, or less if another request gets an answer meanwhile: a reflector
        backed off to 30 s resumes as soon as any request of the process sees the server back."""
        if self.since is None:
            await asyncio.sleep(timeout)
            return
        if self._back is None:
            self._back = asyncio.Event()
        try:
            await within(self._back.wait(), timeout)
        except TimeoutError:
            pass

    def series(self, service: str) -> list[Series]:
        out = [Series("tessera_kube_api_reachable", (service,), 0.0 if self.down else 1.0),
               Series("tessera_kube_api_unreachable_seconds", (service,), self.unreachable_for())]  # fmt: skip
        for (method, code), n in sorted(dict(self.requests).items()):
            out.append(Series("tessera_kube_requests_total", (service, method, code), float(n)))
        return out
