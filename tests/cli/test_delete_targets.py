"""`tessera delete` takes what kubectl takes: a file's Queues too (after its jobs, which a queue
must have lost first), and several names of one kind. A file holding only a Queue printed
nothing, exited 0 and left the queue; `delete pod a b` failed with "unrecognized arguments"."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from services.cli import control
from services.cli.main import main

FILE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: qfull}
spec: {weight: 1}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec: {tasks: [{replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
"""


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str, str]]:
    """The commands the CLI sends the queue service (action, name, namespace, kind)."""
    sent: list[tuple[str, str, str, str]] = []

    def command(args: argparse.Namespace, action: str, name: str, namespace: str = "", kind: str = "",
                **_: object) -> int:  # fmt: skip
        sent.append((action, name, namespace, kind))
        return 0

    monkeypatch.setattr(control, "command", command)
    return sent


def test_delete_f_deletes_the_files_queue_after_its_jobs(tmp_path: Path, asked: list, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "all.yaml").write_text(FILE)
    assert main(["delete", "-f", str(tmp_path / "all.yaml")]) == 0
    assert asked == [("delete", "train", "ml", ""), ("delete", "qfull", "", "queue")]
    assert "skipped ConfigMap settings" in capsys.readouterr().err


def test_delete_takes_several_names(asked: list) -> None:
    assert main(["delete", "pod", "a", "b", "-n", "ml"]) == 0
    assert asked == [("delete", "a", "ml", "pod"), ("delete", "b", "ml", "pod")]
    asked.clear()
    assert main(["delete", "q", "q1", "q2"]) == 0
    assert asked == [("delete", "q1", "", "queue"), ("delete", "q2", "", "queue")]
