"""What `tessera up` says about its processes and its log, in words that hold."""

from __future__ import annotations

from pathlib import Path

from services.cli.held import Held, describe
from services.cli.up import ControlPlane


def test_a_clean_exit_is_not_shown_as_an_error(tmp_path: Path) -> None:
    """`get components` showed `exited (0): {"ts": …}` (a clean stop's last JSON log line) as
    LAST_ERROR; a signal and a failing exit still say how they ended."""
    plane = ControlPlane(tmp_path)
    plane.log_dir.mkdir(parents=True)
    (plane.log_dir / "queue.log").write_text('{"ts": 1, "msg": "stopped"}\n')
    assert plane._why("queue", 0) == "exited (0)"
    assert plane._why("queue", -9) == "killed by SIGKILL"
    assert plane._why("queue", 1).startswith("exited (1): ")


def test_the_queue_count_says_root_and_default_are_not_in_it() -> None:
    """`up` said "0 queue(s)" for a log holding root and default."""
    held = Held(events=10, nodes=(), jobs=0, live_jobs=0, queues=())
    assert "0 queue(s) besides root and default" in describe(held, None)[0]
