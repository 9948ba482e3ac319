"""Which loop a service runs on: uvloop by default, asyncio's when asked (fresh interpreters,
so the choice is what a service process makes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import asyncio\nfrom services.runtime import eventloop\n"
         "async def kind():\n    return type(asyncio.get_running_loop()).__module__\n"
         "print(eventloop.run(kind()))")  # fmt: skip


@pytest.mark.parametrize(("setting", "expected"), [(None, "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_the_loop_a_service_runs_on(setting: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TESSERA_EVENT_LOOP"}
    if setting is not None:
        env["TESSERA_EVENT_LOOP"] = setting
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split(".")[0] == expected
