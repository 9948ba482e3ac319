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
