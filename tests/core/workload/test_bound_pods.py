"""A pod that names its node (`spec.nodeName`) is a placement admission takes as it is, by
its phase: one that holds its node (Running; Pending while its images are pulled; Unknown while
its node does not report) is booked where it is, a finished one holds nothing, and one without a
phase — made with `spec.nodeName`, which kube-scheduler skips and the node's kubelet starts — is
booked there as starting, with a warning; an unknown phase is refused, naming the field and rule."""

from __future__ import annotations

import pytest

from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()


def bound(phase: str) -> Workload:
    status = f"\nstatus: {{phase: {phase}}}" if phase else ""
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  nodeName: n1
  containers: [{{name: c, image: busybox, resources: {{limits: {{huawei.com/Ascend910B3: "1"}}}}}}]{status}
"""
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


@pytest.mark.parametrize("phase", ["Running", "Pending", "Unknown"])
def test_a_pod_holding_its_node_is_booked_there(phase: str) -> None:
    w = bound(phase)
    assert not w.rejections
    [rp] = w.running
    assert (rp.pod, rp.node) == ("p", "n1")


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_holds_nothing_and_is_not_refused(phase: str) -> None:
    w = bound(phase)
    assert not w.rejections and not w.running and len(w.jobs) == 1


def test_a_pod_made_with_its_node_and_no_phase_is_bound_there() -> None:
    w = bound("")
    assert not w.rejections and [(p.pod, p.node) for p in w.running] == [("p", "n1")]
    [warning] = w.warnings
    assert (warning.path, warning.value) == ("spec.nodeName", "n1") and "kubelet" in warning.rule


def test_a_pod_claiming_a_node_with_an_unknown_phase_is_refused() -> None:
    w = bound("Weird")
    [r] = w.rejections
    assert (r.path, r.value) == ("spec.nodeName", "n1")
    assert "Pending, Running or Unknown" in r.rule and not w.jobs
