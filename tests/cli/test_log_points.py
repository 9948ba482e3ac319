"""`tessera replay --until` and `tessera explain --at` over a live control plane's log
(`fixtures/replay/live.jsonl`: `tessera up`, `tessera apply` of examples/article.yaml and
examples/inference.yaml, then `tessera events --output-file`) — its times are the store's
(`Nats-Time-Stamp`, nanoseconds, `Z`), it has no simulated clock — and over a simulated one."""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("points") / "sim.jsonl"
    explain = ROOT / "tests" / "fixtures" / "explain"
    code = main(["simulate", "--inventory", str(explain / "one-node.yaml"), "--workload",
                 str(explain / "cuda.yaml"), "--events", str(log), "-o", "json"])  # fmt: skip
    assert code == 0
    return log


def test_until_an_iso_time_reads_the_store_clock_as_explain_does(capsys: pytest.CaptureFixture[str]) -> None:
    """`--until 2020-01-01T00:00:00Z` printed 13 pods: replay's clock was `at` fields and the
    simulated clock, 0 on every event of a live log before its first TaskStarted."""
    code, out, err = run(capsys, "replay", "--until", "2020-01-01T00:00:00Z", "--from", str(LIVE))
    assert (code, out) == (2, "") and "before the log's first event (#1, 2026-12-07T15:07:05Z)" in err, err
    # the submissions at 15:07:08.586 (#23–#36), the first session's decisions at 15:07:08.677
    at_time = run(capsys, "replay", "--until", "2026-12-07T15:07:08.6Z", "--from", str(LIVE), "-o", "json")
    assert at_time == run(capsys, "replay", "--until", "36", "--from", str(LIVE), "-o", "json")
    assert json.loads(at_time[1])["seq"] == 36
    told = run(capsys, "explain", "job", "infer-3", "--from", str(LIVE), "--at", "2026-12-07T15:07:08.6Z")
    assert told == run(capsys, "explain", "job", "infer-3", "--from", str(LIVE), "--at", "#36")


def test_a_time_on_a_clock_the_log_does_not_carry_is_refused(simulated: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """`explain --at 40s` on a live log printed the final state, `replay --until 40s` another
    point; an ISO time on a simulated log printed the whole log."""
    for command, flag in (("replay", "--until"), ("explain", "--at")):
        target = ["pod", "infer-3"] if command == "explain" else []
        code, out, err = run(capsys, command, *target, "--from", str(LIVE), flag, "40s")
        assert (code, out) == (2, ""), out
        assert "40s: this log has no simulated clock (written by a live control plane): give a sequence" in err
        target = ["pod", "cuda-pod"] if command == "explain" else []
        code, out, err = run(capsys, command, *target, "--from", str(simulated), flag, "2026-12-07T15:07:08Z")
        assert (code, out) == (2, ""), out
        assert "this log has no store times (written by `tessera simulate`)" in err, err
        code, out, err = run(capsys, command, *target, "--from", str(simulated), flag, "0")
        assert (code, out) == (2, "") and "#0 is before the log's first event (#1)" in err, err


def test_a_sequence_past_the_end_says_where_the_log_ends(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "replay", "--until", "99999", "--from", str(LIVE))
    assert code == 0 and out.startswith("state at #91") and "note: the log ends at #91" in err
    code, out, err = run(capsys, "replay", "--until", "#91", "--from", str(LIVE))
    assert code == 0 and out.startswith("state at #91") and err == ""


def test_a_deleted_pod_and_job_are_told_from_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`explain pod infer-3` after `tessera delete pod infer-3` said "not found … (a pod admission
    refused is not in the log…)": the log holds its whole story, and its end."""
    import msgspec

    from contracts.events import JobDeleted, TaskFinished

    subject = "tessera.ev.job.default.infer-3"
    ending = [(92, TaskFinished(namespace="default", name="infer-3", task="infer-3", node="node-a", reason="deleted")),
              (93, JobDeleted(namespace="default", name="infer-3"))]  # fmt: skip
    rows = [json.dumps({"seq": seq, "subject": subject, "data": json.loads(msgspec.json.encode(ev)),
                        "headers": {"Tessera-Type": type(ev).__name__, "Tessera-Version": "1",
                                    "Nats-Time-Stamp": f"2026-12-07T15:09:12.00000{seq}Z"}}) + "\n"
            for seq, ev in ending]  # fmt: skip
    log = tmp_path / "deleted.jsonl"
    log.write_text(LIVE.read_text() + "".join(rows))
    for kind in ("pod", "job"):
        code, out, err = run(capsys, "explain", kind, "infer-3", "--from", str(log))
        assert code == 0, err
        lines = out.splitlines()
        head = "Pod default/infer-3 (minAvailable 1)" if kind == "pod" else "Job default/infer-3 (queue default, minAvailable 1)"
        assert lines[0] == f"{head}: Deleted", out
        assert "#83     2026-12-07T15:07:08Z" in out and "started           infer-3 on node-a" in out
        assert "#92     2026-12-07T15:09:12Z" in out and "exit code 0, deleted" in out
        assert "#93     2026-12-07T15:09:12Z" in out and "Why it waits" not in out
        assert lines[-1] == "Gone: deleted at #93 (2026-12-07T15:09:12Z)", out
    code, out, _ = run(capsys, "explain", "pod", "infer-3", "--from", str(log), "--at", "91")
    assert code == 0 and ": Running on node-a" in out.splitlines()[0] and "Gone" not in out


def test_why_it_waits_starts_from_the_timelines_last_step(capsys: pytest.CaptureFixture[str]) -> None:
    """At #40 the timeline's last line was "#37 … session 1 enqueued" and the answer "no
    scheduling session has decided on it yet"; at #88 "session 2 proposed" under session 1's
    verdict of #50."""

    def waits(name: str, at: str) -> dict:
        code, out, err = run(capsys, "explain", "pod", name, "--from", str(LIVE), "--at", at, "-o", "json")
        assert code == 0, err
        return json.loads(out)["waiting"]

    enqueued = waits("infer-7", "40")
    assert (enqueued["seq"], enqueued["session"]) == (37, 1)
    assert enqueued["why"] == "enqueued: no session has placed it or recorded why not since"
    assert waits("infer-7", "50")["why"].startswith("queue default: Ascend910B3 0.25 requested")  # the verdict
    for name, at, seq in (("infer-3", "46", 45), ("infer-7", "88", 88)):
        proposed = waits(name, at)
        assert proposed["seq"] == seq and proposed["why"] == "proposed for node-a: waiting for the allocator to commit its cards"
    code, out, _ = run(capsys, "explain", "job", "infer-7", "--from", str(LIVE), "--at", "40")
    assert code == 0 and "Why it waits (session 1, log #37, 2026-12-07T15:07:08Z):\n  enqueued: " in out, out
