"""The queue service over the log: default queues once, PodGroup and job phases, lifecycle
policies, queue close/open and job suspend/resume/delete — each owed event appended once."""

from __future__ import annotations

from msgspec.structs import replace

from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    PlacementCommitted,
    QueueCreated,
    QueueStateChanged,
    TaskFinished,
    TaskPlacement,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.queue.service import QueueService
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import decoded, put
from tests.draining import drain as drained


def spec(name: str, replicas: int = 2, policies: tuple = (), max_retry: int = 3) -> JobSpec:
    task = TaskSpec(name="w", replicas=replicas, cpu_milli=1000, memory_mib=1024)
    return JobSpec(namespace="ns", name=name, queue="default", min_available=replicas,
                   tasks=(task,), policies=policies, max_retry=max_retry)  # fmt: skip


async def drain(svc: QueueService) -> None:
    """Handle every delivered event until the consumer has nothing more (the service's own
    appends included)."""
    await drained(svc.service, quiet=0.5)


async def started(log: EventLog) -> QueueService:
    svc = QueueService(log)
    await svc.recover()
    await drain(svc)
    return svc


async def job_events(log: EventLog, name: str) -> list:
    return decoded([m async for m in log.replay(1, log.subjects.job("ns", name))])


async def run_tasks(log: EventLog, name: str, pods: list[str]) -> None:
    s = log.subjects
    await put(log, s.job("ns", name), PlacementCommitted(namespace="ns", name=name, placements=tuple(
        TaskPlacement(task=p, node="n1") for p in pods)))  # fmt: skip
    for p in pods:
        await put(log, s.job("ns", name), TaskStarted(namespace="ns", name=name, task=p, node="n1"))


async def test_default_queues_are_created_once(event_log: EventLog) -> None:
    await started(event_log)
    await started(event_log)  # a restart finds them in the log
    created = decoded([m async for m in event_log.replay(1, event_log.subjects.all_queues())])
    assert sorted(e.spec.name for e in created if isinstance(e, QueueCreated)) == ["default", "root"]


async def test_job_runs_then_completes_once(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "j"), JobSubmitted(spec=spec("j")))
    await run_tasks(event_log, "j", ["j-w-0", "j-w-1"])
    await drain(svc)
    phases = [e.phase for e in await job_events(event_log, "j") if isinstance(e, JobPhaseChanged)]
    assert phases == ["Running"]
    for p in ("j-w-0", "j-w-1"):
        await put(event_log, s.job("ns", "j"),
                  TaskFinished(namespace="ns", name="j", task=p, node="n1", exit_code=0))  # fmt: skip
    await drain(svc)
    await started(event_log)  # a restart owes nothing more
    phases = [(e.phase, e.reason) for e in await job_events(event_log, "j")
              if isinstance(e, JobPhaseChanged)]  # fmt: skip
    assert phases == [("Running", ""), ("Completed", "all pods finished")]  # once: the job's end says it


async def test_restart_policy_then_failed_at_max_retry(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    # maxRetry 2 is two runs: Volcano counts the restart, then fails the job at maxRetry
    job = spec("r", policies=(("PodFailed", "RestartJob"),), max_retry=2)
    await put(event_log, s.job("ns", "r"), JobSubmitted(spec=job))
    await run_tasks(event_log, "r", ["r-w-0", "r-w-1"])
    await put(event_log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-0", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)
    events = await job_events(event_log, "r")
    evicted = [e.task for e in events if isinstance(e, EvictionRequested)]
    assert evicted == ["r-w-1"]  # the live pod is stopped; the failed one goes back to Pending
    assert any(isinstance(e, TaskFinished) and e.reason == "restarted" and e.task == "r-w-0" for e in events)
    assert [e.phase for e in events if isinstance(e, JobPhaseChanged)][-1] == "Restarting"
    # the node agent reports the eviction; the job runs again and fails again: maxRetry 2 → Failed
    await put(event_log, s.job("ns", "r"), TaskFinished(namespace="ns", name="r", task="r-w-1",
                                                        node="n1", exit_code=137, reason="evicted"))  # fmt: skip
    await run_tasks(event_log, "r", ["r-w-0", "r-w-1"])
    await put(event_log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-1", node="n1", exit_code=2))  # fmt: skip
    await drain(svc)
    events = await job_events(event_log, "r")
    last = [e for e in events if isinstance(e, JobPhaseChanged)][-1]
    # r-w-0 still runs: Failing (its Volcano Job shows Failed) while it is stopped — the job
    # stays where the scheduler counts its pods on their nodes — then Failed
    assert (last.phase, last.reason) == ("Failing", "RestartJob on PodFailed")
    assert svc.flow.projection.jobs["ns/r"].phase == "Failing"
    # Volcano's status.retryCount at that failure is maxRetry: the restart is counted, then
    # its Restarting state finds maxRetry reached
    assert svc.flow.retries["ns/r"] == 2
    assert [e.task for e in events if isinstance(e, EvictionRequested)] == ["r-w-1", "r-w-0"]
    await put(event_log, s.job("ns", "r"), TaskFinished(namespace="ns", name="r", task="r-w-0",
                                                        node="n1", exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    last = [e for e in await job_events(event_log, "r") if isinstance(e, JobPhaseChanged)][-1]
    assert (last.phase, last.reason) == ("Failed", "RestartJob on PodFailed; no unfinished pod left")
    assert "ns/r" not in svc.flow.projection.jobs
    assert svc.flow.retries["ns/r"] == 2  # the Failed that ends Failing is the same restart


async def test_close_waits_for_podgroups_then_closed(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "c"), JobSubmitted(spec=spec("c", replicas=1)))
    await drain(svc)
    reply = await svc.command("close", "", "default")
    # not "closed": Closing while its job lives (and then Closed on its own)
    assert reply.ok and reply.message == ("queue default closing (1 job(s) still in it: Closed when they "
                                          "end; new jobs are refused now)")  # fmt: skip
    assert svc.flow.projection.queues["default"].state == "Closing"
    refused = await svc.command("close", "", "default")
    assert not refused.ok and "already Closing" in refused.message
    await run_tasks(event_log, "c", ["c-w-0"])
    await put(event_log, s.job("ns", "c"),
              TaskFinished(namespace="ns", name="c", task="c-w-0", node="n1"))  # fmt: skip
    await drain(svc)
    states = [e.state for e in decoded([m async for m in event_log.replay(1, s.queue("default"))])
              if isinstance(e, QueueStateChanged)]  # fmt: skip
    assert states == ["Closing", "Closed"]
    assert (await svc.command("open", "", "default")).ok
    assert (await svc.command("close", "", "default")).message == "queue default closed"  # empty: at once
    assert not (await svc.command("close", "", "root")).ok
    assert not (await svc.command("open", "", "nope")).ok


async def test_suspend_resume_delete(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "x"), JobSubmitted(spec=spec("x", replicas=1)))
    await run_tasks(event_log, "x", ["x-w-0"])
    await drain(svc)
    assert not (await svc.command("resume", "ns", "x")).ok
    assert (await svc.command("suspend", "ns", "x")).ok
    events = await job_events(event_log, "x")
    # Aborting while its pod stops — it holds its node until then, so the job stays in the
    # projection the scheduler places from — then Aborted (Volcano's aborting → aborted)
    assert (events[-2].phase, events[-2].reason) == ("Aborting", "suspended by user")
    assert isinstance(events[-1], EvictionRequested) and events[-1].task == "x-w-0"
    assert svc.flow.projection.jobs["ns/x"].phase == "Aborting"
    assert not (await svc.command("suspend", "ns", "x")).ok  # ending already
    await put(event_log, s.job("ns", "x"), TaskFinished(namespace="ns", name="x", task="x-w-0", node="n1",
                                                        exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    last = (await job_events(event_log, "x"))[-1]
    assert (last.phase, last.reason) == ("Aborted", "suspended by user; no unfinished pod left")
    assert "ns/x" not in svc.flow.projection.jobs
    restarted = await started(event_log)  # the suspended spec is known from the log alone
    assert (await restarted.command("resume", "ns", "x")).message == "job ns/x resumed (ResumeJob: retry 1/3)"
    resubmitted, restarting = (await job_events(event_log, "x"))[-2:]
    assert isinstance(resubmitted, JobSubmitted) and resubmitted.spec == spec("x", replicas=1)
    assert (restarting.phase, restarting.reason) == ("Restarting", "ResumeJob: retry 1/3")
    assert (await restarted.command("delete", "ns", "x")).ok
    assert isinstance((await job_events(event_log, "x"))[-1], JobDeleted)
    assert not (await restarted.command("delete", "ns", "x")).ok


async def test_two_pods_lost_together_restart_the_job_once(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    # a lost node's pods are evicted on a cluster: Volcano's PodEvicted
    await put(event_log, s.job("ns", "g"), JobSubmitted(spec=replace(spec("g", policies=(("PodEvicted", "RestartJob"),)), kind="Job")))
    await run_tasks(event_log, "g", ["g-w-0", "g-w-1"])
    for p in ("g-w-0", "g-w-1"):  # what the node monitor appends for a lost node
        await put(event_log, s.job("ns", "g"), TaskFinished(namespace="ns", name="g", task=p, node="n1",
                                                            exit_code=-1, reason="node lost"))  # fmt: skip
    await drain(svc)
    events = await job_events(event_log, "g")
    assert [e.reason for e in events if isinstance(e, JobPhaseChanged) and e.phase == "Restarting"] == [
        "RestartJob: retry 1/3"]  # fmt: skip
    tasks = svc.flow.projection.tasks["ns/g"]
    assert {t.status for t in tasks.values()} == {"Pending"}
    # back to Pending: the round is over (Volcano's Restarting leaves once none terminates),
    # not once they are placed again — a pod that found no room kept it open for ever
    assert "ns/g" not in svc.flow.restarting
    await run_tasks(event_log, "g", ["g-w-0", "g-w-1"])
    await put(event_log, s.job("ns", "g"), TaskFinished(namespace="ns", name="g", task="g-w-0", node="n1",
                                                        exit_code=-1, reason="node lost"))  # fmt: skip
    await drain(svc)  # the new run's loss is a new restart
    assert [e.reason for e in await job_events(event_log, "g") if isinstance(e, JobPhaseChanged)
            and e.phase == "Restarting"] == ["RestartJob: retry 1/3", "RestartJob: retry 2/3"]  # fmt: skip


async def test_a_failure_delivered_again_after_the_restart_restarts_nothing() -> None:
    """A pod failure the service already restarted the job for, delivered again once the job
    runs again (a restart of the service, a new durable consumer, long after the duplicate
    window — modelled by a log without de-duplication): no second restart, no retry spent."""
    from services.runtime.eventlog import MemoryLog

    log = MemoryLog(dedup=False)
    svc = await started(log)
    s = log.subjects
    job = spec("r", policies=(("PodFailed", "RestartJob"),), max_retry=3)
    await put(log, s.job("ns", "r"), JobSubmitted(spec=job))
    await run_tasks(log, "r", ["r-w-0", "r-w-1"])
    await put(log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-0", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)
    await put(log, s.job("ns", "r"), TaskFinished(namespace="ns", name="r", task="r-w-1",
                                                  node="n1", exit_code=137, reason="evicted"))  # fmt: skip
    await run_tasks(log, "r", ["r-w-0", "r-w-1"])  # running again after the restart
    await drain(svc)
    fresh = QueueService(log)  # a new durable: it sees the old failure again
    await fresh.recover()
    await drained(fresh.service, "queue-new")
    events = await job_events(log, "r")
    restarts = [e.reason for e in events if isinstance(e, JobPhaseChanged) and e.phase == "Restarting"]
    assert restarts == ["RestartJob: retry 1/3"]


async def test_queue_delete_follows_volcanos_webhook(event_log: EventLog) -> None:
    """Not default/root, not while it holds a job or has a child queue (issue 13, item 13)."""
    from contracts.events import QueueDeleted
    from contracts.workloads import QueueSpec

    svc = await started(event_log)
    s = event_log.subjects
    for q in (QueueSpec(name="team"), QueueSpec(name="child", parent="team")):
        await put(event_log, s.queue(q.name), QueueCreated(spec=q))
    await put(event_log, s.job("ns", "j"), JobSubmitted(spec=replace(spec("j", replicas=1), queue="child")))
    await drain(svc)
    refused = (await svc.command("delete", "", "default", "queue")).message
    assert refused == "queue `default` can not be deleted: pods and jobs that name no queue are put in it"
    assert "top of the queue tree" in (await svc.command("delete", "", "root", "queue")).message
    assert "child queues (child)" in (await svc.command("delete", "", "team", "queue")).message
    busy = await svc.command("delete", "", "child", "queue")
    assert not busy.ok and "it has 1 job(s) (ns/j)" in busy.message
    assert (await svc.command("delete", "ns", "j")).ok
    await drain(svc)
    assert (await svc.command("delete", "", "child", "queue")).message == "queue child deleted"
    assert (await svc.command("delete", "", "team", "queue")).ok
    deleted = [e.queue for e in decoded([m async for m in event_log.replay(1, s.all_queues())])
               if isinstance(e, QueueDeleted)]  # fmt: skip
    assert deleted == ["child", "team"]
    assert "team" not in (await started(event_log)).flow.projection.queues  # a restart agrees
    assert not (await svc.command("delete", "", "team", "queue")).ok


async def test_restarting_ends_when_the_restarted_gang_runs_again(event_log: EventLog) -> None:
    """The PodGroup stays Running through a restart, so the Job's `Restarting` must end on
    its own once the restarted pods run — also when the failed pod is placed again before the
    evicted one is gone (the order a cluster gives)."""
    svc = await started(event_log)
    s = event_log.subjects
    job = spec("g", policies=(("PodFailed", "RestartJob"),))
    await put(event_log, s.job("ns", "g"), JobSubmitted(spec=job))
    await run_tasks(event_log, "g", ["g-w-0", "g-w-1"])
    await put(event_log, s.job("ns", "g"),
              TaskFinished(namespace="ns", name="g", task="g-w-0", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)
    await run_tasks(event_log, "g", ["g-w-0"])  # placed again while g-w-1 is still stopping
    await put(event_log, s.job("ns", "g"), TaskFinished(namespace="ns", name="g", task="g-w-1",
                                                        node="n1", exit_code=-1, reason="pod deleted"))  # fmt: skip
    await drain(svc)
    phases = [e.phase for e in await job_events(event_log, "g") if isinstance(e, JobPhaseChanged)]
    assert phases[-1] == "Restarting"  # one pod runs, the gang of two does not yet
    await run_tasks(event_log, "g", ["g-w-1"])
    await drain(svc)
    await started(event_log)  # a restart owes nothing more
    phases = [(e.phase, e.reason) for e in await job_events(event_log, "g") if isinstance(e, JobPhaseChanged)]
    assert phases == [("Running", ""), ("Restarting", "RestartJob: retry 1/3"),
                      ("Running", "restarted gang runs again")]  # fmt: skip


async def test_a_message_delivered_twice_to_one_process_is_folded_once() -> None:
    """Within one process a message can come twice: a rider's part still unsettled after
    ack_wait (the status writer's evictions queued ahead), a nak after the fold. The second
    delivery folded the job's restart again — a retry spent twice, the job Failed at maxRetry
    a restart early."""
    from services.runtime.eventlog import MemoryLog

    log = MemoryLog(dedup=False)
    svc = await started(log)
    s = log.subjects
    await put(log, s.job("ns", "r"), JobSubmitted(spec=spec("r", policies=(("PodFailed", "RestartJob"),))))
    await run_tasks(log, "r", ["r-w-0", "r-w-1"])
    await put(log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-0", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)
    await drained(svc.service, "queue-again")  # the same messages, once more
    await put(log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-1", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)  # (the first restart is not over: its pods are not back, a second is not asked)
    await run_tasks(log, "r", ["r-w-0", "r-w-1"])
    await put(log, s.job("ns", "r"),
              TaskFinished(namespace="ns", name="r", task="r-w-0", node="n1", exit_code=1))  # fmt: skip
    await drain(svc)
    restarts = [e.reason for e in await job_events(log, "r") if isinstance(e, JobPhaseChanged) and e.phase == "Restarting"]
    assert restarts == ["RestartJob: retry 1/3", "RestartJob: retry 2/3"], restarts


async def test_task_completed_policy_ends_the_job_once(event_log: EventLog) -> None:
    """The last pod of a task succeeding raises TaskCompleted (Volcano's MPI example:
    `mpimaster: TaskCompleted → CompleteJob`): Completing with the workers evicted, then
    Completed; a task not complete yet, or a restart of the service, raises nothing more."""
    svc = await started(event_log)
    s = event_log.subjects
    job = JobSpec(namespace="ns", name="mpi", queue="default", kind="Job", min_available=3,
                  tasks=(TaskSpec(name="m", replicas=1, cpu_milli=1000, policies=(("TaskCompleted", "CompleteJob"),)),
                         TaskSpec(name="w", replicas=2, cpu_milli=1000)))  # fmt: skip
    await put(event_log, s.job("ns", "mpi"), JobSubmitted(spec=job))
    await run_tasks(event_log, "mpi", ["mpi-m-0", "mpi-w-0", "mpi-w-1"])
    await put(event_log, s.job("ns", "mpi"), TaskFinished(namespace="ns", name="mpi", task="mpi-m-0", node="n1"))
    await drain(svc)
    events = await job_events(event_log, "mpi")
    assert [e.task for e in events if isinstance(e, EvictionRequested)] == ["mpi-w-0", "mpi-w-1"]
    assert [(e.phase, e.reason) for e in events if isinstance(e, JobPhaseChanged)][-1] == \
        ("Completing", "CompleteJob on TaskCompleted")  # fmt: skip
    for pod in ("mpi-w-0", "mpi-w-1"):
        await put(event_log, s.job("ns", "mpi"), TaskFinished(namespace="ns", name="mpi", task=pod, node="n1",
                                                              exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    await started(event_log)
    phases = [e.phase for e in await job_events(event_log, "mpi") if isinstance(e, JobPhaseChanged)]
    assert phases == ["Running", "Completing", "Completed"], phases


async def test_an_abort_job_policy_aborts_through_aborting(event_log: EventLog) -> None:
    """`PodFailed → AbortJob`: Aborting while the job's other pods are stopped (they hold their
    nodes meanwhile), then Aborted; not a suspension, so nothing to resume."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "a"), JobSubmitted(spec=spec("a", policies=(("PodFailed", "AbortJob"),))))
    await run_tasks(event_log, "a", ["a-w-0", "a-w-1"])
    await put(event_log, s.job("ns", "a"), TaskFinished(namespace="ns", name="a", task="a-w-0", node="n1", exit_code=3))
    await drain(svc)
    events = await job_events(event_log, "a")
    assert [e.task for e in events if isinstance(e, EvictionRequested)] == ["a-w-1"]
    assert svc.flow.projection.jobs["ns/a"].phase == "Aborting"
    await put(event_log, s.job("ns", "a"), TaskFinished(namespace="ns", name="a", task="a-w-1", node="n1",
                                                        exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    phases = [(e.phase, e.reason) for e in await job_events(event_log, "a") if isinstance(e, JobPhaseChanged)]
    assert phases[-2:] == [("Aborting", "AbortJob on PodFailed"), ("Aborted", "AbortJob on PodFailed; no unfinished pod left")]
    assert not (await svc.command("resume", "ns", "a")).ok


async def test_a_lost_nodes_pods_are_made_again_without_a_policy(event_log: EventLog) -> None:
    """On a cluster a lost node's pods are evicted and Volcano's job controller makes them
    again (PodEvicted, no policy: SyncJob). On the simulated cluster they were PodFailed: never
    made again, and the job ended Failed once its other pods finished."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "l"), JobSubmitted(spec=replace(spec("l"), kind="Job")))
    await run_tasks(event_log, "l", ["l-w-0", "l-w-1"])
    await put(event_log, s.job("ns", "l"), TaskFinished(namespace="ns", name="l", task="l-w-0", node="n1",
                                                        exit_code=-1, reason="node lost"))  # fmt: skip
    await drain(svc)
    tasks = svc.flow.projection.tasks["ns/l"]
    assert tasks["l-w-0"].status == "Pending" and tasks["l-w-1"].status == "Running"
    assert svc.flow.retries.get("ns/l", 0) == 0  # the retry count unchanged
    assert not [e for e in await job_events(event_log, "l") if isinstance(e, JobPhaseChanged) and e.phase != "Running"]


async def test_a_job_resumed_while_it_is_being_suspended_runs_again_once_its_pods_stopped(event_log: EventLog) -> None:
    """`vcctl job suspend; vcctl job resume` before the pods stopped: Volcano's aborting state
    takes ResumeJob. The resume is said in the log at once (Aborting, resumed), and the job is
    submitted again once its pods are gone — also by a queue service restarted meanwhile."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "y"), JobSubmitted(spec=spec("y", replicas=1)))
    await run_tasks(event_log, "y", ["y-w-0"])
    await drain(svc)
    assert (await svc.command("suspend", "ns", "y")).ok
    assert (await svc.command("resume", "ns", "y")).ok
    assert not (await svc.command("resume", "ns", "y")).ok  # once
    assert svc.flow.projection.jobs["ns/y"].phase == "Aborting"  # its pod still holds its node
    svc = await started(event_log)
    await put(event_log, s.job("ns", "y"), TaskFinished(namespace="ns", name="y", task="y-w-0", node="n1",
                                                        exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    events = await job_events(event_log, "y")
    assert isinstance(events[-2], JobSubmitted) and events[-2].spec == spec("y", replicas=1)
    assert (events[-3].phase, events[-3].reason) == (
        "Aborted", "suspended by user; resumed by user; no unfinished pod left")  # fmt: skip
    assert (events[-1].phase, events[-1].reason) == ("Restarting", "ResumeJob: retry 1/3")  # a resume is a retry
    assert svc.flow.projection.jobs["ns/y"].phase == "Pending"


async def test_min_success_reached_completes_the_job_through_completing(event_log: EventLog) -> None:
    """minSuccess reached while a pod runs: Completing, saying so, with the running pod evicted
    (it holds its node until it stops), then Completed — the reason said "all pods finished"."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "m"), JobSubmitted(spec=replace(spec("m"), kind="Job", min_success=1)))
    await run_tasks(event_log, "m", ["m-w-0", "m-w-1"])
    await put(event_log, s.job("ns", "m"), TaskFinished(namespace="ns", name="m", task="m-w-0", node="n1"))
    await drain(svc)
    events = await job_events(event_log, "m")
    assert [e.task for e in events if isinstance(e, EvictionRequested)] == ["m-w-1"]
    last = [e for e in events if isinstance(e, JobPhaseChanged)][-1]
    assert (last.phase, last.reason) == ("Completing", "minSuccess 1 reached")
    await put(event_log, s.job("ns", "m"), TaskFinished(namespace="ns", name="m", task="m-w-1", node="n1",
                                                        exit_code=137, reason="evicted"))  # fmt: skip
    await drain(svc)
    last = [e for e in await job_events(event_log, "m") if isinstance(e, JobPhaseChanged)][-1]
    assert (last.phase, last.reason) == ("Completed", "minSuccess 1 reached; no unfinished pod left")


async def test_a_late_second_end_of_a_finished_pod_changes_nothing(event_log: EventLog) -> None:
    """A node monitor whose view lagged the log wrote "node lost" for a pod that had exited 0
    (nats-server frozen a minute under `tessera up`): the Succeeded pod turned Failed and its
    job was killed and run again from the start. A pod in a terminal phase never changes
    phase (k8s pod lifecycle), so no policy acts on its second end."""
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "r"), JobSubmitted(spec=replace(spec("r", policies=(
        ("PodEvicted", "RestartJob"), ("PodFailed", "RestartJob"))), kind="Job")))  # fmt: skip
    await run_tasks(event_log, "r", ["r-w-0", "r-w-1"])
    await put(event_log, s.job("ns", "r"), TaskFinished(namespace="ns", name="r", task="r-w-1", node="n1", exit_code=0))
    await put(event_log, s.job("ns", "r"), TaskFinished(namespace="ns", name="r", task="r-w-1", node="n1",
                                                        exit_code=-1, reason="node lost"))  # fmt: skip
    await drain(svc)
    tasks = svc.flow.projection.tasks["ns/r"]
    assert tasks["r-w-1"].status == "Succeeded" and tasks["r-w-0"].status == "Running"
    assert svc.flow.retries.get("ns/r", 0) == 0
    events = await job_events(event_log, "r")
    assert [e.phase for e in events if isinstance(e, JobPhaseChanged)] == ["Running"]
    assert not [e for e in events if isinstance(e, EvictionRequested | TaskFinished) and e.reason in ("restarted", "evicted")]
