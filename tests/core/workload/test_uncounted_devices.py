"""A device's memory or cores asked without its count resource (services/core/workload/
devicerequests.py `uncounted`): the kubelet calls the device plugin only for the count, so a pod
asking `-memory` alone would start without a card. A pod that exists as written is refused,
naming the missing field; a Volcano Job's template is admitted (the job controller writes the
count into the pods it makes); a pod already bound holds what the kubelet gave it."""

from __future__ import annotations

import pytest

from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from tests.core.workload.manifests import one_task_job

REG = build_vendors()


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def pod(limits: str, *, node: str = "", init: str = "") -> str:
    bound = f"\n  nodeName: {node}" if node else ""
    status = "\nstatus: {phase: Running}" if node else ""
    inits = f"\n  initContainers: [{{name: i, image: busybox, resources: {{limits: {init}}}}}]" if init else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:{bound}{inits}
  containers:
  - {{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}
  - {{name: d, image: busybox, resources: {{limits: {limits}}}}}{status}
"""


@pytest.mark.parametrize(
    ("limits", "field", "companion", "count"),
    [
        ('{huawei.com/Ascend910B3-memory: "16384"}', "huawei.com/Ascend910B3",
         "huawei.com/Ascend910B3-memory", 1),
        ('{huawei.com/Ascend910-memory: "2000"}', "huawei.com/Ascend910", "huawei.com/Ascend910-memory", 1),
        ('{nvidia.com/gpumem: "4000", nvidia.com/gpucores: "30"}', "nvidia.com/gpu",
         "nvidia.com/gpucores, nvidia.com/gpumem", 1),
    ],
)  # fmt: skip
def test_a_pod_asking_a_device_without_its_count_is_refused_naming_what_to_add(
    limits: str, field: str, companion: str, count: int
) -> None:
    w = run(pod(limits))
    assert not w.jobs
    [r] = w.rejections
    assert r.path == f"spec.containers[1].resources.limits.{field}"
    assert f"{companion} asks a card of {field}" in r.rule
    assert f"add {field}: {count} to its limits" in r.rule
    assert r.rule.startswith("Required value")


def test_the_refusal_says_what_hamis_webhook_would_do_for_the_vendor() -> None:
    """HAMi's NVIDIA webhook adds nvidia.com/gpu beside gpumem; its Ascend one leaves a container
    without the count name alone (the refusal said it would add it)."""
    [ascend] = run(pod('{huawei.com/Ascend910B3-memory: "16384"}')).rejections
    assert "HAMi's webhook does not add it either: on HAMi or Volcano the pod would start with no card" in ascend.rule
    assert "would add it" not in ascend.rule
    [gpu] = run(pod('{nvidia.com/gpumem: "4000"}')).rejections
    assert "HAMi's webhook would add it; Tessera has none" in gpu.rule


def test_the_same_pod_with_its_count_is_admitted_with_the_slice() -> None:
    w = run(pod('{huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "16384"}'))
    assert not w.rejections
    [d] = w.jobs[0].tasks[0].devices
    assert (d.resource, d.count, d.memory, d.container) == ("huawei.com/Ascend910B3", 1, 16384, 1)


def test_an_init_container_without_the_count_is_refused_at_its_own_path() -> None:
    w = run(pod('{cpu: "1"}', init='{huawei.com/Ascend910B3-memory: "8192"}'))
    [r] = w.rejections
    assert r.path == "spec.initContainers[0].resources.limits.huawei.com/Ascend910B3"


def test_a_bound_pod_is_taken_as_the_kubelet_ran_it() -> None:
    w = run(pod('{huawei.com/Ascend910B3-memory: "16384"}', node="n1"))
    assert not w.rejections and len(w.running) == 1


def test_a_podgroup_member_without_the_count_is_refused_and_the_others_kept() -> None:
    text = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g}
spec: {minMember: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: good, annotations: {scheduling.k8s.io/group-name: g}}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: bad, annotations: {scheduling.k8s.io/group-name: g}}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3-memory: "8192"}}}]
"""
    w = run(text)
    [r] = w.rejections
    assert (r.kind, r.name, r.path) == ("Pod", "bad", "spec.containers[0].resources.limits.huawei.com/Ascend910B3")
    [job] = w.jobs
    assert [t.pod_names for t in job.tasks] == [("good",)]


def test_a_volcano_jobs_template_without_the_count_is_admitted_as_one_card() -> None:
    """Its init containers still name their count: their ask may be folded into the app's."""
    text = one_task_job(
        '        containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3-memory: "16384"}}}]')
    w = run(text)
    assert not w.rejections
    [d] = w.jobs[0].tasks[0].devices
    assert (d.resource, d.count, d.memory) == ("huawei.com/Ascend910B3", 1, 16384)
    init = text.replace("        containers:", "        initContainers: [{name: i, image: busybox, resources: "
                        "{limits: {huawei.com/Ascend910B3-memory: '8192'}}}]\n        containers:")
    [r] = run(init).rejections
    assert r.path == "spec.tasks[0].template.spec.initContainers[0].resources.limits.huawei.com/Ascend910B3"
