"""`verify` re-runs every recorded session of a log and compares whole decision events: the
scenario tables' simulations (enqueue, allocate, backfill, preempt, reclaim, devices) all
reproduce; an altered decision and a missing one are named (tests/cli/test_replay.py alters a
configuration)."""

from __future__ import annotations

import msgspec
import pytest

from contracts.events import EvictionRequested, JobUnschedulable, NodeRegistered, PlacementProposed
from services.cli.replay import decoded, verdict_text
from services.core.scheduling.verify import Stored, verify
from tests.core.scheduling.scenarios import engine_log, load_tables
from tests.core.scheduling.test_scenarios import TABLES

CASES = load_tables(*TABLES)


def stored_with(*kinds: type) -> list[Stored]:
    """The log of the first scenario whose sessions decided each of `kinds`."""
    for sc in CASES:
        log = decoded(engine_log(sc))[0]
        if all(any(isinstance(e, k) for _, _, e in log) for k in kinds):
            return log
    raise AssertionError("no scenario decides all of " + ", ".join(k.__name__ for k in kinds))


@pytest.mark.parametrize("sc", CASES, ids=[f"{c.table}-{c.name}" for c in CASES])
def test_every_recorded_session_of_a_scenario_reproduces(sc) -> None:
    verdict = verify(decoded(engine_log(sc))[0])
    assert verdict.ok, "\n".join(verdict.divergence.lines())  # type: ignore[union-attr]
    assert verdict.unrecorded == 0  # every decision carries its session (some tables decide none)


def _alter(log: list[Stored], kind: type, change) -> tuple[list[Stored], int]:
    for i, (seq, headers, event) in enumerate(log):
        if isinstance(event, kind) and (new := change(event)) is not None:
            return [*log[:i], (seq, headers, new), *log[i + 1:]], seq
    raise AssertionError(f"no {kind.__name__} to alter")


def test_an_altered_placement_is_the_divergence_named() -> None:
    log = stored_with(PlacementProposed, JobUnschedulable)
    assert verify(log).decisions > 0

    def elsewhere(p: PlacementProposed) -> PlacementProposed:
        first = p.placements[0]
        return msgspec.structs.replace(p, placements=(msgspec.structs.replace(first, node="nowhere"),
                                                      *p.placements[1:]))  # fmt: skip

    altered, seq = _alter(log, PlacementProposed, elsewhere)
    d = verify(altered).divergence
    assert d is not None and d.seq == seq and d.inputs == ()
    assert isinstance(d.recorded, PlacementProposed) and d.recorded.placements[0].node == "nowhere"
    assert any(f.startswith("placements[0].node: \"nowhere\" → ") for f in d.fields), d.fields


def test_an_altered_reason_and_a_dropped_decision_are_named() -> None:
    log = stored_with(PlacementProposed, JobUnschedulable)
    altered, seq = _alter(log, JobUnschedulable,
                          lambda u: msgspec.structs.replace(u, reason="because"))  # fmt: skip
    d = verify(altered).divergence
    assert d is not None and d.seq == seq and d.fields[0].startswith('reason: "because" → ')
    dropped = [m for m in log if m[0] != seq]
    d = verify(dropped).divergence
    assert d is not None and d.recorded is None and isinstance(d.rederived, JobUnschedulable)


def test_an_eviction_recorded_before_it_named_its_preemptor_still_verifies() -> None:
    """A log written before `EvictionRequested.for_job` existed: its evictions decode with it
    empty and are taken as they were; one naming another job is a divergence."""
    log = stored_with(EvictionRequested)
    assert any(e.for_job for _, _, e in log if isinstance(e, EvictionRequested))
    old = [(s, h, msgspec.structs.replace(e, for_job="") if isinstance(e, EvictionRequested) else e)
           for s, h, e in log]  # fmt: skip
    assert verify(old).ok
    altered, seq = _alter(log, EvictionRequested, lambda e: msgspec.structs.replace(e, for_job="default/other"))
    d = verify(altered).divergence
    assert d is not None and d.seq == seq and d.fields[0].startswith('for_job: "default/other" → ')


def test_an_edited_input_that_changes_no_decision_is_noted_with_its_first_session() -> None:
    """A node's labels edited in the log: every decision still reproduces, and the verdict
    names the first session whose inputs are not what the scheduler saw (it said only how many
    sessions, with no place to look)."""
    log = stored_with(PlacementProposed)
    altered, _ = _alter(log, NodeRegistered,
                        lambda n: msgspec.structs.replace(n, labels={**n.labels, "edited": "yes"}))  # fmt: skip
    verdict = verify(altered)
    assert verdict.ok and verdict.input_notes.get("nodes"), verdict
    assert verdict.first_input_note is not None and verdict.first_input_note[2] == ("nodes",)
    text = "\n".join(verdict_text(verdict, 0))
    session, based_on, _ = verdict.first_input_note
    assert f"note: the first is session {session} (based on #{based_on}: nodes)" in text, text


def test_a_dropped_decision_says_it_may_be_an_earlier_sessions() -> None:
    log = stored_with(PlacementProposed, JobUnschedulable)
    seq = next(s for s, _, e in log if isinstance(e, JobUnschedulable))
    d = verify([m for m in log if m[0] != seq]).divergence
    assert d is not None and d.recorded is None
    assert any("the log holds no such decision" in line for line in d.lines()), d.lines()


def test_a_log_that_ends_inside_a_session_is_incomplete_not_divergent() -> None:
    """A log cut by `head` in the middle of a session's decisions was called divergent ("the
    log holds no such decision"): what it holds of the session is compared, the rest counted."""
    log = stored_with(PlacementProposed, JobUnschedulable)
    by_session: dict[str, list[int]] = {}
    for i, (_, headers, _) in enumerate(log):
        if "Tessera-Based-On" in headers:
            by_session.setdefault(headers["Tessera-Based-On"], []).append(i)
    based_on, rows = next((b, r) for b, r in by_session.items() if len(r) > 1)
    cut = log[: rows[0] + 1]  # the session's first decision is the log's last event
    verdict = verify(cut)
    assert verdict.ok, verdict.divergence and "\n".join(verdict.divergence.lines())
    assert verdict.incomplete is not None and verdict.incomplete[1:] == (int(based_on), len(rows) - 1)
    text = "\n".join(verdict_text(verdict, 0))
    assert f"note: last session incomplete (the log ends inside it): {len(rows) - 1} decisions not verified" in text
    # what the log does hold of it is still compared: the cut's last decision altered diverges
    seq, headers, first = cut[-1]
    if isinstance(first, PlacementProposed):
        p = first.placements[0]
        altered = msgspec.structs.replace(first, placements=(msgspec.structs.replace(p, node="nowhere"),))
    else:
        altered = msgspec.structs.replace(first, reason="because")
    d = verify([*cut[:-1], (seq, headers, altered)]).divergence
    assert d is not None and d.seq == seq
