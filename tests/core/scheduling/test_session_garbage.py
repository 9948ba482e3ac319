"""A session's graph is freed by reference counting as `decide` returns, not by the collector.

The plugins keep the session and the session its plugins; while that cycle stood, everything a
session built (nodes, cards, jobs, tasks, resource vectors) waited for a cyclic collection,
and the young collection after every session walked all of it: ~20 % on top of a session at
5,000 nodes (benchmarks/results/k8s.md, session 40). The collector is off while `decide` runs
and a collection right after it must find nothing, under every configuration the
node-cache tests use, with and without the memo the scheduler service keeps.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from services.core.scheduling.decide import decide
from services.core.scheduling.memo import SessionMemo
from services.runtime.collector import paused
from tests.core.scheduling.test_node_cache import _conf, random_snapshot, refusing


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    with paused():  # as the scheduler service runs `decide`
        yield


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("conf_name", ["default", "full", "allocate-twice"])
@pytest.mark.parametrize("with_memo", [False, True])
def test_a_session_leaves_nothing_for_the_cyclic_collector(
    collector_off: None, seed: int, conf_name: str, with_memo: bool
) -> None:
    snap = random_snapshot(seed)
    if seed % 2:
        snap = refusing(snap)  # enqueue refuses some: the trial placements run too
    conf = _conf(conf_name)
    memo = SessionMemo() if with_memo else None
    decide(snap, conf, memo=memo)  # first: lazy imports make their classes once
    gc.collect()
    decisions = decide(snap, conf, memo=memo)
    assert decisions.placements or decisions.unschedulable  # the session did work
    assert gc.collect() == 0
