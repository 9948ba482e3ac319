"""The session's job and queue heaps compare with one call of the order where a general heap
entry asks twice (issue 29): both orders end on a unique key, so they never tie two different
items. The pops must come out as the general entry gives them, and sorted by the order."""

from __future__ import annotations

import itertools

from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.decide import open_session
from services.core.scheduling.session import PriorityQueue, _Entry, _Ordered
from services.core.scheduling.statement import Statement
from tests.core.scheduling.test_trial import _gang, _nodes, _pod, _snapshot


def _session():  # type: ignore[no-untyped-def]
    work = "".join(_pod(f"p{i}", 1 + i % 3) for i in range(12)) + "".join(_gang(f"g{i}", 2 + i % 2, 2) for i in range(6))
    ssn = open_session(_snapshot(_nodes(4), work), parse_conf(DEFAULT_CONF))
    # some jobs hold cards (drf shares and gang readiness then differ between jobs)
    stmt = Statement(ssn)
    for key in ("default/p3", "default/p7", "default/g1", "default/g4"):
        job = ssn.jobs[key]
        for task in list(job.tasks.values())[:2]:
            node = next(n for n in ssn.node_list if ssn.bind_devices(task, n) is not None)
            stmt.allocate(task, node, ssn.bind_devices(task, node))
    return ssn


def _drain(q: PriorityQueue) -> list:  # type: ignore[type-arg]
    return [q.pop() for _ in range(len(q))]


def test_the_job_heap_pops_as_the_general_entry_does_and_in_the_sessions_order() -> None:
    ssn = _session()
    jobs = list(ssn.jobs.values())
    fast = PriorityQueue(ssn.job_order, jobs)
    general = PriorityQueue(lambda a, b: ssn.job_order(a, b), jobs)
    assert fast._entry is _Ordered and general._entry is _Entry
    popped = _drain(fast)
    assert [j.key for j in popped] == [j.key for j in _drain(general)]
    assert len({j.key for j in popped}) == len(jobs) == 18
    assert not any(ssn.job_order(b, a) for a, b in itertools.pairwise(popped))
    # gang: the jobs already ready come after every job still short of its minimum
    ready = [j.key for j in popped if ssn.plugins["gang"].job_ready(j)]  # type: ignore[attr-defined]
    assert sorted(ready) == ["default/g4", "default/p3", "default/p7"]  # g1 holds 2 of its 3
    assert [j.key for j in popped[-3:]] == ready


def test_a_heap_under_an_order_that_may_tie_keeps_asking_both_ways() -> None:
    ssn = _session()
    tasks = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    assert PriorityQueue(ssn.task_order, tasks)._entry is _Entry  # task uids need not be unique
    ties = PriorityQueue(lambda a, b: a % 3 < b % 3, range(9))  # equal keys: first pushed first
    assert _drain(ties) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
