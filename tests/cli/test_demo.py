"""`tessera demo` (make run): exits 0 and shows the article scenario's outcomes with reasons."""

from __future__ import annotations

from tests.cli.test_up_down import tessera


def test_demo_runs_and_explains_every_outcome() -> None:
    out = tessera("demo")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "append + read back ok" in text
    assert "bad-typo" in text and "exceeds card capacity 65536" in text
    assert "whole-card" in text and "shared (Tessera)" in text
    assert "Not yet built" in text  # it does not pretend to be the multi-process demo
