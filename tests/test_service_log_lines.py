"""What admission, the allocator and the queue service did is in their own logs at INFO, one
short line per object or job: admitted / rejected (with the rule), committed / refused (with
the reason), and a job's end. Before, none of the three wrote a line per job at the default
level, so a log shipper held the scheduler's verdicts and nothing of what followed them."""

from __future__ import annotations

import logging

import pytest

from contracts.events import JobSubmitted, TaskFinished
from services.runtime.eventlog import EventLog
from tests.admission.test_admission import BAD_POD, QUEUE, job
from tests.admission.test_admission import started as admission
from tests.allocator.scenario import ascend_node, proposal, put
from tests.allocator.test_allocator import drain as allocator_drain
from tests.queue.test_queue_service import drain as queue_drain
from tests.queue.test_queue_service import run_tasks, spec
from tests.queue.test_queue_service import started as queue_service


def lines(caplog: pytest.LogCaptureFixture, logger: str, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


async def test_admission_says_what_it_admitted_and_what_it_rejected_and_why(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    svc = await admission(event_log)
    caplog.set_level(logging.INFO, logger="services.admission.service")
    await svc.apply(QUEUE + "---" + job("team-a") + "---" + BAD_POD)
    await svc.apply(QUEUE, dry_run=True)
    await svc.apply(QUEUE)  # unchanged: nothing written, nothing said at INFO
    said = lines(caplog, "services.admission.service")
    assert said[:2] == ["admitted Queue team-a", "admitted Job ml/train"]
    (rejected,) = said[2:]
    assert rejected.startswith("rejected Pod default/bad-typo: ") and "resourcs" in rejected


async def test_the_allocator_says_each_commit_and_refusal(event_log: EventLog, caplog: pytest.LogCaptureFixture) -> None:
    from services.allocator.service import Allocator

    s = event_log.subjects
    alloc = Allocator(event_log)
    await put(event_log, s.node("n1"), ascend_node("n1"))
    await put(event_log, s.job("default", "train"), proposal("train", "n1", [0, 1]))
    await put(event_log, s.job("default", "late"), proposal("late", "n1", [1]))
    caplog.set_level(logging.INFO, logger="services.allocator.service")
    await allocator_drain(alloc)
    committed, refused = lines(caplog, "services.allocator.service")
    assert committed == "committed default/train 2 pods on n1 (2 card slices)"
    assert refused.startswith("refused default/late's proposal #") and "ExclusiveDeviceAllocateConflict" in refused


async def test_the_queue_service_says_a_jobs_end(event_log: EventLog, caplog: pytest.LogCaptureFixture) -> None:
    svc = await queue_service(event_log)
    s = event_log.subjects
    caplog.set_level(logging.DEBUG, logger="services.queue.service")
    await put(event_log, s.job("ns", "j"), JobSubmitted(spec=spec("j")))
    await run_tasks(event_log, "j", ["j-w-0", "j-w-1"])
    for p in ("j-w-0", "j-w-1"):
        await put(event_log, s.job("ns", "j"), TaskFinished(namespace="ns", name="j", task=p, node="n1"))
    await queue_drain(svc)
    assert lines(caplog, "services.queue.service") == ["job ns/j Completed (all pods finished)"]
    assert lines(caplog, "services.queue.service", logging.DEBUG) == ["job ns/j Running"]  # the commit says it
