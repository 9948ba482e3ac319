"""RestartJob, TerminateJob and CompleteJob asked for by a user (`tessera job restart|terminate|
complete`, a bus Command on a cluster): the queue service's command path over the log, without
a cluster — the same events the lifecycle policies append (volcano.md §1.3)."""

from __future__ import annotations

import msgspec

from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    TaskFinished,
)
from contracts.workloads import JobSpec
from services.core.scheduling import snapshot as st
from services.queue.recovery import QueueFold, QueueState
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import put
from tests.queue.test_queue_service import drain, job_events, run_tasks, spec, started


def phases(events: list) -> list[tuple[str, str]]:
    return [(e.phase, e.reason) for e in events if isinstance(e, JobPhaseChanged)]


async def evicted(log: EventLog, name: str, pod: str, reason: str = "evicted") -> None:
    """What the node agent reports for an eviction (`pod deleted` on a cluster)."""
    code = -1 if reason == "pod deleted" else 137
    await put(log, log.subjects.job("ns", name), TaskFinished(namespace="ns", name=name, task=pod, node="n1",
                                                              exit_code=code, reason=reason))  # fmt: skip


async def test_restart_kills_every_pod_and_counts_a_retry(event_log: EventLog) -> None:
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "r"), JobSubmitted(spec=spec("r")))
    await run_tasks(event_log, "r", ["r-w-0", "r-w-1"])
    await drain(svc)
    reply = await svc.command("restart", "ns", "r")
    assert reply.ok and reply.message == "job ns/r Restarting (RestartJob: retry 1/3)"
    assert not (await svc.command("restart", "ns", "r")).ok  # Restarting already
    events = await job_events(event_log, "r")
    assert sorted(e.task for e in events if isinstance(e, EvictionRequested)) == ["r-w-0", "r-w-1"]
    assert svc.flow.retries["ns/r"] == 1
    for pod in ("r-w-0", "r-w-1"):
        await evicted(event_log, "r", pod)
    await run_tasks(event_log, "r", ["r-w-0", "r-w-1"])
    await drain(svc)
    assert phases(await job_events(event_log, "r"))[-2:] == [
        ("Restarting", "RestartJob: retry 1/3"), ("Running", "restarted gang runs again")]  # fmt: skip


async def test_restart_runs_a_succeeded_pod_again(event_log: EventLog) -> None:
    """Volcano's RestartJob kills every pod (PodRetainPhaseNone), unlike Terminate/Abort which
    keep finished ones: a pod that succeeded before the restart runs again in the next try."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "s"), JobSubmitted(spec=spec("s", replicas=3)))
    await run_tasks(event_log, "s", ["s-w-0", "s-w-1", "s-w-2"])
    await put(event_log, event_log.subjects.job("ns", "s"), TaskFinished(namespace="ns", name="s", task="s-w-0", node="n1"))
    await drain(svc)
    assert svc.flow.projection.tasks["ns/s"]["s-w-0"].status == st.SUCCEEDED
    assert (await svc.command("restart", "ns", "s")).ok
    events = await job_events(event_log, "s")
    assert sorted(e.task for e in events if isinstance(e, EvictionRequested)) == ["s-w-1", "s-w-2"]
    again = [e for e in events if isinstance(e, TaskFinished) and e.reason == "restarted"]
    assert [e.task for e in again] == ["s-w-0"]
    assert svc.flow.projection.tasks["ns/s"]["s-w-0"].status == st.PENDING


async def test_restart_at_max_retry_fails_the_job(event_log: EventLog) -> None:
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "m"), JobSubmitted(spec=spec("m", max_retry=2)))
    await run_tasks(event_log, "m", ["m-w-0", "m-w-1"])
    await drain(svc)
    assert (await svc.command("restart", "ns", "m")).ok
    for pod in ("m-w-0", "m-w-1"):
        await evicted(event_log, "m", pod)
    await run_tasks(event_log, "m", ["m-w-0", "m-w-1"])
    await drain(svc)
    reply = await svc.command("restart", "ns", "m")  # the 2nd restart of maxRetry 2: as a policy would
    assert reply.ok and reply.message == "job ns/m Failing (RestartJob requested by user)"
    assert (await svc.command("restart", "ns", "m")).message == \
        "job ns/m is Failing already: RestartJob does not apply"  # fmt: skip
    for pod in ("m-w-0", "m-w-1"):
        await evicted(event_log, "m", pod)
    await drain(svc)
    assert "ns/m" not in svc.flow.projection.jobs
    refused = await svc.command("restart", "ns", "m")
    assert not refused.ok and refused.message == "job ns/m is Failed: RestartJob does not apply to a job that ended"


async def test_terminate_kills_unfinished_pods_keeps_finished_ones(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.job("ns", "t"), JobSubmitted(spec=spec("t", replicas=3)))
    await run_tasks(event_log, "t", ["t-w-0", "t-w-1"])  # t-w-2 waits
    await put(event_log, s.job("ns", "t"), TaskFinished(namespace="ns", name="t", task="t-w-0", node="n1"))
    await drain(svc)
    reply = await svc.command("terminate", "ns", "t")
    assert reply.ok and reply.message.startswith("job ns/t Terminating")
    events = await job_events(event_log, "t")
    assert [e.task for e in events if isinstance(e, EvictionRequested)] == ["t-w-1"]
    assert phases(events)[-1] == ("Terminating", "TerminateJob requested by user")
    refused = await svc.command("complete", "ns", "t")
    assert not refused.ok and "Terminating already" in refused.message
    # nothing of it is placed again while it ends: its waiting pod is not in a session's view
    (snap,) = [j for j in svc.flow.projection.snapshot().jobs if j.key == "ns/t"]
    assert sorted(t.pod for t in snap.tasks) == ["t-w-0", "t-w-1"]
    assert svc.flow.projection.tasks["ns/t"]["t-w-0"].status == st.SUCCEEDED  # kept
    await evicted(event_log, "t", "t-w-1")
    await drain(svc)
    assert phases(await job_events(event_log, "t"))[-1] == (
        "Terminated", "TerminateJob requested by user; no unfinished pod left")
    assert "ns/t" not in svc.flow.projection.jobs
    await started(event_log)  # a restart owes nothing more
    assert [p for p, _ in phases(await job_events(event_log, "t"))] == ["Terminating", "Terminated"]


async def test_complete_without_running_pods_ends_at_once(event_log: EventLog) -> None:
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "c"), JobSubmitted(spec=spec("c")))
    await drain(svc)
    assert (await svc.command("complete", "ns", "c")).ok
    assert phases(await job_events(event_log, "c")) == [
        ("Completing", "CompleteJob requested by user"), ("Completed", "CompleteJob requested by user")]  # fmt: skip
    assert "ns/c" not in svc.flow.projection.jobs


async def test_a_killed_pod_reporting_a_failure_is_no_failure_for_the_policies(event_log: EventLog) -> None:
    """On a cluster a pod deleted for the job's end reports exit -1: with PodFailed →
    RestartJob the job must still end Terminated, never restart; a restart of the service
    mid-way (replayed from the log) finishes the same way."""
    svc = await started(event_log)
    name = "k"
    await put(event_log, event_log.subjects.job("ns", name),
              JobSubmitted(spec=spec(name, policies=(("PodFailed", "RestartJob"),))))  # fmt: skip
    await run_tasks(event_log, name, ["k-w-0", "k-w-1"])
    await drain(svc)
    assert (await svc.command("terminate", "ns", name)).ok
    await evicted(event_log, name, "k-w-0", "pod deleted")
    await drain(svc)
    svc = await started(event_log)  # restarted mid-way
    assert svc.flow.ending["ns/k"][0] == "Terminating"
    await evicted(event_log, name, "k-w-1", "pod deleted")
    await drain(svc)
    events = await job_events(event_log, name)
    assert [p for p, _ in phases(events)] == ["Running", "Terminating", "Terminated"]
    assert svc.flow.retries.get("ns/k", 0) == 0
    assert sorted(e.task for e in events if isinstance(e, TaskFinished) and e.reason == "evicted") == [
        "k-w-0", "k-w-1"]  # fmt: skip


async def test_commands_that_do_not_apply_say_why(event_log: EventLog) -> None:
    svc = await started(event_log)
    for action in ("restart", "terminate", "complete"):
        reply = await svc.command(action, "ns", "ghost")
        assert not reply.ok and reply.message == "job ns/ghost not found"
    await put(event_log, event_log.subjects.job("ns", "s"), JobSubmitted(spec=spec("s")))
    await drain(svc)
    assert (await svc.command("suspend", "ns", "s")).ok
    reply = await svc.command("terminate", "ns", "s")
    assert not reply.ok and reply.message == "job ns/s is Aborted: TerminateJob does not apply to a job that ended"


async def test_a_snapshot_keeps_a_job_being_ended(event_log: EventLog) -> None:
    """The queue service's stored state carries what a Terminating job waits for."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "z"), JobSubmitted(spec=spec("z")))
    await run_tasks(event_log, "z", ["z-w-0", "z-w-1"])
    await drain(svc)
    assert (await svc.command("terminate", "ns", "z")).ok
    fold = QueueFold(event_log.subjects, 100)
    stored = fold.encode(QueueState(svc.flow))
    back = fold.decode(stored)
    assert back.flow.ending == svc.flow.ending == {"ns/z": ("Terminating", "TerminateJob requested by user")}
    assert back.flow.stopping == svc.flow.stopping == {"ns/z": {"z-w-0", "z-w-1"}}
    assert back.flow.shown == svc.flow.shown
    assert fold.encode(back) == stored


async def test_a_users_command_is_the_queues_not_a_sessions(event_log: EventLog) -> None:
    """A user's terminate writes a phase change and evictions; they name the queue service as
    their producer, so `replay --verify` does not report them as a scheduler's decisions
    without a session record (it counted every command-driven eviction so)."""
    from services.core.scheduling.verify import verify

    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "t"), JobSubmitted(spec=spec("t")))
    await run_tasks(event_log, "t", ["t-w-0", "t-w-1"])
    await drain(svc)
    before = await event_log.last_sequence()
    assert (await svc.command("terminate", "ns", "t")).ok
    stored = [m async for m in event_log.replay(1, event_log.subjects.job("ns", "t"))]
    written = [m for m in stored if m.seq > before]
    assert len(written) == 3  # Terminating, two evictions
    assert all(m.headers.get("Nats-Msg-Id", "").startswith("queue:cmd:") for m in written)
    assert len({m.headers["Nats-Msg-Id"] for m in written}) == 3
    decoded = [(m.seq, m.headers, svc.service.registry.decode(m.headers["Tessera-Type"], m.data)) for m in stored]
    assert verify(decoded).unrecorded == 0


def vcjob(job: JobSpec) -> JobSpec:
    return msgspec.structs.replace(job, kind="Job")


async def test_deleting_a_jobs_pod_by_its_name_is_answered_as_volcano_answers_podevicted(event_log: EventLog) -> None:
    """`tessera delete pod jc-w-0` named a pod `get pods` lists Running and was answered
    NotFound (the command took it for a job's name). As `kubectl delete pod` does under
    Volcano: the pod is stopped, and once the node reports it deleted the job controller's
    PodEvicted answer follows — made again (SyncJob, no retry spent) without a policy, the
    Job's PodEvicted policy when it has one. A pod not placed yet is made again at once; a
    finished one is refused with why; a name no job owns is still NotFound."""
    svc = await started(event_log)
    await put(event_log, event_log.subjects.job("ns", "jc-a"), JobSubmitted(spec=vcjob(spec("jc-a", replicas=3))))
    await run_tasks(event_log, "jc-a", ["jc-a-w-0", "jc-a-w-1"])
    await drain(svc)
    reply = await svc.command("delete", "ns", "jc-a-w-0", "pod")
    assert reply.ok, reply.message
    assert reply.message == ("pod ns/jc-a-w-0 deleted; its Volcano Job ns/jc-a answers PodEvicted once it "
                             "has stopped (the Job's PodEvicted policy, else the pod is made again)")  # fmt: skip
    [stop] = [e for e in await job_events(event_log, "jc-a") if isinstance(e, EvictionRequested)]
    assert (stop.task, stop.reason) == ("jc-a-w-0", st.POD_DELETED)
    await evicted(event_log, "jc-a", "jc-a-w-0", st.POD_DELETED)
    await drain(svc)
    assert svc.flow.projection.tasks["ns/jc-a"]["jc-a-w-0"].status == st.PENDING  # made again
    assert svc.flow.retries.get("ns/jc-a", 0) == 0 and "ns/jc-a" in svc.flow.projection.jobs
    pending = await svc.command("delete", "ns", "jc-a-w-2", "pod")  # never placed
    assert pending.ok and "makes it again at once" in pending.message
    await put(event_log, event_log.subjects.job("ns", "jc-a"),
              TaskFinished(namespace="ns", name="jc-a", task="jc-a-w-1", node="n1"))  # fmt: skip
    await drain(svc)
    done = await svc.command("delete", "ns", "jc-a-w-1", "pod")
    assert not done.ok and "has finished (Succeeded)" in done.message and "tessera delete job jc-a" in done.message
    assert (await svc.command("delete", "ns", "jc-a-w-9", "pod")).message == "job ns/jc-a-w-9 not found"
    # a pod named as the Job itself is no pod: the Job lives on (it was deleted whole)
    assert (await svc.command("delete", "ns", "jc-a", "pod")).message == "job ns/jc-a not found"
    assert not [e for e in await job_events(event_log, "jc-a") if isinstance(e, JobDeleted)]

    restarts = vcjob(spec("jr", policies=(("PodEvicted", "RestartJob"),)))
    await put(event_log, event_log.subjects.job("ns", "jr"), JobSubmitted(spec=restarts))
    await run_tasks(event_log, "jr", ["jr-w-0", "jr-w-1"])
    await drain(svc)
    assert (await svc.command("delete", "ns", "jr-w-1", "pod")).ok
    await evicted(event_log, "jr", "jr-w-1", st.POD_DELETED)
    await drain(svc)
    assert phases(await job_events(event_log, "jr"))[-1] == ("Restarting", "RestartJob: retry 1/3")
