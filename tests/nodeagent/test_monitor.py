"""Node liveness: heartbeats at virtual times → NodeLost exactly once, with the node's tasks."""

from __future__ import annotations

from contracts.events import NodeLost, NodeRegistered, TaskFinished, TaskStarted
from services.nodeagent.monitor import MonitorState, NodeMonitor, decide, evolve, heartbeat
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


async def test_monitor_shell_recovers_from_the_log_and_appends_the_loss_once() -> None:
    log = MemoryLog()
    s = log.subjects
    now = [100.0]
    await put(log, s.node("a"), NodeRegistered(node="a", cpu_milli=1, memory_mib=1))
    await put(log, s.job("ns", "j"), started("t0", "a"))
    monitor = NodeMonitor(log, timeout=10.0, clock=lambda: now[0])
    await monitor.recover()
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
    log = MemoryLog()
    s = log.subjects
    now = [100.0]
    await put(log, s.node("a"), NodeRegistered(node="a", cpu_milli=1, memory_mib=1))
    for t in ("t0", "t1", "t2"):
        await put(log, s.job("ns", "j"), started(t, "a"))
    monitor = NodeMonitor(log, timeout=10.0, clock=lambda: now[0])
    await monitor.recover()
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
