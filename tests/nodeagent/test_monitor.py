"""Node liveness: heartbeats at virtual times → NodeLost exactly once, with the node's tasks."""

from __future__ import annotations

from contracts.events import NodeLost, NodeRegistered, TaskFinished, TaskStarted
from services.nodeagent.monitor import MonitorState, NodeMonitor, decide, evolve, heartbeat, reached
from services.runtime.eventlog import MemoryLog
from tests.allocator.scenario import decoded, put
from tests.processes import fail_once


def started(task: str, node: str) -> TaskStarted:
    return TaskStarted(namespace="ns", name="j", task=task, node=node)


def test_silent_node_is_lost_once_with_its_running_tasks() -> None:
    s = MonitorState(timeout=10.0)
    s = evolve(s, NodeRegistered(node="a", cpu_milli=1, memory_mib=1), at=0.0, epoch="r1")
    s = evolve(s, NodeRegistered(node="b", cpu_milli=1, memory_mib=1), at=0.0, epoch="r2")
    for task, node in (("t0", "a"), ("t1", "a"), ("t2", "b"), ("t3", "a")):
        s = evolve(s, started(task, node), at=0.0)
    s = evolve(s, TaskFinished(namespace="ns", name="j", task="t3", node="a"), at=1.0)
    for t in (3.0, 6.0, 9.0):
        s = heartbeat(s, "b", t)  # b keeps beating, a never does
        assert decide(s, t) == []  # a's clock started at its registration (0.0)
    assert decide(s, 10.0) == []  # exactly the timeout is still alive
    reports = decide(s, 10.5)
    assert [type(r.event).__name__ for r in reports] == ["NodeLost", "TaskFinished", "TaskFinished"]
    lost = reports[0].event
    assert isinstance(lost, NodeLost) and lost.node == "a" and "10.5s" in lost.reason
    assert [(r.event.task, r.event.exit_code, r.event.reason) for r in reports[1:]] == [
        ("t0", -1, "node lost"),
        ("t1", -1, "node lost"),
    ]
    assert [r.msg_id for r in reports] == [
        "nodelost/a/r1",
        "nodelost/a/r1/ns/j/t0",
        "nodelost/a/r1/ns/j/t1",
    ]
    for r in reports:
        s = evolve(s, r.event, at=10.5)
    for t in (11.0, 20.0, 100.0):
        s = heartbeat(s, "b", t)
        assert decide(s, t) == []  # once: a stays lost, b is alive
    assert decide(s, 200.0)[0].event == NodeLost(
        node="b", reason="no heartbeat for 100.0s (timeout 10s)"
    )


def test_a_lost_node_registering_again_is_watched_again_under_a_new_epoch() -> None:
    s = MonitorState(timeout=5.0)
    s = evolve(s, NodeRegistered(node="a", cpu_milli=1, memory_mib=1), at=0.0, epoch="r1")
    s = heartbeat(s, "zzz", 1.0)  # not registered: ignored
    assert set(s.nodes) == {"a"}
    s = evolve(s, decide(s, 6.0)[0].event, at=6.0)
    s = heartbeat(s, "a", 7.0)  # beating again, but lost until it registers
    assert decide(s, 20.0) == []
    s = evolve(s, NodeRegistered(node="a", cpu_milli=1, memory_mib=1), at=21.0, epoch="r2")
    assert decide(s, 25.0) == []
    assert [r.msg_id for r in decide(s, 26.5)] == ["nodelost/a/r2"]


async def running_on_a(*tasks: str) -> tuple[MemoryLog, NodeMonitor, list[float]]:
    """A log with node a and job ns/j's `tasks` started on it, and a monitor (10 s timeout)
    recovered from it on a clock the test moves (`now[0]`, at 100)."""
    log = MemoryLog()
    now = [100.0]
    await put(log, log.subjects.node("a"), NodeRegistered(node="a", cpu_milli=1, memory_mib=1))
    for t in tasks:
        await put(log, log.subjects.job("ns", "j"), started(t, "a"))
    monitor = NodeMonitor(log, timeout=10.0, clock=lambda: now[0])
    await monitor.recover()
    return log, monitor, now


async def test_monitor_shell_recovers_from_the_log_and_appends_the_loss_once() -> None:
    log, monitor, now = await running_on_a("t0")
    monitor.on_heartbeat("a")  # at 100
    now[0] = 109.0
    assert await monitor.check() == []
    now[0] = 111.0
    assert len(await monitor.check()) == 2
    assert await monitor.check() == []
    events = decoded([m async for m in log.replay()])
    assert [type(e).__name__ for e in events] == [
        "NodeRegistered",
        "TaskStarted",
        "NodeLost",
        "TaskFinished",
    ]
    fresh = NodeMonitor(log, timeout=10.0, clock=lambda: now[0] + 100)
    await fresh.recover()  # a restarted monitor reads the loss and does not repeat it
    assert await fresh.check() == []


async def test_events_redelivered_below_the_recovered_watermark_change_nothing() -> None:
    """A `TaskStarted` delivered again after recovery folded its `TaskFinished` (a restart, a
    new durable) must not mark the finished task running: the next loss of its node would fail
    it — and restart its job — once more."""
    from contracts.envelope import Envelope
    from services.runtime.service import Received

    log = MemoryLog()
    s = log.subjects
    await put(log, s.node("n1"), NodeRegistered(node="n1", cpu_milli=1, memory_mib=1))
    start_seq = await put(log, s.job("ns", "j"), started("t", "n1"))
    await put(log, s.job("ns", "j"), TaskFinished(namespace="ns", name="j", task="t", node="n1"))
    monitor = NodeMonitor(log, timeout=5.0, clock=lambda: 0.0)
    await monitor.recover()
    msg = next(m for m in log.messages() if m.seq == start_seq)
    await monitor.on_event(started("t", "n1"), Received(msg, Envelope.from_headers(msg.headers)))
    assert monitor.state.tasks == {}


async def test_a_loss_whose_task_report_failed_is_reported_whole_at_the_next_check() -> None:
    """The log out of reach for one append (a failover) in the middle of a node's loss, or the
    process killed there: the node was folded lost after its own report and never looked at
    again — its tasks stayed running in the log for good. A lost node's tasks still running are
    reported at the next check, and by a restarted monitor (the loss its node's last event)."""
    log, monitor, now = await running_on_a("t0", "t1", "t2")
    monitor.on_heartbeat("a")
    failed = fail_once(monitor.service, lambda out: getattr(out.event, "task", "") == "t1")
    now[0] = 111.0
    try:
        await monitor.check()
    except ConnectionError:
        pass
    assert [e.task for e in failed] == ["t1"]
    # killed now: t1 and t2 are told by the next process, from the node's last event (its loss)
    restarted = NodeMonitor(log, timeout=10.0, clock=lambda: now[0])
    await restarted.recover()
    assert [type(r.event).__name__ for r in await restarted.check()] == ["TaskFinished", "TaskFinished"]
    assert restarted.state.tasks == {} and await restarted.check() == []
    # and the first process, had it lived on: the same reports, de-duplicated by their ids
    await monitor.check()
    events = decoded([m async for m in log.replay()])
    assert [(type(e).__name__, getattr(e, "task", "")) for e in events[4:]] == [
        ("NodeLost", ""), ("TaskFinished", "t0"), ("TaskFinished", "t1"), ("TaskFinished", "t2")]  # fmt: skip


async def test_an_event_delivered_again_to_one_process_is_folded_once() -> None:
    """A `TaskStarted` delivered again after its task's `TaskFinished` was folded (a host's nak,
    a part unsettled past ack_wait): the task ran again in the monitor's view, and the next
    loss of its node failed it — and restarted its job — once more."""
    from contracts.envelope import Envelope
    from services.runtime.service import Received

    log = MemoryLog()
    s = log.subjects
    await put(log, s.node("n1"), NodeRegistered(node="n1", cpu_milli=1, memory_mib=1))
    monitor = NodeMonitor(log, timeout=5.0, clock=lambda: 0.0)
    await monitor.recover()
    start = await put(log, s.job("ns", "j"), started("t", "n1"))
    end = await put(log, s.job("ns", "j"), TaskFinished(namespace="ns", name="j", task="t", node="n1"))
    by_seq = {m.seq: m for m in log.messages()}
    for seq, event in ((start, started("t", "n1")), (end, TaskFinished(namespace="ns", name="j", task="t", node="n1")),
                       (start, started("t", "n1"))):  # fmt: skip
        msg = by_seq[seq]
        await monitor.on_event(event, Received(msg, Envelope.from_headers(msg.headers)))
    assert monitor.state.tasks == {}


def test_silence_while_the_monitor_cannot_reach_the_bus_is_not_the_nodes_fault() -> None:
    """nats-server frozen for 60 s (SIGSTOP): the monitor heard no heartbeat and declared every
    node lost, failing every running pod. While its own round trips fail it decides nothing,
    and once it can hear again a node's silence counts from then: a whole timeout to beat."""
    s = MonitorState(timeout=10.0)  # blind after a 5 s gap
    s = evolve(s, NodeRegistered(node="a", cpu_milli=1, memory_mib=1), at=0.0, epoch="r1")
    s = evolve(s, NodeRegistered(node="b", cpu_milli=1, memory_mib=1), at=0.0, epoch="r2")
    s = evolve(s, started("t0", "a"), at=0.0)
    for t in (1.0, 2.0, 3.0):
        s = reached(heartbeat(heartbeat(s, "a", t), "b", t), t)
    for t in (8.0, 14.0, 30.0, 60.0):  # the bus frozen: no round trip, no heartbeat
        assert decide(s, t) == [], t
    s = reached(s, 61.0)  # it hears the bus again; nobody has beaten yet
    assert decide(s, 61.0) == [] and decide(s, 71.0) == []
    s = reached(heartbeat(s, "b", 62.0), 62.0)  # b's beat arrives, a's never does
    for t in range(63, 72):
        s = reached(s, float(t))
    assert [(type(r.event).__name__, getattr(r.event, "node", "")) for r in decide(s, 71.5)] == [
        ("NodeLost", "a"), ("TaskFinished", "a")]  # fmt: skip
    assert "10.5s" in decide(s, 71.5)[0].event.reason  # type: ignore[union-attr]


def test_a_short_gap_between_round_trips_changes_nothing() -> None:
    """Only a gap longer than the blind gap (half the timeout) restarts the nodes' clocks: a
    node silent across a monitor's slow check is still lost on time."""
    s = MonitorState(timeout=10.0)
    s = evolve(s, NodeRegistered(node="a", cpu_milli=1, memory_mib=1), at=0.0, epoch="r1")
    s = reached(s, 0.0)
    s = reached(s, 4.5)  # a slow check: 4.5 s between round trips, under the 5 s gap
    for t in (7.0, 9.0, 10.4):
        s = reached(s, t)
    assert [r.msg_id for r in decide(s, 10.5)] == ["nodelost/a/r1"]


async def test_a_task_that_ended_in_the_log_is_not_ended_again_by_a_lagging_monitor() -> None:
    """The monitor's view lags the log (its consumer behind, or cut off): a task that had
    ended with exit 0 was reported ended again, exit -1 "node lost", and its Succeeded pod
    turned Failed (its job restarted). Before writing a lost task's end the monitor reads the
    job's subject: an ended task is left alone, a running one ends once."""
    log, monitor, now = await running_on_a("t0", "t1")
    s = log.subjects
    monitor.on_heartbeat("a")
    # t0 ends in the log; the monitor's consumer has not delivered it yet
    await put(log, s.job("ns", "j"), TaskFinished(namespace="ns", name="j", task="t0", node="a"))
    now[0] = 111.0
    written = await monitor.check()
    assert [(type(r.event).__name__, getattr(r.event, "task", "")) for r in written] == [
        ("NodeLost", ""), ("TaskFinished", "t1")]  # fmt: skip
    ends = [e for e in decoded([m async for m in log.replay()]) if isinstance(e, TaskFinished)]
    assert [(e.task, e.exit_code) for e in ends] == [("t0", 0), ("t1", -1)]
    assert monitor.state.tasks == {} and await monitor.check() == []


async def test_a_job_that_moves_while_its_lost_tasks_are_written_is_read_again() -> None:
    """A task's end appended between the monitor's read of the job and its write (the node
    agent's last word racing the loss) makes the write a conflict, not a second end: the next
    check reads the job again and finds the task ended."""
    from services.runtime.eventlog import Conflict

    log, monitor, now = await running_on_a("t0")
    s = log.subjects
    publish = monitor.service.publish
    raced: list[object] = []

    async def racing(out, cause=None, index=0):  # type: ignore[no-untyped-def]
        if isinstance(out.event, TaskFinished) and not raced:  # the agent's end lands first
            await put(log, s.job("ns", "j"), TaskFinished(namespace="ns", name="j", task="t0", node="a"))
            raced.append(result := await publish(out, cause, index))
            return result
        return await publish(out, cause, index)

    monitor.service.publish = racing  # type: ignore[method-assign]
    now[0] = 111.0
    assert [type(r.event).__name__ for r in await monitor.check()] == ["NodeLost"]
    assert isinstance(raced[0], Conflict)
    assert await monitor.check() == []
    ends = [e for e in decoded([m async for m in log.replay()]) if isinstance(e, TaskFinished)]
    assert [(e.task, e.exit_code) for e in ends] == [("t0", 0)]
