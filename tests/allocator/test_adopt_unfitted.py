"""Issue 22: a pod reported running on a node whose free cards its requests do not fit (here a
hami-core request on a node without hami-core: ModeNotFit) is not silently left cardless: the
allocator warns naming the pod and its node, and keeps its vendors' cards there out of use, so
the next pod waits instead of sharing a card the running pod may be using."""

from __future__ import annotations

import logging

import msgspec
import pytest

from contracts.events import PlacementCommitted, PlacementRejected, RunningTask
from contracts.workloads import DeviceRequest
from services.allocator.service import Allocator
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import ascend_node, decoded, proposal, put
from tests.allocator.test_allocator import drain

SOFT = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory=4000, cores=20,
                     mode="hami-core")  # fmt: skip


async def test_unfittable_running_pod_warns_and_keeps_its_cards(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    s = event_log.subjects
    alloc = Allocator(event_log)
    node = msgspec.structs.replace(
        ascend_node("n1"), running=(RunningTask(namespace="default", job="old", task="old", fit=(SOFT,)),)
    )
    await put(event_log, s.node("n1"), node)
    await put(event_log, s.job("default", "late"), proposal("late", "n1", [0]))
    with caplog.at_level(logging.WARNING, logger="services.allocator.service"):
        await drain(alloc)
    said = [r.getMessage() for r in caplog.records]
    assert any("running pod default/old on node n1" in w and "ModeNotFit" in w
               and "n1-Ascend910B3-0, n1-Ascend910B3-1 stay out of use" in w for w in said), said  # fmt: skip
    for uuid in ("n1-Ascend910B3-0", "n1-Ascend910B3-1"):
        assert alloc.cards[uuid].usage.owners == ("default/old/old",)
    jobs = decoded([m async for m in event_log.replay(1, s.all_jobs())])
    assert not [e for e in jobs if isinstance(e, PlacementCommitted) and e.name == "late"]
    rejected = [e for e in jobs if isinstance(e, PlacementRejected)]
    assert [r.name for r in rejected] == ["late"] and "n1-Ascend910B3-0" in rejected[0].reason
