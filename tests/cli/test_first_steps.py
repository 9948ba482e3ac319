"""A new user's first commands (issue 26, item 10): `simulate` takes every `--workload` it is
given, as `apply -f` takes every `-f`; `demo --help` says it brings its own system; the
`bad-typo` example is refused for its typo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from services.cli.main import main
from tests.processes import ROOT

EXAMPLES = ROOT / "examples"
INVENTORY = str(EXAMPLES / "inventory.yaml")


def _report(tmp_path: Path, *workloads: str) -> dict:
    out = tmp_path / "r.json"
    args = ["simulate", "--inventory", INVENTORY, "--report", str(out), "-o", "json"]
    for w in workloads:
        args += ["--workload", w]
    assert main(args) == 0
    return json.loads(out.read_text())


def _names(path: Path) -> set[str]:
    """The pods a manifest file submits: its Pods, and each Volcano Job task's replicas."""
    names = set()
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        if doc["kind"] == "Pod":
            names.add(doc["metadata"]["name"])
        elif doc["kind"] == "Job":
            names |= {f"{doc['metadata']['name']}-{t['name']}-{i}"
                      for t in doc["spec"]["tasks"] for i in range(t.get("replicas", 1))}  # fmt: skip
    return names


def test_simulate_takes_every_workload_in_order(tmp_path: Path) -> None:
    article, inference = EXAMPLES / "article.yaml", EXAMPLES / "inference.yaml"
    both = {p["name"] for p in _report(tmp_path, str(article), str(inference))["pods"]}
    assert both == _names(article) | _names(inference)
    # a directory is every manifest in it, as with `apply -f DIR`
    d = tmp_path / "dir"
    d.mkdir()
    for f in (article, inference):
        (d / f.name).write_text(f.read_text())
    assert {p["name"] for p in _report(tmp_path, str(d))["pods"]} == both
    # in order: each file's objects are submitted after the previous file's (the log says)
    for order in (("first", "second"), ("second", "first")):
        files = [_pod_file(tmp_path, name) for name in order]
        events = tmp_path / "ev.jsonl"
        assert main(["simulate", "--inventory", INVENTORY, "--workload", files[0], "--workload", files[1],
                     "--events", str(events)]) == 0  # fmt: skip
        messages = [json.loads(line) for line in events.read_text().splitlines()]
        submitted = [m["subject"].rsplit(".", 1)[1] for m in messages if m["data"]["type"] == "JobSubmitted"]
        assert tuple(submitted) == order


def _pod_file(tmp_path: Path, name: str) -> str:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(pod))
    return str(path)


def test_missing_second_workload_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code = main(["simulate", "--inventory", INVENTORY, "--workload", str(EXAMPLES / "article.yaml"),
                 "--workload", str(missing)])  # fmt: skip
    assert code == 2 and str(missing) in capsys.readouterr().err


def test_demo_help_says_it_starts_its_own_system(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "no `tessera up` first" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Starts its own embedded nats-server" in text and "no `tessera up` needed" in text


def test_bad_typo_example_is_refused_for_its_typo(tmp_path: Path) -> None:
    pods = {p["name"]: p for p in _report(tmp_path, str(EXAMPLES / "inference.yaml"))["pods"]}
    bad = pods["bad-typo"]
    assert bad["phase"] == "Rejected"
    key = "huawei.com/Ascend910B3-memroy"  # the typo the example is named for
    assert key in _limits(EXAMPLES / "inference.yaml", "bad-typo")
    assert f"{key}: unknown device resource; did you mean huawei.com/Ascend910B3-memory?" in bad["reason"]
    expected = yaml.safe_load((EXAMPLES / "expected.yaml").read_text())["pods"]["bad-typo"]
    assert expected["reason"] in bad["reason"]  # what `tessera demo` checks agrees


def _limits(path: Path, name: str) -> dict[str, str]:
    [doc] = [d for d in yaml.safe_load_all(path.read_text()) if d and d["metadata"]["name"] == name]
    return doc["spec"]["containers"][0]["resources"]["limits"]
