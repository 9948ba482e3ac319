"""Volcano's job webhook (`pkg/webhooks/admission/jobs/validate`) where Tessera judged a Job
differently: what it refuses, what it accepts, and its words beside Tessera's field paths."""

from __future__ import annotations

from typing import Any

from services.core.workload.admission import admit


def vcjob(spec: dict[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-task Job (`w`, 2 replicas) with `spec` merged in and the task's pod `template` metadata."""
    task = {"name": "w", "replicas": 2, "template": {
        "metadata": template or {},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}  # fmt: skip
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"}, "spec": {"tasks": [task], **spec}}  # fmt: skip


def refusals(doc: dict[str, Any]) -> list[str]:
    got = admit([doc])
    assert not got.jobs or not got.rejections
    return [f"{r.path}: {r.rule}" for r in got.rejections]


def test_a_negative_ttl_seconds_after_finished_is_refused() -> None:
    """v/v2.yaml: `ttlSecondsAfterFinished: -5` was accepted (and the finished Job deleted at once)."""
    assert refusals(vcjob({"ttlSecondsAfterFinished": -5})) == [
        "spec.ttlSecondsAfterFinished: 'ttlSecondsAfterFinished' cannot be less than zero."]
    assert refusals(vcjob({"ttlSecondsAfterFinished": 0})) == []
    assert refusals(vcjob({"ttlSecondsAfterFinished": 30})) == []
