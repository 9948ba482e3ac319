"""`tessera demo` (make run): five service processes, the article's workload, every object at
its expected outcome (exit 0), the invalid pod rejected with its rule, the per-card ledger and
the whole-card comparison shown; the pod asking no card runs too."""

from __future__ import annotations

from tests.cli.test_up_down import tessera


def test_demo_reaches_every_expected_outcome() -> None:
    out = tessera("demo")
    text = out.stdout
    assert out.returncode == 0, text + out.stderr
    for name in ("allocator", "queue", "scheduler", "admission", "nodeagent"):
        assert f"{name:10s} ready" in text
    assert "pod/default/bad-typo rejected" in text and "Ascend910B3-memroy: unknown device resource; did you mean huawei.com/Ascend910B3-memory?" in text
    assert "every object reached its expected outcome (15 objects" in text
    # the pod that asks no card runs (issue 27: it was proposed and refused for ever)
    [router] = [line.split() for line in text.splitlines() if line.strip().startswith("router ")]
    assert router[1] == "Running" and router[2].startswith("node-") and "no card" in " ".join(router)
    assert "MEMORY MB" in text and "whole-card" in text and "shared (Tessera)" in text
