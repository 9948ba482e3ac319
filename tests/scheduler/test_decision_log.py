"""The scheduler's INFO log says what an operator wants once: a job placed, admitted, evicted,
or waiting for a reason its lines have not said yet (services/scheduler/tracing.py `say`).

Before, every `JobUnschedulable` the session appended was an INFO line of ~600 bytes, and one
is appended whenever the amounts in its rule move ("3/8 CardInsufficientMemory" → "4/8"),
which on a backlog is every waiting job after every placement: 500 one-second pods wrote
3,700 lines (1.9 MB) to scheduler.log (benchmarks/results/logvolume.md). The same lines go on
at DEBUG. Each line carries the job's trace id even with no exporter, so it joins `tessera
events` and traces (it was empty)."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace

from contracts.devices import SliceSpec
from contracts.events import (
    JobPhaseChanged,
    JobUnschedulable,
    PlacementProposed,
    SliceAssignment,
    TaskPlacement,
)
from contracts.subjects import Subjects
from services.core.scheduling.view import SchedulerView
from services.runtime.eventlog.model import StoredMessage
from services.runtime.telemetry import JsonFormatter, TraceIdFilter
from services.scheduler.tracing import JobTraces, decision_spans

SUBJECTS = Subjects("t")
TRACE = "0af7651916cd43dd8448eb211c80319c"
REFUSED = "queue resource quota insufficient or cluster overused"


def slices_taken(groups: str) -> str:
    return f"1/1 tasks in gang unschedulable: 0/2 nodes are unavailable: {groups}."


def taken(n: int, on: str) -> str:
    return (f"{n} 8/8 CardTimeSlicingExhausted: every slice is taken (4/4 slices used on {on}, 0 MB free; "
            "HAMi's per-node vDeviceCount sets the split count)")  # fmt: skip


def memory(n: int) -> str:
    return f"{n} 8/8 CardInsufficientMemory: no card has 16384 MB free ({n * 1000} MB at most)"


def waits(reason: str) -> JobUnschedulable:
    return JobUnschedulable(namespace="default", name="huge", reason=reason)


def placed(tasks: int = 1) -> PlacementProposed:
    return PlacementProposed(namespace="default", name="huge", based_on=1, placements=tuple(
        TaskPlacement(task=f"w-{i}", node="n1", score=1.0,
                      slices=(SliceAssignment(card=f"card-{i}", node="n1", slice=SliceSpec(kind="whole", memory=65536)),))
        for i in range(tasks)))  # fmt: skip


def session(traces: JobTraces, *events: object) -> None:
    tracer = trace.NoOpTracer()  # no exporter: the default
    decision_spans(tracer, trace.INVALID_SPAN, 0, events, SchedulerView(), traces, SUBJECTS)  # type: ignore[arg-type]


def said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and r.name == "services.scheduler.tracing"]


def test_a_waiting_job_is_said_once_per_change_of_reason_not_of_counts(caplog: pytest.LogCaptureFixture) -> None:
    traces = JobTraces()
    caplog.set_level(logging.DEBUG, logger="services.scheduler.tracing")
    sessions = [
        (waits(f"{REFUSED}; {slices_taken(taken(1, 'node-a-Ascend910B3-0') + ', ' + taken(1, 'node-b-Ascend910B3-0'))}"),),
        (waits(f"{REFUSED}; {slices_taken(taken(2, 'node-a-Ascend910B3-3'))}"),),  # counts and example moved
        (waits(REFUSED),),  # the trial's line comes and goes with the other jobs
        (waits(f"{REFUSED}; {slices_taken(taken(1, 'node-b-Ascend910B3-7'))}"),),
        (JobPhaseChanged(namespace="default", name="huge", phase="Inqueue"), waits(slices_taken(memory(2)))),
        (waits(slices_taken(memory(1))),),  # fewer nodes, same reason
        (waits(slices_taken(memory(1) + ", " + taken(1, "node-a-Ascend910B3-1"))),),  # a reason it did not have
        (waits(slices_taken(memory(2))),),  # said before
        (placed(),),
        (waits(slices_taken(memory(2))),),  # waiting again after its placement: news again
    ]
    for events in sessions:
        session(traces, *events)
    info = said(caplog, logging.INFO)
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in info] == [
        "unschedulable", "inqueue,unschedulable", "unschedulable", "placed", "unschedulable"]
    assert info[0].startswith(f"default/huge: unschedulable {REFUSED}; 1/1 tasks in gang")
    assert "CardTimeSlicingExhausted" in info[2]
    assert len(said(caplog, logging.DEBUG)) == len(sessions) - len(info)  # the rest, at DEBUG


def test_a_gang_placed_is_one_info_line_its_pods_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="services.scheduler.tracing")
    session(JobTraces(), placed(tasks=16))
    (line,) = said(caplog, logging.INFO)
    assert line == "default/huge: placed 16 pods on n1 (16 card slices)"
    pods = said(caplog, logging.DEBUG)
    assert len(pods) == 16 and pods[3] == "default/huge: pod w-3 on n1 cards card-3 score 1.0"


def test_a_decision_line_carries_the_jobs_trace_id_without_an_exporter(caplog: pytest.LogCaptureFixture) -> None:
    traces = JobTraces()
    traces.resume("default/huge", StoredMessage(3, "t.ev.job.default.huge", b"",
                                                {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}))  # fmt: skip
    caplog.set_level(logging.INFO, logger="services.scheduler.tracing")
    session(traces, placed())
    (record,) = [r for r in caplog.records if r.name == "services.scheduler.tracing"]
    TraceIdFilter().filter(record)  # what the services' handler does before formatting
    assert json.loads(JsonFormatter("scheduler").format(record))["trace_id"] == TRACE
