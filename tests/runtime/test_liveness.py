"""A stuck service is told from an idle one on `/metrics` (services/runtime/liveness.py).

Before, every series of a quiet service was a counter that rises only when it handles
something, so a service that stopped reading read exactly as one with nothing to read. Now
each says at scrape time whether its NATS connection is up, how far it folded the log, where
the log ends, how many of its messages it has still to handle, and when it last took one up;
the scheduler also whether it holds the lease, when its last session closed and what its
session loop found at its last turn."""

from __future__ import annotations

import asyncio
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from contracts.events import JobSubmitted, PlacementProposed
from services.runtime import liveness
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import EventLog
from services.runtime.metrics import ServiceMetrics
from services.runtime.natsserver import free_port
from services.runtime.service import EventService, Received
from services.scheduler.service import Scheduler
from tests.allocator.scenario import put
from tests.processes import ServiceProcess, wait_until
from tests.scheduler.test_gauges import running
from tests.scheduler.test_scheduler_service import inference_job, seed

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {(x.name, tuple(sorted(x.labels.items()))): x.value
            for f in text_string_to_metric_families(text) for x in f.samples}  # fmt: skip


async def scrape(metrics: ServiceMetrics) -> Samples:
    """What `/metrics` serves, read as the probe server reads it: from another thread."""
    return parse((await asyncio.to_thread(metrics.exposition)).decode())


def of(got: Samples, name: str, service: str = "svc") -> float | None:
    return got.get((name, (("service", service),)))


def proposal(name: str) -> PlacementProposed:
    return PlacementProposed(namespace="ns", name=name, placements=(), based_on=1)


async def test_a_stuck_consumer_shows_its_backlog_and_where_it_stopped(jetstream_log: JetStreamLog) -> None:
    """A handler that does not return: the scrape says messages pending (at least the one in
    hand and the one behind it), the log's end beyond what it folded, and the connection up —
    and, once it goes on, 0 pending with everything folded."""
    log = jetstream_log
    stuck, release = asyncio.Event(), asyncio.Event()

    async def handler(event: PlacementProposed, rx: Received) -> None:
        if event.name == "j2":
            stuck.set()
            await release.wait()

    service = EventService(name="svc", log=log, filter_subjects=[log.subjects.events],
                           handlers={PlacementProposed: handler})  # type: ignore[dict-item]  # fmt: skip
    assert service.metrics is not None
    liveness.watch(service, lambda: log.nc.is_connected)
    seqs = [await put(log, log.subjects.job("ns", n), proposal(n)) for n in ("j1", "j2", "j3")]
    stopping = asyncio.Event()
    task = asyncio.create_task(service.run(stopping, poll=0.05))
    try:
        await asyncio.wait_for(stuck.wait(), 15)
        got = await scrape(service.metrics)
        assert of(got, "tessera_nats_connected") == 1
        assert of(got, "tessera_log_last_sequence") == seqs[-1]
        assert of(got, "tessera_log_folded_sequence") == seqs[0]
        # the one in hand and the one behind it (and j1's ack, which the consumer sends with
        # its next request, as the server counts it)
        assert (of(got, "tessera_log_pending_messages") or 0) >= 2
        taken = of(got, "tessera_last_event_handled_timestamp_seconds")
        assert taken is not None and taken <= time.time()
        release.set()

        async def caught_up() -> bool:
            now = await scrape(service.metrics)  # type: ignore[arg-type]
            return of(now, "tessera_log_pending_messages") == 0 and of(now, "tessera_log_folded_sequence") == seqs[-1]

        await wait_until(caught_up, 15, "the backlog handled")
    finally:
        release.set()
        stopping.set()
        await task


async def test_a_scrape_on_the_loops_own_thread_leaves_the_logs_figures_out(event_log: EventLog) -> None:
    """Asked from the event loop's thread the scrape would wait on itself: it says what it
    knows without asking the log (and never hangs)."""
    service = EventService(name="svc", log=event_log, filter_subjects=[event_log.subjects.events],
                           handlers={})  # fmt: skip
    assert service.metrics is not None
    liveness.watch(service, lambda: True)
    got = parse(service.metrics.exposition().decode())
    assert of(got, "tessera_nats_connected") == 1 and of(got, "tessera_log_folded_sequence") == 0
    assert of(got, "tessera_log_last_sequence") is None
    assert of(got, "tessera_last_event_handled_timestamp_seconds") is None  # nothing taken up yet


def loop_state(got: Samples) -> str:
    (state,) = [dict(labels)["state"] for (name, labels), v in got.items()
                if name == "tessera_scheduler_loop_state" and v == 1]  # fmt: skip
    return state


async def test_the_scheduler_says_whether_it_decides_waits_for_its_own_appends_or_has_nothing_to_do(
    event_log: EventLog,
) -> None:
    """Idle (nothing waits), settled (a job waits and nothing changed), catching up (its own
    decisions not back from the log: the stuck state an operator must tell from idle), the
    lease (none: it always decides), the last session's time, and a follower's backlog."""
    await seed(event_log)
    sched = Scheduler(event_log, period=0.05, debounce=0.01, gauge_every=0.05)
    await sched.recover()
    metrics = sched.service.metrics
    assert metrics is not None
    liveness.watch(sched.service, lambda: True)

    async def state_is(want: str) -> None:
        async def holds() -> bool:
            return loop_state(await scrape(metrics)) == want  # type: ignore[arg-type]

        await wait_until(holds, 15, f"loop state {want}")

    async with running(sched):
        await state_is("idle")
        got = await scrape(metrics)
        assert of(got, "tessera_leader", "scheduler") == 1
        assert ("tessera_scheduler_last_session_timestamp_seconds", ()) not in got  # no session yet
        last = await event_log.last_sequence()
        assert of(got, "tessera_log_last_sequence", "scheduler") == last
        assert of(got, "tessera_log_folded_sequence", "scheduler") == last
        assert of(got, "tessera_log_pending_messages", "scheduler") == 0
        s = event_log.subjects
        await put(event_log, s.job("default", "huge"), JobSubmitted(spec=inference_job("huge", replicas=9)))
        await state_is("settled")
        got = await scrape(metrics)
        closed = got[("tessera_scheduler_last_session_timestamp_seconds", ())]
        assert 0 < closed <= time.time()
        assert got[("tessera_scheduler_loop_timestamp_seconds", ())] >= closed
        sched.written = sched.view.seq + 1_000  # its appends, as if they never came back
        await put(event_log, s.job("default", "other"), JobSubmitted(spec=inference_job("other", replicas=9)))
        await state_is("catching_up")


async def test_a_standby_scheduler_says_it_is_not_the_leader(event_log: EventLog) -> None:
    class Held:
        held = staticmethod(lambda: False)

    sched = Scheduler(event_log, lease=Held())  # type: ignore[arg-type]
    assert sched.service.metrics is not None
    got = parse(sched.service.metrics.exposition().decode())
    assert of(got, "tessera_leader", "scheduler") == 0


def _scrape_http(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


async def test_a_service_process_serves_them(jetstream_log: JetStreamLog, nats_url: str) -> None:
    """Wired in every service's bootstrap: the scheduler process, holding its lease, caught up."""
    log = jetstream_log
    port = free_port()
    proc = ServiceProcess("services.scheduler", ["--nats", nats_url, "--root", log.subjects.root,
                                                 "--stream", log.stream, "--metrics-port", str(port)])  # fmt: skip
    try:
        await asyncio.to_thread(proc.start, "scheduler ready")

        async def led() -> bool:
            got = parse(await asyncio.to_thread(_scrape_http, port))
            return of(got, "tessera_leader", "scheduler") == 1 and of(
                got, "tessera_log_pending_messages", "scheduler") == 0  # fmt: skip

        await wait_until(led, 15, "the scheduler leads, caught up")
        got = parse(await asyncio.to_thread(_scrape_http, port))
    finally:
        proc.stop()
    assert of(got, "tessera_nats_connected", "scheduler") == 1
    last = await log.last_sequence()
    assert of(got, "tessera_log_last_sequence", "scheduler") == last > 0  # its configuration record
    assert of(got, "tessera_log_folded_sequence", "scheduler") == last
