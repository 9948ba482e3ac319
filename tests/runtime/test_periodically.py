"""`periodically`: what an operator reads when a periodic action (compaction, snapshot) fails."""

from __future__ import annotations

import asyncio
import logging

import pytest

from services.runtime.compaction import CompactionBusy
from services.runtime.snapshot import periodically


async def _twice(failure: Exception, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Run the action until it has failed twice (the loop goes on after a failure)."""
    stopping = asyncio.Event()
    calls = 0

    async def action() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            stopping.set()
        raise failure

    with caplog.at_level(logging.WARNING, logger="services.runtime.snapshot"):
        await periodically(stopping, 0.0, action, "compaction")
    assert calls == 2
    return [r for r in caplog.records if r.name == "services.runtime.snapshot"]


async def test_a_compaction_refused_by_a_live_one_is_a_warning_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The queue service's periodic compaction meeting a `tessera compact` still purging was
    logged as a failure with a full traceback every period."""
    records = await _twice(CompactionBusy("another compaction is running (record #7)"), caplog)
    assert [(r.levelno, r.exc_info) for r in records] == [(logging.WARNING, None)] * 2
    assert "compaction not done (another compaction is running (record #7))" in records[0].getMessage()


async def test_a_bug_in_the_action_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    records = await _twice(RuntimeError("boom"), caplog)
    assert [r.levelno for r in records] == [logging.ERROR] * 2
    assert all(r.exc_info is not None for r in records)
