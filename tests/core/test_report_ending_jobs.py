"""A job asked to end (terminate, complete) evicts its pods, and they are not made again: the
report (`get po`, `explain`) showed them `Pending … evicted`, as though they would run again,
because the pods ended while the job was still Terminating, not yet Terminated."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from contracts.events import EvictionRequested, JobPhaseChanged, TaskFinished
from contracts.subjects import Subjects
from services.cli.main import main
from services.core.simulate.jsonl import read_jsonl
from services.core.simulate.report import build_report
from services.runtime.eventlog import StoredMessage
from tests.processes import ROOT

EXAMPLES = ROOT / "examples"
JOB = "npu-train-job"


def _running_article(tmp_path: Path) -> list[StoredMessage]:
    log = tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(EXAMPLES / "inventory.yaml"), "--workload",
                 str(EXAMPLES / "article.yaml"), "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    return read_jsonl(log)


def _then(messages: list[StoredMessage], *events: object) -> list[StoredMessage]:
    seq = messages[-1].seq
    subject = Subjects().job("default", JOB)
    return [*messages, *(StoredMessage(seq + i, subject, msgspec.json.encode(e), {"Tessera-Type": type(e).__name__})
                         for i, e in enumerate(events, 1))]  # fmt: skip


@pytest.mark.parametrize(("ending", "ended", "why"), [("Terminating", "Terminated", "TerminateJob requested by user"),
                                                      ("Completing", "Completed", "CompleteJob requested by user")])  # fmt: skip
def test_pods_of_a_job_asked_to_end_read_evicted(tmp_path: Path, ending: str, ended: str, why: str) -> None:
    messages = _running_article(tmp_path)
    workers = [p for p in build_report(messages)["pods"] if p["job"] == JOB]
    assert len(workers) == 2 and {p["phase"] for p in workers} == {"Running"}
    events: list[object] = [JobPhaseChanged(namespace="default", name=JOB, phase=ending, reason=why)]
    events += [EvictionRequested(namespace="default", name=JOB, task=p["name"], reason=f"job {ending}: {why}")
               for p in workers]  # fmt: skip
    events += [TaskFinished(namespace="default", name=JOB, task=p["name"], node=p["node"], exit_code=137,
                            reason="evicted") for p in workers]  # fmt: skip
    during = {p["name"]: p for p in build_report(_then(messages, *events))["pods"] if p["job"] == JOB}
    after = {p["name"]: p for p in build_report(_then(messages, *events, JobPhaseChanged(
        namespace="default", name=JOB, phase=ended, reason=why)))["pods"] if p["job"] == JOB}  # fmt: skip
    for pods in (during, after):
        assert {p["phase"] for p in pods.values()} == {"Evicted"}, pods
        assert {p["reason"] for p in pods.values()} == {why}


def test_pods_of_a_restarting_job_wait_again(tmp_path: Path) -> None:
    """A restart evicts them to be made again: those do wait (the rule above is for endings)."""
    messages = _running_article(tmp_path)
    workers = [p for p in build_report(messages)["pods"] if p["job"] == JOB]
    events: list[object] = [JobPhaseChanged(namespace="default", name=JOB, phase="Restarting", reason="RestartJob")]
    events += [TaskFinished(namespace="default", name=JOB, task=p["name"], node=p["node"], exit_code=137,
                            reason="evicted") for p in workers]  # fmt: skip
    report = build_report(_then(messages, *events))
    pods = [p for p in report["pods"] if p["job"] == JOB]
    assert {p["phase"] for p in pods} == {"Pending"}
    # Volcano's status.retryCount (`describe vcjob` printed maxRetry only, though `job restart`
    # answers "retry 1/3")
    (job,) = [j for j in report["jobs"] if j["name"] == JOB]
    assert job["retries"] == 1
    assert "retries" not in next(j for j in build_report(messages)["jobs"] if j["name"] == JOB)


def test_the_restart_that_fails_a_job_is_counted(tmp_path: Path) -> None:
    """Volcano's status.retryCount of a job failed at maxRetry is maxRetry: the restart is
    counted before its Restarting state finds the limit. Failing then Failed is one restart."""
    messages = _running_article(tmp_path)
    restart = JobPhaseChanged(namespace="default", name=JOB, phase="Restarting", reason="RestartJob: retry 1/2")
    failing = JobPhaseChanged(namespace="default", name=JOB, phase="Failing", reason="RestartJob on PodFailed")
    failed = JobPhaseChanged(namespace="default", name=JOB, phase="Failed",
                             reason="RestartJob on PodFailed; no unfinished pod left")  # fmt: skip
    finished = JobPhaseChanged(namespace="default", name=JOB, phase="Failed", reason="all pods finished")

    def retries(*events: object) -> int:
        (job,) = [j for j in build_report(_then(messages, *events))["jobs"] if j["name"] == JOB]
        return int(job.get("retries", 0))

    assert retries(restart, failing, failed) == 2
    assert retries(restart, failed) == 2  # (no pod left running: Failed at once)
    assert retries(restart, finished) == 1  # a job failed by its pods' ends spent no retry


@pytest.mark.parametrize("late", ["killed", "evicted", "evicted-deleted", "deleted"])
def test_a_finished_pod_keeps_its_own_end_when_its_job_kills_it_late(tmp_path: Path, late: str) -> None:
    """A pod that succeeded, then a late stop for its job's end (a kill asked for what the log
    showed running): the projection, replay and audit keep its own end, and so does the report.
    Before, the report read the late `killed` first: `get pods` showed the Succeeded pod as
    `Failed killed: job finished` while replay had it Succeeded."""
    messages = _running_article(tmp_path)
    first, second = [p for p in build_report(messages)["pods"] if p["job"] == JOB]
    why = "TerminateJob requested by user"
    events: list[object] = [
        TaskFinished(namespace="default", name=JOB, task=first["name"], node=first["node"], exit_code=0),
        TaskFinished(namespace="default", name=JOB, task=second["name"], node=second["node"], exit_code=2),
        JobPhaseChanged(namespace="default", name=JOB, phase="Terminated", reason=why),
        TaskFinished(namespace="default", name=JOB, task=first["name"], node=first["node"], exit_code=137, reason=late),
        TaskFinished(namespace="default", name=JOB, task=second["name"], node=second["node"], exit_code=137, reason=late),
    ]  # fmt: skip
    pods = {p["name"]: p for p in build_report(_then(messages, *events))["pods"] if p["job"] == JOB}
    assert (pods[first["name"]]["phase"], pods[first["name"]]["reason"]) == ("Succeeded", "")
    assert (pods[second["name"]]["phase"], pods[second["name"]]["reason"]) == ("Failed", "exit code 2")
