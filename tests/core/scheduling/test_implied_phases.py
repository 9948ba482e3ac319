"""Phases a proposal or a commit implies (issue 29: two messages per pod fewer for every reader).

A session that admits a job and proposes it says so on the proposal (`admits`), and a commit
says the fold derives the PodGroup's phase (`sets_phase`): no `JobPhaseChanged` Inqueue from
the scheduler, no Running from the queue service. These hold them to the events they stand
for, over every scenario table's simulated log: at each commit the fold goes Running exactly
when the queue service, given the same commit without the flag, would have written Running,
and leaves it nothing to write; a proposal admits exactly a job that was still Pending; a
log whose configuration record predates the rule still verifies, with its own Inqueue events.
"""

from __future__ import annotations

import copy

import msgspec
import pytest

from contracts.events import JobPhaseChanged, PlacementCommitted, PlacementProposed
from services.cli.replay import decoded
from services.core.scheduling.decisions import Decisions, JobPlacement, PhaseChange
from services.core.scheduling.record import decision_events
from services.core.scheduling.verify import verify
from services.queue import flow as fl
from tests.core.scheduling.scenarios import engine_log, load_tables
from tests.core.scheduling.test_scenarios import TABLES

CASES = load_tables(*TABLES)


def _running_owed(flow: fl.Flow, key: str) -> bool:
    return any(isinstance(e, JobPhaseChanged) and e.phase == "Running" for e in fl.job_events(flow, key))


def test_a_commit_runs_its_job_exactly_when_the_queue_would_have() -> None:
    ran = waited = admitted = 0
    for sc in CASES:
        flow = fl.Flow()
        for seq, _headers, event in decoded(engine_log(sc))[0]:
            if isinstance(event, PlacementCommitted):
                assert event.sets_phase
                key = f"{event.namespace}/{event.name}"
                before = flow.projection.jobs[key].phase if key in flow.projection.jobs else None
                old = copy.deepcopy(flow)  # the same commit as logs before the flag carry it
                old.apply(seq, msgspec.structs.replace(event, sets_phase=False))
                owed = key not in old.ending and _running_owed(old, key)
                flow.apply(seq, event)
                after = flow.projection.jobs[key].phase if key in flow.projection.jobs else None
                assert (after == "Running" != before) == owed, (sc.name, seq, before, after, owed)
                assert not _running_owed(flow, key), (sc.name, seq)
                if owed:
                    assert flow.shown[key] == "Running"
                ran += owed
                waited += not owed
                continue
            if isinstance(event, PlacementProposed) and event.admits:
                assert flow.projection.jobs[f"{event.namespace}/{event.name}"].phase == "Pending"
                admitted += 1
            flow.apply(seq, event)
            if isinstance(event, PlacementProposed) and event.admits:
                assert flow.shown[f"{event.namespace}/{event.name}"] == "Inqueue"
    # the tables run jobs at their commit, keep gangs below minMember waiting, admit by proposal
    assert ran > 50 and waited > 0 and admitted > 50, (ran, waited, admitted)


@pytest.mark.parametrize("sc", [c for c in CASES if c.table in ("enqueue", "allocate")],
                         ids=lambda c: f"{c.table}-{c.name}")  # fmt: skip
def test_a_log_recorded_before_the_rule_verifies_with_its_own_inqueue_events(sc) -> None:
    old = decoded(engine_log(sc, admits_in_proposal=False))[0]
    new = decoded(engine_log(sc))[0]
    for log in (old, new):
        verdict = verify(log)
        assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert not any(isinstance(e, PlacementProposed) and e.admits for _, _, e in old)
    inqueue = [e for _, _, e in old if isinstance(e, JobPhaseChanged) and e.phase == "Inqueue"]
    admits = [e for _, _, e in new if isinstance(e, PlacementProposed) and e.admits]
    left = [e for _, _, e in new if isinstance(e, JobPhaseChanged) and e.phase == "Inqueue"]
    assert len(admits) + len(left) == len(inqueue)


def _decisions(*, pipelined: bool) -> Decisions:
    return Decisions(
        based_on=7,
        placements=(JobPlacement("ns", "a", (), pipelined), JobPlacement("ns", "b", ())),
        phases=(PhaseChange("ns", "a", "Inqueue"), PhaseChange("ns", "b", "Inqueue"),
                PhaseChange("ns", "c", "Inqueue")),
    )  # fmt: skip


def _shape(events: list) -> list[tuple[str, str, object]]:
    return [(type(e).__name__, e.name, getattr(e, "admits", getattr(e, "phase", None))) for e in events]


def test_only_a_proposed_job_is_admitted_by_its_proposal() -> None:
    """a: reserved in the session only (pipelined, no proposal), c: admitted but not placed —
    both keep their Inqueue event; b's proposal carries it."""
    got = decision_events(_decisions(pipelined=True), session=1, mode="service", outstanding={},
                          last_reasons={}, proposed={}, admits_in_proposal=True)  # fmt: skip
    assert _shape(got) == [("JobPhaseChanged", "a", "Inqueue"), ("JobPhaseChanged", "c", "Inqueue"),
                           ("PlacementProposed", "b", True)]  # fmt: skip
    outstanding = decision_events(_decisions(pipelined=False), session=1, mode="service",
                                  outstanding={"ns/b": 3}, last_reasons={}, proposed={},
                                  admits_in_proposal=True)  # fmt: skip
    assert _shape(outstanding) == [("JobPhaseChanged", "b", "Inqueue"), ("JobPhaseChanged", "c", "Inqueue"),
                                   ("PlacementProposed", "a", True)]  # fmt: skip
    before = decision_events(_decisions(pipelined=False), session=1, mode="service", outstanding={},
                             last_reasons={}, proposed={})  # fmt: skip
    assert _shape(before) == [("JobPhaseChanged", n, "Inqueue") for n in "abc"] + [
        ("PlacementProposed", "a", False), ("PlacementProposed", "b", False)]
