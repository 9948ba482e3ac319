"""Every pytest-xdist worker must collect the same ids in the same order (issue 22: a fresh-clone
`make test` once stopped with "Different tests were collected between gw1 and gw0"): ids built
from a set's order, a dict of hashed keys or anything else that differs per interpreter show up
here as two fresh interpreters with different hash seeds collecting differently."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.collected import differing
from tests.processes import ROOT

# One xdist work unit of two tests: `--dist loadgroup` deals units with more tests first, so the
# two collections (the suite's longest single test but a few) start early instead of being dealt
# last, where one worker ran them alone while the other had nothing left to do.
pytestmark = pytest.mark.xdist_group("collection")


def collected_ids(seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    env.pop("PYTEST_XDIST_WORKER", None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-o", "addopts=-p no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_two_interpreters_with_other_hash_seeds_collect_the_same_ids() -> None:
    first, second = collected_ids("1"), collected_ids("4242")
    assert len(first) > 1000
    assert differing(("seed 1", first), ("seed 4242", second)) == []


def test_differing_names_the_ids_and_an_order_change() -> None:
    assert differing(("gw0", ["a", "b"]), ("gw1", ["a", "c"])) == [
        "collected by gw0 only: b", "collected by gw1 only: c"]  # fmt: skip
    assert differing(("gw0", ["a", "b"]), ("gw1", ["b", "a"])) == [
        "same ids in another order from #0: gw0 a, gw1 b"]  # fmt: skip
    assert differing(("gw0", ["a"]), ("gw1", ["a"])) == []
