"""The CLI finds a running Tessera from any directory (issue 26, item 9): `TESSERA_STATE_DIR`,
else the nearest `.tessera` up the tree, else the user-level default; `--state-dir` wins.

Real `tessera` processes, run from the directories a user stands in; the system started here is
stopped by PID whatever happens."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.up import read_state
from services.runtime.lifeline import alive
from tests.processes import ROOT, stop_mentioning

INVENTORY = str(ROOT / "examples" / "inventory.yaml")  # node-a, node-b


def tessera(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`tessera ARGS` typed in `cwd`, with none of the caller's state-dir settings leaking in."""
    base = {k: v for k, v in os.environ.items() if k not in ("TESSERA_STATE_DIR", "TESSERA_HOME", "XDG_STATE_HOME")}
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], capture_output=True, text=True,
                          env={**base, "PYTHONPATH": str(ROOT), **env}, timeout=120, cwd=cwd)  # fmt: skip


def reached(out: subprocess.CompletedProcess[str]) -> bool:
    """`get nodes` answered from the running system: the inventory's nodes are listed."""
    assert out.returncode == 0, out.stderr
    return "node-a" in out.stdout and "node-b" in out.stdout


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A project directory with `tessera up --detach` run in it, as a user would."""
    home = tmp_path / "home"  # no user-level state of the person running the tests
    home.mkdir()
    up = tessera("up", "--detach", "--inventory", INVENTORY, cwd=tmp_path, HOME=str(home))
    try:
        assert up.returncode == 0, up.stderr
        yield tmp_path
    finally:
        if (tmp_path / ".tessera" / "up.json").exists():
            tessera("down", "--state-dir", str(tmp_path / ".tessera"), cwd=tmp_path)
        stop_mentioning(tmp_path)


def test_found_up_the_tree_by_env_and_down_from_a_subdirectory(project: Path) -> None:
    state = project / ".tessera"
    assert (state / "up.json").exists()  # `up` kept its default: ./.tessera
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    home = str(project / "home")
    assert reached(tessera("get", "nodes", cwd=deep, HOME=home))
    elsewhere = project / "home"  # not under the project: only the variable can name it
    assert reached(tessera("get", "nodes", cwd=elsewhere, HOME=home, TESSERA_STATE_DIR=str(state)))
    # --state-dir still wins over both: an empty directory there has no system
    empty = project / "empty"
    empty.mkdir()
    named = tessera("get", "nodes", "--state-dir", str(empty), cwd=deep, HOME=home, TESSERA_STATE_DIR=str(state))
    assert named.returncode != 0 and str(empty / "up.json") in named.stderr
    pids = [p for p in read_state(state)["services"].values()]
    down = tessera("down", cwd=deep, HOME=home)
    assert down.returncode == 0, down.stderr
    assert not (state / "up.json").exists()
    assert not any(alive(p) for p in pids)


def test_user_level_default_when_no_tessera_up_the_tree(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = tmp_path / "work"
    cwd.mkdir(parents=True)
    home.mkdir()
    out = tessera("get", "nodes", cwd=cwd, HOME=str(home))
    assert out.returncode != 0
    assert str(home / ".local" / "state" / "tessera" / "up.json") in out.stderr
    xdg = tmp_path / "xdg"
    out = tessera("get", "nodes", cwd=cwd, HOME=str(home), XDG_STATE_HOME=str(xdg))
    assert str(xdg / "tessera" / "up.json") in out.stderr


def test_up_keeps_its_state_where_the_variable_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`up` does not search: ./.tessera unless TESSERA_STATE_DIR, even below a running project."""
    from services.cli.main import build_parser

    (tmp_path / ".tessera").mkdir()
    below = tmp_path / "sub"
    below.mkdir()
    monkeypatch.chdir(below)
    for name in ("TESSERA_STATE_DIR", "TESSERA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert Path(build_parser().parse_args(["up"]).state_dir) == Path(".tessera")
    assert Path(build_parser().parse_args(["get", "pods"]).state_dir) == tmp_path.resolve() / ".tessera"
    chosen = tmp_path / "chosen"
    monkeypatch.setenv("TESSERA_STATE_DIR", str(chosen))
    assert Path(build_parser().parse_args(["up"]).state_dir) == chosen
    assert Path(build_parser().parse_args(["down"]).state_dir) == chosen
