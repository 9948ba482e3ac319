"""Hierarchical queues close and open together, as Volcano's queue controller has them
(`closeHierarchicalQueue`, `openHierarchicalQueue`, `syncHierarchicalQueue`): closing a parent
closes its open descendants, so the job webhook refuses new jobs in them; opening the parent
opens again those it closed, not one a user closed; a child is not opened under a closed
parent. Before, only the named queue changed: its children stayed Open and took jobs."""

from __future__ import annotations

from msgspec.structs import replace

from contracts.events import JobSubmitted, QueueCreated, QueueStateChanged
from contracts.workloads import QueueSpec
from services.core.scheduling import lifecycle
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import decoded, put
from tests.queue.test_queue_service import drain, spec, started


def states(svc) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {n: q.state for n, q in svc.flow.projection.queues.items() if n not in ("root", "default")}


async def test_closing_a_parent_closes_its_children_and_opening_it_opens_them_again(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    for q in (QueueSpec(name="p"), QueueSpec(name="c1", parent="p"), QueueSpec(name="c2", parent="p"),
              QueueSpec(name="g", parent="c2")):  # fmt: skip
        await put(event_log, s.queue(q.name), QueueCreated(spec=q))
    await put(event_log, s.job("ns", "j"), JobSubmitted(spec=replace(spec("j", replicas=1), queue="g")))
    await drain(svc)
    assert (await svc.command("close", "", "c1")).ok  # a user's own close: stays closed below
    reply = await svc.command("close", "", "p")
    assert reply.ok and reply.message == "queue p closed; with it its child queues c2 (Closed), g (Closing)"
    await drain(svc)
    assert states(svc) == {"p": "Closed", "c1": "Closed", "c2": "Closed", "g": "Closing"}
    refused = await svc.command("open", "", "c2")
    assert not refused.ok and refused.message == (
        "queue c2 can not be opened: its parent queue p is Closed; open the parent queue first")
    reply = await svc.command("open", "", "p")
    assert reply.ok and reply.message == "queue p opened; with it its child queues c2 (Open), g (Open)"
    await drain(svc)
    assert states(svc) == {"p": "Open", "c1": "Closed", "c2": "Open", "g": "Open"}
    restarted = await started(event_log)  # the log alone says which closed with their parent
    assert states(restarted) == states(svc)
    changes = [e for e in decoded([m async for m in event_log.replay(1, s.all_queues())]) if isinstance(e, QueueStateChanged)]
    assert [(e.queue, e.state, e.reason) for e in changes if e.queue == "g"] == [
        ("g", "Closing", f"{lifecycle.CLOSED_WITH_PARENT} c2"), ("g", "Open", f"{lifecycle.OPENED_WITH_PARENT} c2")]  # fmt: skip


async def test_a_queue_made_under_a_closed_parent_is_closed(event_log: EventLog) -> None:
    svc = await started(event_log)
    s = event_log.subjects
    await put(event_log, s.queue("p"), QueueCreated(spec=QueueSpec(name="p")))
    await drain(svc)
    assert (await svc.command("close", "", "p")).ok
    await put(event_log, s.queue("late"), QueueCreated(spec=QueueSpec(name="late", parent="p")))
    await drain(svc)
    assert states(svc) == {"p": "Closed", "late": "Closed"}
    assert (await svc.command("open", "", "p")).ok
    await drain(svc)
    assert states(svc) == {"p": "Open", "late": "Open"}
