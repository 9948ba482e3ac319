"""The scheduler skips a session when nothing waits (`ClusterProjection.waiting`, issue 29):
that is only sound if such a session would decide nothing. Every scenario table is run to its
end through the simulator; wherever its projection then says nothing waits, a session over it
must place, evict, enqueue and report nothing — and where something waits, it says so."""

from __future__ import annotations

from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from tests.core.scheduling.scenarios import _simulation
from tests.core.scheduling.test_scenarios import CASES


def test_a_session_over_a_projection_where_nothing_waits_decides_nothing() -> None:
    idle = waiting = 0
    for sc in CASES:
        sim = _simulation(sc, cycles=None)
        sim.run()
        snap = sim.projection.snapshot()
        d = decide(snap, parse_conf(sc.conf))
        if sim.projection.waiting():
            waiting += 1
            continue
        idle += 1
        assert not (d.placements or d.evictions or d.phases or d.unschedulable), (sc.table, sc.name, d)
        assert all(t.status != "Pending" for j in snap.jobs for t in j.tasks), (sc.table, sc.name)
    assert idle >= 20 and waiting >= 20, (idle, waiting)  # both sides of the rule are exercised


def _walked(projection: object) -> bool:
    """The rule itself, over every job (what `waiting` answered before it kept a worklist)."""
    from services.core.scheduling.snapshot import ENDING_PHASES, PENDING

    jobs, tasks = projection.jobs, projection.tasks  # type: ignore[attr-defined]
    return any(j.phase not in ENDING_PHASES and (j.phase == "Pending" or any(t.status == PENDING for t in tasks[k].values()))
               for k, j in jobs.items())  # fmt: skip


def test_the_worklist_answers_as_a_walk_over_every_job_after_every_event() -> None:
    """`waiting` looks only at the jobs touched since it last answered: after every event of
    every scenario (the simulator's fold), and asked at arbitrary points between, it says
    what a walk over every job says."""
    checked = answers = 0
    for n, sc in enumerate(CASES):
        sim = _simulation(sc, cycles=None)
        fold = sim.view.apply

        def apply(seq: int, event: object, fold=fold, sim=sim, n=n, sc=sc) -> object:  # type: ignore[no-untyped-def]
            nonlocal checked, answers
            moved = fold(seq, event)
            checked += 1
            if (seq + n) % 3 == 0:  # not after every event: touched jobs pile up in between
                answers += 1
                assert sim.projection.waiting() == _walked(sim.projection), (sc.table, sc.name, seq, event)
            return moved

        sim.view.apply = apply  # type: ignore[method-assign]
        sim.run()
        assert sim.projection.waiting() == _walked(sim.projection), (sc.table, sc.name)
    assert checked > 1000 and answers > 300, (checked, answers)
