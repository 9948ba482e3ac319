"""The allocator's view of a card never goes back to an older ledger event. After a conflict it
re-reads the cards of its batch one after another (`_refresh`); meanwhile its follower may fold a
newer event of a card whose read already returned — installing that read afterwards undid the
booking in the view for good, the follower having passed it (two racing allocators: a card a
replica had reserved shown free by the other, one run in seven)."""

from __future__ import annotations

from contracts.events import CardRegistered, SliceReserved
from services.allocator.service import Allocator
from services.core.ledger import CardState, RegisterCard, ReserveSlice, decide
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import WHOLE, ascend_node, put


async def test_a_read_older_than_the_view_is_not_installed(event_log: EventLog) -> None:
    s = event_log.subjects
    node = ascend_node("n1", cards=1)
    await put(event_log, s.node("n1"), node)
    spec = node.cards[0]
    (registered,) = decide(CardState(uuid=spec.uuid), RegisterCard(spec=spec))
    assert isinstance(registered, CardRegistered)
    subject = s.card("n1", spec.uuid)
    first = await put(event_log, subject, registered)
    (reserved,) = decide(CardState(uuid=spec.uuid, spec=spec), ReserveSlice(owner="default/a/w-0", slice=WHOLE))
    assert isinstance(reserved, SliceReserved)
    second = await put(event_log, subject, reserved)
    alloc = Allocator(event_log)
    await alloc.recover()
    assert alloc.cards[spec.uuid].usage.memory_used == WHOLE.memory and alloc.card_seq[spec.uuid] == second
    (older, _newer) = [m async for m in event_log.replay(first, subject)]
    assert older.seq == first  # what a read issued before the reservation landed returned
    await alloc._load(spec.uuid, older)  # the read arriving after the follower folded `second`
    assert alloc.cards[spec.uuid].usage.memory_used == WHOLE.memory and alloc.card_seq[spec.uuid] == second
