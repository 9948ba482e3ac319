"""A proposal waiting for the allocator is booked in the scheduler's view as if committed
(Volcano's "assume"), and stays booked whatever the card's ledger says before its answer.

The allocator registers a card's ledger (`CardRegistered`) when it reads the node's
registration, which can come after the scheduler — knowing the card from that registration —
has proposed a job onto it (a cluster's start, or a node joining while jobs wait). The
registration's empty usage freed the card in the view alone: the next session proposed another
job onto it, and the allocator refused that one (a stream of 500 Volcano Jobs on 500 nodes: 34
refusals, and a job left waiting)."""

from __future__ import annotations

from contracts.events import CardRegistered, JobSubmitted, PlacementProposed, QueueCreated
from contracts.workloads import DeviceRequest, JobSpec, QueueSpec, TaskSpec
from services.runtime.eventlog import MemoryLog
from services.scheduler.service import Scheduler
from tests.allocator.scenario import ascend_node, put


def one_card_job(name: str, card_uuid: str) -> JobSpec:
    """One whole card, that very one (HAMi's use-uuid): where the session puts it is no choice."""
    card = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory_pct=100, exclusive=True,
                         resource="huawei.com/Ascend910B3", use_uuids=(card_uuid,))  # fmt: skip
    task = TaskSpec(name="w", cpu_milli=1000, memory_mib=1024, devices=(card,), pod_names=(f"{name}-0",))
    return JobSpec(namespace="default", name=name, tasks=(task,))


async def test_a_cards_registration_after_a_proposal_on_it_keeps_the_card_booked() -> None:
    log = MemoryLog()
    s = log.subjects
    for q in ("root", "default"):
        await put(log, s.queue(q), QueueCreated(spec=QueueSpec(name=q, parent="" if q == "root" else "root")))
    node = ascend_node("n1", cards=2)  # (the queue's share is two cards: the second job is due one)
    card = node.cards[0].uuid
    await put(log, s.node("n1"), node)
    seq = await put(log, s.job("default", "first"), JobSubmitted(spec=one_card_job("first", card)))
    sched = Scheduler(log)
    await sched.recover()

    [first] = [o.event for o in sched.session_events() if isinstance(o.event, PlacementProposed)]
    assert first.placements[0].slices[0].card == card
    seq += 1
    sched._fold(seq, first)  # outstanding: the allocator has not answered yet
    seq += 1
    sched._fold(seq, CardRegistered(card=node.cards[0]))  # the ledger's genesis, usage empty
    seq += 1
    sched._fold(seq, JobSubmitted(spec=one_card_job("second", card)))

    proposed = [o.event for o in sched.session_events() if isinstance(o.event, PlacementProposed)]
    assert proposed == []  # the one card is the first job's until the allocator answers
