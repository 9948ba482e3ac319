"""What HAMi's webhook and scheduler do to a pod that Tessera, with no webhook, must do or say.

Ascend 910C cards are allocated in modules of two: a count of 1 books 2 NPUs (HAMi's rule).
HAMi's webhook also rewrites the pod's limit to 2, so the kubelet asks its device plugin for 2;
with the pod left at 1 the plugin's Allocate failed ("device number not matched"). Tessera has
no webhook: a plain pod asking 1 is refused, saying to ask 2; a Volcano Job's pods, which its job
controller makes, are made asking 2 (helper-23's review)."""

from __future__ import annotations

from typing import Any

from services.core.devices.registry import build_vendors
from services.core.workload.admission import admit
from services.core.workload.devicerequests import hami_parser
from services.kube import volcano

REG = build_vendors()
C910 = "huawei.com/Ascend910C"


def container(count: int) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "resources": {"limits": {C910: str(count)}}}


def pod(count: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"schedulerName": "volcano", "containers": [container(count)]}}  # fmt: skip


def job(count: int) -> dict[str, Any]:
    return {"apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
            "spec": {"minAvailable": 1, "schedulerName": "volcano",
                     "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [container(count)]}}}]}}  # fmt: skip


def test_a_plain_pod_asking_one_910c_is_refused_saying_to_ask_two() -> None:
    got = admit([pod(1)], hami_parser(REG), REG.resource_names())
    assert not got.jobs
    (r,) = [r for r in got.rejections if r.path.endswith(f"limits.{C910}")]
    assert "ask huawei.com/Ascend910C: 2" in r.rule and "Allocate would fail" in r.rule, r
    (ok,) = admit([pod(2)], hami_parser(REG), REG.resource_names()).jobs
    assert ok.tasks[0].devices[0].count == 2


def test_a_volcano_jobs_pod_is_made_asking_the_module() -> None:
    body = job(1)
    (spec,) = admit([body], hami_parser(REG), REG.resource_names()).jobs
    made = volcano.pod_for(body, spec, "w", 0, retries=0)
    assert made["spec"]["containers"][0]["resources"]["limits"][C910] == "2"


def test_a_910c_vnpu_of_1_books_a_template_on_each_die_and_says_how_to_ask_it() -> None:
    """HAMi admits `Ascend910C: 1` + `-memory 16384` (its "npu > 1" rule reads the 1 asked,
    before the rewrite to 2): two NPUs, vir05_1c_16g on each die of a module. A Volcano Job's
    pod is made asking 2; a plain pod cannot be (asked as 2 the vNPU is refused, as HAMi refuses
    it), and is told the ways that work, not "vNPU not supported for multiple devices"."""
    body = job(1)
    body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"][f"{C910}-memory"] = "16384"
    (spec,) = admit([body], hami_parser(REG), REG.resource_names()).jobs
    (d,) = spec.tasks[0].devices
    assert (d.count, d.memory, d.template, d.exclusive) == (2, 16384, "vir05_1c_16g", False)
    made = volcano.pod_for(body, spec, "w", 0, retries=0)
    assert made["spec"]["containers"][0]["resources"]["limits"][C910] == "2"
    plain = pod(1)
    plain["spec"]["containers"][0]["resources"]["limits"][f"{C910}-memory"] = "16384"
    got = admit([plain], hami_parser(REG), REG.resource_names())
    assert not got.jobs
    rules = [r.rule for r in got.rejections]
    assert not any("vNPU not supported" in r for r in rules), rules
    (rule,) = rules
    assert "run it as a Volcano Job (its pods are made asking 2), or ask whole modules" in rule, rule


def test_a_topology_aware_card_policy_is_accepted_with_a_warning_it_is_not_acted_on() -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
            "annotations": {"hami.io/gpu-scheduler-policy": "topology-aware"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x",
                     "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}  # fmt: skip
    got = admit([body], hami_parser(REG), REG.resource_names())
    assert len(got.jobs) == 1
    assert any("topology-aware is not acted on" in w.rule for w in got.warnings), got.warnings


def test_a_volcano_jobs_pod_counts_the_module_it_is_made_asking() -> None:
    """The pod the job controller makes asks 2 (the module); the job's resources count 2 as the
    kubelet and a ResourceQuota will, where they counted the template's 1."""
    (spec,) = admit([job(1)], hami_parser(REG), REG.resource_names()).jobs
    assert spec.tasks[0].scalars.get(C910) == 2000, spec.tasks[0].scalars
    assert (spec.min_resources or {}).get(C910) == 2000, spec.min_resources
