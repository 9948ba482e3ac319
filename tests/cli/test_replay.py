"""`tessera replay` over a log `tessera simulate` wrote: `--verify` exits 0 on it, 1 naming the
decision when the log's configuration or one decision was altered; `--until` prints the state
the log held at a sequence or a time, as `get` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from services.cli.main import main
from tests.processes import ROOT

INVENTORY = ROOT / "examples" / "inventory.yaml"


def pod(name: str, memory: int, duration: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"tessera.io/duration": str(duration)}},
            "spec": {"containers": [{"name": "c", "image": "vllm", "resources": {"limits": {
                "huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": str(memory)}}}]}}  # fmt: skip


#: more whole-card pods than cards (they wait, then run as others finish), and a gang larger
#: than the cluster (unschedulable, with a reason recorded once)
WORKLOAD = [
    *(pod(f"whole-{i}", 65536, 10 + i) for i in range(20)),
    *(pod(f"share-{i}", 8192, 5) for i in range(6)),
    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "huge"},
     "spec": {"minAvailable": 20, "schedulerName": "volcano", "tasks": [{"replicas": 20, "name": "w",
              "template": {"spec": {"containers": [{"name": "c", "image": "t", "resources": {
                  "limits": {"huawei.com/Ascend910B3": "1"}}}]}}}]}},
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("replay")
    (d / "w.yaml").write_text(yaml.safe_dump_all(WORKLOAD))
    code = main(["simulate", "--inventory", str(INVENTORY), "--workload", str(d / "w.yaml"),
                 "--events", str(d / "log.jsonl"), "-o", "json"])  # fmt: skip
    assert code == 0
    return d / "log.jsonl"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def altered(src: Path, dst: Path, kind: str, change) -> dict:
    rows = rows_of(src)
    row = next(r for r in rows if r["headers"]["Tessera-Type"] == kind and change(r["data"]))
    dst.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return row


def test_a_simulated_log_verifies(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--verify", "--from", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("verified: ")
    decisions, sessions = int(out.split()[1]), int(out.split()[4])
    assert decisions > 30 and sessions > 3, out  # waits, runs as others end, a reason


def test_an_altered_decision_is_named(recorded: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    def reworded(data: dict) -> bool:
        data["reason"] = "it is Tuesday"
        return True

    row = altered(recorded, tmp_path / "a.jsonl", "JobUnschedulable", reworded)
    assert main(["replay", "--verify", "--from", str(tmp_path / "a.jsonl")]) == 1
    out = capsys.readouterr().out
    assert f"job default/{row['data']['name']}, decision #{row['seq']}" in out
    assert 'differs:     reason: "it is Tuesday" → "' in out
    assert "the recorded decision itself differs" in out


def test_an_altered_configuration_is_named(recorded: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    def binpack(data: dict) -> bool:
        data["conf"] = data["conf"].replace("NodeSchedulePolicy: binpack", "NodeSchedulePolicy: spread")
        return True

    altered(recorded, tmp_path / "c.jsonl", "SchedulerConfigured", binpack)
    assert main(["replay", "--verify", "--from", str(tmp_path / "c.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "diverged after" in out and "decision #" in out
    assert "inputs that differ from what the scheduler saw: conf" in out


def test_until_prints_the_state_at_a_sequence_and_at_a_time(recorded: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    first_start = next(r for r in rows_of(recorded) if r["headers"]["Tessera-Type"] == "TaskStarted")
    assert main(["replay", "--until", str(first_start["seq"] - 1), "--from", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"state at #{first_start['seq'] - 1}") and "\nPODS\n" in out and "\nCARDS\n" in out
    pods, jobs = out.split("\nPODS\n")[1].split("\nJOBS\n")
    assert "Bound" in pods and "Running" not in pods  # placed, nothing started yet
    assert "whole-0   default  Running" in jobs  # its PodGroup runs from its commit on
    phases = {}
    for at in ("9s", "10.5s"):  # whole-0 runs 10 s from 0
        assert main(["replay", "--until", at, "--from", str(recorded), "-o", "json"]) == 0
        phases[at] = {p["name"]: p["phase"] for p in json.loads(capsys.readouterr().out)["pods"]}
    assert phases["9s"]["whole-0"] == "Running" and phases["10.5s"]["whole-0"] == "Succeeded"
    assert main(["replay", "--until", "yesterday", "--from", str(recorded)]) == 2
    assert "--until 'yesterday': not a point of the log: give a log sequence" in capsys.readouterr().err


LIVE = ROOT / "tests" / "fixtures" / "replay" / "live.jsonl"


def test_a_log_cut_inside_a_session_verifies_what_it_holds(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """`head -45` of a live log (session 1 decides #37–#50) exited 1 with "the log holds no
    such decision"; so did `--until 45`. Cut by `--until` it is that session cut short (exit
    0); a file that ends there is not verified (exit 1), said so: a last session that diverges
    would end the same way."""
    head = tmp_path / "head.jsonl"
    head.write_text("".join(LIVE.read_text().splitlines(keepends=True)[:45]))
    note = "note: last session incomplete (the log ends inside it): 5 decisions not verified (session 1, based on #36)"
    assert main(["replay", "--verify", "--from", str(head)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("reproduced (not all verified): 9 decisions of 0 sessions reproduced"), out
    assert ("not verified: the log ends inside session 1 (based on #36), which would make 5 more decisions: an "
            "export cut short, or a divergence in the last session") in out, out
    assert main(["replay", "--verify", "--until", "45", "--from", str(head)]) == 0
    assert note in capsys.readouterr().out
    assert main(["replay", "--verify", "--until", "45", "-o", "json", "--from", str(LIVE)]) == 0
    assert note in capsys.readouterr().out


def test_a_compacted_log_is_not_verified_rather_than_divergent(recorded: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """`tessera compact` keeps each card's last event only; re-run on what was left, the first
    session "diverged" (a slice's expected card sequence, 10 → 2) on a log nothing but
    compaction changed (the newcomer's review, following README's order)."""
    rows = rows_of(recorded)
    last = {r["subject"]: r["seq"] for r in rows if ".card." in r["subject"]}
    kept = [r for r in rows if ".card." not in r["subject"] or last[r["subject"]] == r["seq"]]
    first_gone = next(i + 1 for i, r in enumerate(kept) if r["seq"] != i + 1)
    compacted = tmp_path / "compacted.jsonl"
    compacted.write_text("".join(json.dumps(r) + "\n" for r in kept))
    assert main(["replay", "--verify", "--from", str(compacted)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"not verified: the log was compacted ({len(rows) - len(kept)} sequences missing, "
                          f"the first #{first_gone}): ") and "diverged" not in out, out  # fmt: skip
    assert "\nreproduced (not all verified): " in out
    # a session entirely before the gap is still re-run, and an altered one still diverges
    cut = tmp_path / "cut.jsonl"
    first = next(r["headers"]["Tessera-Based-On"] for r in rows if "Tessera-Based-On" in r["headers"])
    made = [r for r in rows if r["headers"].get("Tessera-Based-On") == first]
    end = made[-1]["seq"]  # the first session's last decision; a gap right after it
    cut.write_text("".join(json.dumps(r) + "\n" for r in rows if r["seq"] <= end or r["seq"] > end + 3))
    assert main(["replay", "--verify", "--from", str(cut)]) == 1
    out = capsys.readouterr().out
    assert f"reproduced (not all verified): {len(made)} decisions of 1 sessions reproduced" in out, out
    tampered = [dict(r) for r in rows if r["seq"] <= end or r["seq"] > end + 3]
    row = next(r for r in tampered if r["seq"] == made[0]["seq"])
    row["data"] = {**row["data"], "name": "someone-else"}
    cut.write_text("".join(json.dumps(r) + "\n" for r in tampered))
    assert main(["replay", "--verify", "--from", str(cut)]) == 1
    assert capsys.readouterr().out.count("diverged after 0 reproduced decisions") == 1


def test_a_repeated_line_or_two_joined_logs_are_refused(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Verified with "note: -10 sequences are missing (the log was compacted)"."""
    lines = LIVE.read_text().splitlines(keepends=True)
    (tmp_path / "dup.jsonl").write_text("".join(lines[:60] + lines[50:]))
    (tmp_path / "joined.jsonl").write_text("".join(lines + lines))
    for name, line, seq, before in (("dup", 61, 51, 60), ("joined", 92, 1, 91)):
        for command in (["replay", "--verify"], ["explain", "pod", "infer-3"], ["simulate", "--replay"]):
            flag = [] if command[0] == "simulate" else ["--from"]
            assert main([*command, *flag, str(tmp_path / f"{name}.jsonl")]) == 2, command
            err = capsys.readouterr().err
            assert (f"{tmp_path / name}.jsonl line {line}: sequence #{seq} follows #{before}: a line repeated, "
                    "or two logs joined?") in err, err  # fmt: skip


def test_a_file_that_is_no_log_is_said_to_be_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A service's log, an inventory, a terminal's text: "cannot read events: 'data'" or
    "Expecting value: line 1 column 1"."""
    lines = LIVE.read_text().splitlines(keepends=True)
    files = {
        "inventory.yaml": (INVENTORY.read_text(), 1),
        "service.log": ('{"level": "info", "msg": "ready", "seq": 3}\n', 1),
        "stderr.txt": ("".join(lines[:3]) + "Traceback (most recent call last):\n", 4),
        "nodata.jsonl": (lines[0].replace('"data":', '"body":'), 1),
    }
    for name, (text, line) in files.items():
        (tmp_path / name).write_text(text)
        for command in (["replay", "--verify"], ["explain", "pod", "infer-3"], ["simulate", "--replay"]):
            flag = [] if command[0] == "simulate" else ["--from"]
            assert main([*command, *flag, str(tmp_path / name)]) == 2, (name, command)
            err = capsys.readouterr().err
            assert (f"{tmp_path / name} line {line} is not an event of a Tessera log (write one with "
                    "`tessera events --output-file LOG.jsonl`)") in err, err  # fmt: skip


def test_an_empty_log_is_not_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"verified: 0 decisions of 0 sessions reproduced", exit 0: a check that passes over a
    failed export proves nothing."""
    (tmp_path / "empty.jsonl").write_text("")
    for mode in (["--verify"], ["--until", "5"]):
        assert main(["replay", *mode, "--from", str(tmp_path / "empty.jsonl")]) == 2
        out = capsys.readouterr()
        assert out.out == "" and f"{tmp_path / 'empty.jsonl'} holds no events: nothing to verify or rebuild" in out.err
