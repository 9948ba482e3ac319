"""Chaos through the real processes (issue 12 item 5): a few rounds of `benchmarks.chaos` — a
seeded workload of slices and gangs, kill -9 of random services, of nats-server, and of the
allocator the moment a commit appears, the last round with two allocators and two schedulers on
the same durables — and after each round the whole log audited (`services.core.audit`): no card
over capacity at any sequence, gangs whole, one commit and one start per run, every pod ended or
waiting with a reason, ledgers = the running pods' slices, the allocators' views = the log.
`python -m benchmarks.chaos --rounds 50` is the long version."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.chaos import KINDS, run_chaos


@pytest.mark.slow
async def test_random_kills_break_no_invariant(tmp_path: Path) -> None:
    lines: list[str] = []
    run = await run_chaos(tmp_path / "state", rounds=3, seed=5, replicas_from=2, settle=30,
                          report=lines.append)  # fmt: skip
    assert [r.kind for r in run.rounds] == list(KINDS)  # random, allocator at a commit, nats
    assert any(k.endswith("@commit") for k in run.rounds[1].kills)
    assert "nats" in run.rounds[2].kills and run.rounds[2].replicas
    assert run.violations == [], "\n".join(lines)
