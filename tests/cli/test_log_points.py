"""`tessera replay --until` and `tessera explain --at` over a live control plane's log
(`fixtures/replay/live.jsonl`: `tessera up`, `tessera apply` of examples/article.yaml and
examples/inference.yaml, then `tessera events --output-file`) — its times are the store's
(`Nats-Time-Stamp`, nanoseconds, `Z`), it has no simulated clock — and over a simulated one."""

from __future__ import annotations

import pytest

from services.cli.main import main
from services.core.logpoint import store_time, user_time
from tests.processes import ROOT

LIVE = ROOT / "tests" / "fixtures" / "replay" / "live.jsonl"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_store_stamps_and_typed_times_are_aware_utc() -> None:
    nano = store_time("2026-12-07T15:07:05.915720638Z")
    assert nano is not None and nano.tzinfo is not None and nano.microsecond == 915720
    assert store_time("2026-12-07 15:07:05.915720638 +0000 UTC") == nano
    assert store_time("2026-12-07T17:07:05.915720638+02:00") == nano
    assert store_time("2026-12-07T15:07:05Z") == nano.replace(microsecond=0)
    assert store_time("not a time") is None
    for typed in ("2026-12-07T15:07:08Z", "2026-12-07T15:07:08", "2026-12-07T16:07:08+01:00"):
        when = user_time(typed)
        assert when is not None and when.utcoffset() is not None and when.hour == 15, typed


def test_explain_at_a_store_time_on_a_live_log(capsys: pytest.CaptureFixture[str]) -> None:
    """Crashed: the stamps parsed naive, the typed time aware."""
    code, out, err = run(capsys, "explain", "pod", "infer-3", "--from", str(LIVE), "--at", "2026-12-07T15:07:08Z")
    assert code == 1 and "not found in namespace default as of 2026-12-07T15:07:08Z" in err  # submitted at 15:07:08.586
    code, out, _ = run(capsys, "explain", "pod", "infer-3", "--from", str(LIVE), "--at", "2026-12-07T15:07:08.6Z")
    assert code == 0 and out.startswith("Pod default/infer-3 (minAvailable 1): Pending"), out
    assert "#31     2026-12-07T15:07:08Z" in out and "#45" not in out
