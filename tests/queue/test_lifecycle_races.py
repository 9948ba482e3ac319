"""Pods finishing on their own at the moment their job kills them (a failure's policy, a task's
completion, minSuccess): the kill is asked for what the log showed running, and nobody answers
an eviction of a pod that has finished. The job must still end, or restart, as Volcano's does —
its job controller kills only live pods and counts what finished (reviewer's t9, t14–t17)."""

from __future__ import annotations

from msgspec.structs import replace

from contracts.events import EvictionRequested, JobPhaseChanged, JobSubmitted, TaskFinished
from contracts.workloads import JobSpec, TaskSpec
from services.core.scheduling import snapshot as st
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import put
from tests.queue.test_queue_service import drain, job_events, run_tasks, started


def two_tasks(name: str, policies: tuple = (), max_retry: int = 3, a_policies: tuple = ()) -> JobSpec:
    """Task a (1 pod) and task b (3 pods), a gang of 4 — the reviewer's t14."""
    return JobSpec(namespace="ns", name=name, queue="default", kind="Job", min_available=4, max_retry=max_retry,
                   policies=policies, tasks=(TaskSpec(name="a", replicas=1, cpu_milli=1000, policies=a_policies),
                                             TaskSpec(name="b", replicas=3, cpu_milli=1000)))  # fmt: skip


PODS = ["x-a-0", "x-b-0", "x-b-1", "x-b-2"]


def pods(name: str) -> list[str]:
    return [p.replace("x-", f"{name}-", 1) for p in PODS]


async def finish(log: EventLog, name: str, pod: str, code: int = 0) -> None:
    """A pod ending on its own (its process exits): no stop reason."""
    await put(log, log.subjects.job("ns", name), TaskFinished(namespace="ns", name=name, task=pod, node="n1",
                                                              exit_code=code))  # fmt: skip


def phases(events: list) -> list[tuple[str, str]]:
    return [(e.phase, e.reason) for e in events if isinstance(e, JobPhaseChanged)]


async def run_and_end_together(log: EventLog, name: str, first: int = 1, others: int = 0) -> None:
    """The job's 4 pods run; a-0 ends with `first`, the b pods with `others`, at one moment:
    their ends are in the log before the queue service's answer to a-0's."""
    await run_tasks(log, name, pods(name))
    for i, pod in enumerate(pods(name)):
        await finish(log, name, pod, first if i == 0 else others)


async def test_a_failing_job_ends_when_its_other_pods_succeed_as_it_fails(event_log: EventLog) -> None:
    """t14: maxRetry 1, PodFailed → RestartJob — Failing, its b pods evicted; they succeeded
    meanwhile. Before, Failing for ever (the evictions waited for an answer none gave)."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "f"),
              JobSubmitted(spec=two_tasks("f", (("PodFailed", "RestartJob"),), max_retry=1)))  # fmt: skip
    await run_and_end_together(event_log, "f")
    await drain(svc)
    events = await job_events(event_log, "f")
    assert sorted(e.task for e in events if isinstance(e, EvictionRequested)) == ["f-b-0", "f-b-1", "f-b-2"]
    assert [p for p, _ in phases(events)] == ["Running", "Failing", "Failed"]
    assert "ns/f" not in svc.flow.projection.jobs
    await started(event_log)  # replayed in log order (the ends before the evictions): nothing owed
    assert [p for p, _ in phases(await job_events(event_log, "f"))] == ["Running", "Failing", "Failed"]


async def test_an_aborting_job_ends_when_its_other_pods_succeed_as_it_aborts(event_log: EventLog) -> None:
    """t16: PodFailed → AbortJob, the other pods succeed together: Aborting, then Aborted."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "ab"), JobSubmitted(spec=two_tasks("ab", (("PodFailed", "AbortJob"),))))
    await run_and_end_together(event_log, "ab", first=2)
    await drain(svc)
    assert [p for p, _ in phases(await job_events(event_log, "ab"))] == ["Running", "Aborting", "Aborted"]
    assert "ns/ab" not in svc.flow.projection.jobs


async def test_a_completing_job_ends_when_its_workers_succeed_with_the_master(event_log: EventLog) -> None:
    """t15: master TaskCompleted → CompleteJob, the workers exit 0 at the same moment."""
    svc = await started(event_log)
    job = two_tasks("c", a_policies=(("TaskCompleted", "CompleteJob"),))
    await put(event_log, event_log.subjects.job("ns", "c"), JobSubmitted(spec=job))
    await run_and_end_together(event_log, "c", first=0)
    await drain(svc)
    assert [p for p, _ in phases(await job_events(event_log, "c"))] == ["Running", "Completing", "Completed"]
    tasks = [e for e in await job_events(event_log, "c") if isinstance(e, TaskFinished)]
    assert {e.exit_code for e in tasks} == {0} and len(tasks) == 4  # no kill said of a pod that succeeded


async def test_min_success_reached_as_the_others_succeed_completes_the_job(event_log: EventLog) -> None:
    """t9: minSuccess 2 of 4 replicas, all 4 finishing together."""
    svc = await started(event_log)
    job = replace(two_tasks("m"), min_success=2)
    await put(event_log, event_log.subjects.job("ns", "m"), JobSubmitted(spec=job))
    await run_and_end_together(event_log, "m", first=0)
    await drain(svc)
    assert [p for p, _ in phases(await job_events(event_log, "m"))] == ["Running", "Completing", "Completed"]
    assert "ns/m" not in svc.flow.projection.jobs


async def test_a_restart_as_other_pods_succeed_runs_them_all_again_and_counts_retries(event_log: EventLog) -> None:
    """t17: maxRetry 3, PodFailed → RestartJob, the b pods succeed as a-0 fails. Volcano's
    RestartJob kills Succeeded pods too: all 4 run again, and a-0 failing again is the next
    retry — Failed at the 3rd. Before, the b pods stayed Succeeded, the restart never ended,
    a-0 ran alone and failed for ever at retry 1/3."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "r"),
              JobSubmitted(spec=two_tasks("r", (("PodFailed", "RestartJob"),), max_retry=3)))  # fmt: skip
    for _ in range(3):
        await run_and_end_together(event_log, "r")
        await drain(svc)
        if "ns/r" in svc.flow.projection.jobs:  # restarted: every pod waits to run again
            assert {t.status for t in svc.flow.projection.tasks["ns/r"].values()} == {st.PENDING}
    got = phases(await job_events(event_log, "r"))
    assert got == [("Running", ""), ("Restarting", "RestartJob: retry 1/3"), ("Running", "restarted gang runs again"),
                   ("Restarting", "RestartJob: retry 2/3"), ("Running", "restarted gang runs again"),
                   ("Failing", "RestartJob on PodFailed"), ("Failed", "RestartJob on PodFailed; no unfinished pod left")]  # fmt: skip
    assert svc.flow.retries["ns/r"] == 3


async def test_restart_pod_counts_one_retry_for_pods_failing_together(event_log: EventLog) -> None:
    """t5: maxRetry 5, PodFailed → RestartPod, task a's 2 pods fail at one moment. Volcano's
    first failure moves the job to Restarting (retry+1); the second, while it restarts, is
    killed and made again without a retry: 5 runs, Failed at the 5th. Before, each failure
    was a retry (1/5 and 2/5 in one round), Failed after 3 runs."""
    svc = await started(event_log)
    job = JobSpec(namespace="ns", name="p", queue="default", kind="Job", min_available=3, max_retry=5,
                  policies=(("PodFailed", "RestartPod"),),
                  tasks=(TaskSpec(name="a", replicas=2, cpu_milli=1000), TaskSpec(name="b", replicas=1, cpu_milli=1000)))  # fmt: skip
    await put(event_log, event_log.subjects.job("ns", "p"), JobSubmitted(spec=job))
    await run_tasks(event_log, "p", ["p-b-0"])
    await drain(svc)
    runs = 0
    while "ns/p" in svc.flow.projection.jobs and runs < 10:
        runs += 1
        await run_tasks(event_log, "p", ["p-a-0", "p-a-1"])
        for pod in ("p-a-0", "p-a-1"):
            await finish(event_log, "p", pod, 1)
        await drain(svc)
        if svc.flow.shown["ns/p"] == "Failing":  # p-b-0 still runs: stopped, then Failed
            await put(event_log, event_log.subjects.job("ns", "p"), TaskFinished(
                namespace="ns", name="p", task="p-b-0", node="n1", exit_code=137, reason="evicted"))
            await drain(svc)
    assert runs == 5
    got = phases(await job_events(event_log, "p"))
    assert [r for p, r in got if p == "Restarting"] == [f"RestartPod: retry {i}/5" for i in range(1, 5)]
    assert [p for p, _ in got][-2:] == ["Failing", "Failed"]
    assert svc.flow.retries["ns/p"] == 5


async def test_a_resume_is_a_retry_and_fails_the_job_at_max_retry(event_log: EventLog) -> None:
    """Volcano's aborted state answers ResumeJob as a restart (retryCount+1, Restarting; Failed
    once the count reaches maxRetry). Before, a resume submitted the job again with its retry
    count reset to 0: suspend/resume wiped the restarts a job had spent."""
    svc = await started(event_log)
    s = event_log.subjects
    job = replace(two_tasks("s", (("PodFailed", "RestartJob"),), max_retry=3))
    await put(event_log, s.job("ns", "s"), JobSubmitted(spec=job))
    await run_tasks(event_log, "s", pods("s"))
    await finish(event_log, "s", "s-a-0", 1)  # a restart: retry 1/3
    await drain(svc)
    for pod in pods("s")[1:]:
        await put(event_log, s.job("ns", "s"), TaskFinished(namespace="ns", name="s", task=pod, node="n1",
                                                            exit_code=137, reason="evicted"))  # fmt: skip
    await run_tasks(event_log, "s", pods("s"))
    await drain(svc)
    assert svc.flow.retries["ns/s"] == 1
    for want in ("job ns/s resumed (ResumeJob: retry 2/3)", "job ns/s Failed (ResumeJob: retry 3/3, maxRetry reached)"):
        assert (await svc.command("suspend", "ns", "s")).ok
        for pod in pods("s"):
            await put(event_log, s.job("ns", "s"), TaskFinished(namespace="ns", name="s", task=pod, node="n1",
                                                                exit_code=137, reason="evicted"))  # fmt: skip
        await drain(svc)
        assert (await svc.command("resume", "ns", "s")).message == want
        await run_tasks(event_log, "s", pods("s"))
        await drain(svc)
    assert svc.flow.retries["ns/s"] == 3
    assert not (await svc.command("resume", "ns", "s")).ok  # failed: nothing to resume
    restarted = await started(event_log)  # the log alone gives the same count
    assert restarted.flow.retries["ns/s"] == 3
    assert phases(await job_events(event_log, "s"))[-1] == ("Failed", "ResumeJob: retry 3/3, maxRetry reached")


async def test_a_pod_failing_on_its_own_as_the_job_fails_stays_failed(event_log: EventLog) -> None:
    """maxRetry reached while the other pods fail too, at the same moment: Volcano's kill keeps
    a Failed pod as it is. Before, the late eviction made it a kill (`TaskFinished evicted`):
    `get pods` showed a pod that had failed with exit 1 as Evicted for the job's end."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "e"),
              JobSubmitted(spec=two_tasks("e", (("PodFailed", "RestartJob"),), max_retry=1)))  # fmt: skip
    await run_and_end_together(event_log, "e", first=1, others=1)
    await drain(svc)
    events = await job_events(event_log, "e")
    assert [p for p, _ in phases(events)] == ["Running", "Failing", "Failed"]
    assert not [e for e in events if isinstance(e, TaskFinished) and e.reason]  # no kill said


def waits_for_room(name: str, policies: tuple, max_retry: int = 3) -> JobSpec:
    """minAvailable 1: task a (1 pod) runs on its own while task b's pod waits for room."""
    return JobSpec(namespace="ns", name=name, queue="default", kind="Job", min_available=1, max_retry=max_retry,
                   policies=policies, tasks=(TaskSpec(name="a", replicas=1, cpu_milli=1000),
                                             TaskSpec(name="b", replicas=1, cpu_milli=2000)))  # fmt: skip


async def test_a_pod_run_again_after_its_restart_fails_on_a_retry(event_log: EventLog) -> None:
    """The reviewer's case: RestartJob, maxRetry 3; a-0 fails, b-0 is stopped for the restart
    and finds no room again (a higher-priority job took it), a-0 runs again and fails again.
    That is a new run's failure: a retry, Failed at the 3rd run. Before, the round lasted until
    b-0 was placed again, and each of a-0's failures meanwhile was restarted with it for free:
    a-0 failed every 4 s until the other job ended (53 runs of maxRetry 3)."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "w"), JobSubmitted(spec=waits_for_room("w", (("PodFailed", "RestartJob"),))))
    await run_tasks(event_log, "w", ["w-a-0", "w-b-0"])
    await finish(event_log, "w", "w-a-0", 1)
    await drain(svc)
    assert [e.task for e in await job_events(event_log, "w") if isinstance(e, EvictionRequested)] == ["w-b-0"]
    await put(event_log, s.job("ns", "w"), TaskFinished(namespace="ns", name="w", task="w-b-0", node="n1",
                                                        exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    for _ in range(2):  # a-0 alone runs again (w-b-0 stays Pending) and fails
        await run_tasks(event_log, "w", ["w-a-0"])
        await finish(event_log, "w", "w-a-0", 1)
        await drain(svc)
    got = phases(await job_events(event_log, "w"))
    assert [r for p, r in got if p == "Restarting"] == ["RestartJob: retry 1/3", "RestartJob: retry 2/3"]
    assert got[-1] == ("Failed", "RestartJob on PodFailed")
    assert svc.flow.retries["ns/w"] == 3
    assert "ns/w" not in svc.flow.projection.jobs


async def test_a_failure_after_the_round_ended_follows_its_own_policy(event_log: EventLog) -> None:
    """RestartPod for a-0's failure; a-0 waits for room, then b-0 — running all along — fails
    with an exit code whose policy is AbortJob. The round ended when a-0 was back to Pending
    (Volcano's Restarting leaves once nothing is terminating): b-0's failure is its own, and
    the job aborts. Before, any failure while a-0 waited was restarted with the round."""
    svc = await started(event_log)
    s = event_log.subjects
    job = waits_for_room("o", (("exitCode:3", "AbortJob"), ("PodFailed", "RestartPod")))
    await put(event_log, s.job("ns", "o"), JobSubmitted(spec=job))
    await run_tasks(event_log, "o", ["o-a-0", "o-b-0"])
    await finish(event_log, "o", "o-a-0", 1)
    await drain(svc)
    assert svc.flow.projection.tasks["ns/o"]["o-a-0"].status == st.PENDING
    await finish(event_log, "o", "o-b-0", 3)
    await drain(svc)
    got = phases(await job_events(event_log, "o"))
    # b-0 ran on through the round, enough for minAvailable 1: Running again once a-0 was
    # back to Pending, as Volcano's Restarting leaves for Running (running >= minAvailable)
    assert [p for p, _ in got] == ["Running", "Restarting", "Running", "Aborting", "Aborted"]
    assert svc.flow.retries["ns/o"] == 1


async def test_a_snapshot_keeps_where_the_restart_round_began(event_log: EventLog) -> None:
    """The stored state keeps where each job's last restart round began: a service started
    from it would count one more retry for a failure logged before the round (failing with
    the pod the round restarted)."""
    from services.queue.recovery import QueueFold, QueueState

    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "k"), JobSubmitted(spec=waits_for_room("k", (("PodFailed", "RestartPod"),))))
    await run_tasks(event_log, "k", ["k-a-0", "k-b-0"])
    await finish(event_log, "k", "k-a-0", 1)
    await drain(svc)
    fold = QueueFold(event_log.subjects, 100)
    back = fold.decode(fold.encode(QueueState(svc.flow)))
    assert back.flow.round_began == svc.flow.round_began and "ns/k" in back.flow.round_began
