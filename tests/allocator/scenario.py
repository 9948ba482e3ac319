"""Shared builders for allocator tests: an Ascend node, whole-card and template proposals."""

from __future__ import annotations

from contracts.base import Event
from contracts.devices import CardSpec, SliceSpec
from contracts.envelope import TYPE
from contracts.events import NodeRegistered, PlacementProposed, SliceAssignment, TaskPlacement
from contracts.registry import default_registry
from services.runtime.eventlog import Appended, Entry, EventLog, StoredMessage


def ascend_node(node: str, cards: int = 2) -> NodeRegistered:
    specs = tuple(
        CardSpec(
            uuid=f"{node}-Ascend910B3-{i}", node=node, index=i, type="Ascend910B3",
            vendor="huawei", memory=65536, cores=20, split_count=4, mode="template",
        )
        for i in range(cards)
    )  # fmt: skip
    return NodeRegistered(node=node, cpu_milli=192_000, memory_mib=1_500_000, cards=specs)


WHOLE = SliceSpec(kind="whole", memory=65536, cores=20, exclusive=True)
VIR05 = SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g")


def proposal(
    job: str, node: str, cards: list[int], slice_: SliceSpec = WHOLE, ns: str = "default"
) -> PlacementProposed:
    return PlacementProposed(
        namespace=ns,
        name=job,
        based_on=0,
        placements=tuple(
            TaskPlacement(
                task=f"worker-{i}",
                node=node,
                slices=(SliceAssignment(card=f"{node}-Ascend910B3-{c}", node=node, slice=slice_),),
            )
            for i, c in enumerate(cards)
        ),
    )


async def put(log: EventLog, subject: str, event: Event, mid: str = "") -> int:
    reg = default_registry()
    result = await log.append(
        Entry(subject, reg.encode(event), reg.envelope(event, msg_id=mid).to_headers())
    )
    assert isinstance(result, Appended)
    return result.seq


def decoded(messages: list[StoredMessage]) -> list[Event]:
    reg = default_registry()
    return [reg.decode(m.headers[TYPE], m.data) for m in messages]
