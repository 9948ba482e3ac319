"""A container's resources: one request on one card model, HAMi clamps said out loud, and the
API server's container rules (image, extended-resource limits) in its words (issue 13)."""

from __future__ import annotations

import pytest

from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()


def pod(resources: str, *, image: str = "image: busybox, ", annotations: str = "{}") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: p, annotations: {annotations}}}
spec:
  containers: [{{name: c, {image}resources: {resources}}}]
"""


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def reasons(text: str) -> list[str]:
    return [r.line() for r in run(text).rejections]


MIXED = [
    ("huawei.com/Ascend910B", "huawei.com/Ascend910B3-memory", "4096"),  # pre-v2.7 name + model
    ("huawei.com/Ascend910", "huawei.com/Ascend910B3-memory", "4096"),  # family + model
    ("huawei.com/Ascend910B3", "huawei.com/Ascend910B-memory", "4096"),  # model + old name
    ("huawei.com/Ascend910B3", "huawei.com/Ascend910B4-memory", "4096"),  # two models
    ("huawei.com/Ascend310P", "huawei.com/Ascend910B3-core", "10"),
    ("nvidia.com/gpu", "volcano.sh/vgpu-memory", "1000"),  # HAMi and Volcano NVIDIA names
    ("volcano.sh/vgpu-number", "nvidia.com/gpucores", "30"),
]


@pytest.mark.parametrize(("count", "other", "value"), MIXED)
def test_count_memory_core_names_of_two_models_are_refused_naming_both(
    count: str, other: str, value: str
) -> None:
    got = reasons(pod(f'{{limits: {{{count}: "1", {other}: "{value}"}}}}'))
    first, second = sorted([count, other])
    assert got[0].startswith(f"spec.containers[0].resources.limits.{second}: {first} and {second} "
                             "are two device requests (two cards): one container's count, memory "
                             "and core resources must resolve to one request on one card model")  # fmt: skip


def test_one_models_names_together_are_one_request() -> None:
    w = run(pod('{limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "4096"}}'))
    assert not w.rejections
    [device] = w.jobs[0].tasks[0].devices
    assert (device.type, device.count, device.template) == ("Ascend910B3", 1, "vir05_1c_16g")


def test_a_size_no_template_has_is_accepted_rounded_and_said() -> None:
    """HAMi rounds a vNPU size up to the next template in silence: the article's "8 GB slices,
    8 to a card" held 4 (16 GB each), and a 40000 MB ask took a whole card, without a word."""
    lines = {}
    for memory in ("8192", "16384", "40000", "65536"):
        w = run(pod(f'{{limits: {{huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "{memory}"}}}}'))
        assert not w.rejections
        lines[memory] = [x.line() for x in w.warnings]
    name = "spec.containers[0].resources.limits.huawei.com/Ascend910B3-memory"
    assert lines == {
        "8192": [f"{name}: rounded up to Ascend910B3's vNPU template vir05_1c_16g (16384 MB, 5 aiCores), as HAMi "
                 "does: a card holds only its templates' sizes; on a hami-core node (hami-vnpu-core: \"true\") "
                 "it is a soft slice of 16384 MB instead, with no AI cores booked, as HAMi v2.10 places a pod "
                 "without huawei.com/vnpu-mode (value: 8192)"],
        "16384": [],  # a template's own size
        "40000": [f"{name}: is more than Ascend910B3's largest vNPU template: rounded up to a whole card "
                  "(65536 MB), as HAMi does (value: 40000)"],
        "65536": []}  # the whole card asked: nothing rounded  # fmt: skip


def test_a_310p_size_above_its_templates_says_the_whole_card_books_less_than_asked() -> None:
    """A 310P whole card books its memoryAllocatable (21527 MB; HAMi writes it into the limit),
    not its 24576 MB capacity: 22000 asked was told "rounded up to a whole card (24576 MB)"."""
    name = "spec.containers[0].resources.limits.huawei.com/Ascend310P-memory"
    lines = {}
    for memory in ("22000", "24576", "21527", "20000"):
        w = run(pod(f'{{limits: {{huawei.com/Ascend310P: "1", huawei.com/Ascend310P-memory: "{memory}"}}}}'))
        assert not w.rejections
        lines[memory] = [x.line() for x in w.warnings]
        assert w.jobs[0].tasks[0].devices[0].exclusive
    assert lines == {
        "22000": [f"{name}: is more than Ascend310P's largest vNPU template: a whole card, which books 21527 MB "
                  "(its memoryAllocatable), 473 MB less than asked — HAMi writes 21527 into the limit (value: 22000)"],
        "24576": [f"{name}: is more than Ascend310P's largest vNPU template: a whole card, which books 21527 MB "
                  "(its memoryAllocatable), 3049 MB less than asked — HAMi writes 21527 into the limit (value: 24576)"],
        "21527": [],  # the whole card's own size
        "20000": [f"{name}: is more than Ascend310P's largest vNPU template: rounded up to a whole card "
                  "(21527 MB), as HAMi does (value: 20000)"]}  # fmt: skip


def test_two_vendors_in_one_container_stay_two_requests() -> None:
    w = run(pod('{limits: {nvidia.com/gpu: "1", huawei.com/Ascend310P: "1"}}'))
    assert not w.rejections and len(w.jobs[0].tasks[0].devices) == 2


SOFT = "{huawei.com/vnpu-mode: hami-core}"


def test_cores_above_100_are_accepted_clamped_and_said() -> None:
    w = run(pod('{limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "4096", '
                'huawei.com/Ascend910B3-core: "150"}}', annotations=SOFT))  # fmt: skip
    assert not w.rejections
    assert w.jobs[0].tasks[0].devices[0].cores == 100
    assert [x.line() for x in w.warnings] == [
        "spec.containers[0].resources.limits.huawei.com/Ascend910B3-core: is more than a card's "
        "100 % of cores: clamped to 100 (value: 150)"]  # fmt: skip
    w = run(pod('{limits: {nvidia.com/gpu: "1", nvidia.com/gpucores: "120"}}'))
    assert [x.line() for x in w.warnings] == [
        "spec.containers[0].resources.limits.nvidia.com/gpucores: is more than a card's 100 % of "
        "cores: clamped to 100 (value: 120)"]  # fmt: skip


def test_a_hami_memory_percentage_above_100_is_refused_as_hamis_webhook_does() -> None:
    """validateMemoryPercentage denies the pod; clamped, it ran on a whole card's memory."""
    assert reasons(pod('{limits: {nvidia.com/gpu: "1", nvidia.com/gpumem-percentage: "150"}}')) == [
        "spec.containers[0].resources.limits.nvidia.com/gpumem-percentage: must be an integer "
        "between 0 and 100 (a percentage of one card's memory) (value: 150)"]  # fmt: skip
    assert reasons(pod('{limits: {nvidia.com/gpu: "1", nvidia.com/gpumem-percentage: "100"}}')) == []


def test_a_policy_annotation_hami_ignores_is_accepted_with_a_warning() -> None:
    gpu = '{limits: {nvidia.com/gpu: "1"}}'
    w = run(pod(gpu, annotations='{hami.io/gpu-scheduler-policy: binpak, hami.io/node-scheduler-policy: Spread}'))
    assert not w.rejections and len(w.jobs) == 1
    assert [x.line() for x in w.warnings] == [
        "metadata.annotations[hami.io/gpu-scheduler-policy]: unknown policy 'binpak' (known: binpack, "
        "mutex, numa, spread, topology-aware; lower case): ignored, as HAMi ignores it; the "
        "scheduler's configured policy is used (value: binpak)",
        "metadata.annotations[hami.io/node-scheduler-policy]: expected binpack or spread: ignored, as "
        "HAMi ignores it; the scheduler's configured policy is used (value: Spread)"]  # fmt: skip
    assert not run(pod(gpu, annotations="{hami.io/gpu-scheduler-policy: 'binpack,numa'}")).warnings


def test_a_container_without_image_is_refused_like_the_api_server_does() -> None:
    assert reasons(pod("{}", image="")) == ["spec.containers[0].image: Required value"]
    job = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks: [{name: t, template: {spec: {containers: [{name: c, image: i}],
                                      initContainers: [{name: init}]}}}]
"""
    assert reasons(job) == ["spec.tasks[0].template.spec.initContainers[0].image: Required value"]


def test_extended_resources_need_a_limit_equal_to_the_request() -> None:
    assert reasons(pod('{requests: {huawei.com/Ascend910B3: "1"}}')) == [
        "spec.containers[0].resources.limits[huawei.com/Ascend910B3]: Required value: "
        "Limit must be set for non overcommitable resources"]  # fmt: skip
    unequal = pod('{requests: {huawei.com/Ascend910B3: "1"}, limits: {huawei.com/Ascend910B3: "2"}}')
    assert reasons(unequal) == [
        'spec.containers[0].resources.requests[huawei.com/Ascend910B3]: Invalid value: "1": '
        "must be equal to huawei.com/Ascend910B3 limit of 2"]  # fmt: skip
    # cpu and memory may be overcommitted: a lower request is fine, a higher one is not
    assert reasons(pod('{requests: {cpu: "1"}, limits: {cpu: "2"}}')) == []
    assert reasons(pod('{requests: {cpu: "2"}}')) == []
    assert reasons(pod('{requests: {memory: 2Gi}, limits: {memory: 1Gi}}')) == [
        'spec.containers[0].resources.requests[memory]: Invalid value: "2Gi": '
        "must be less than or equal to memory limit of 1Gi"]  # fmt: skip


def test_a_pod_with_dra_resource_claims_is_refused_saying_why() -> None:
    """Tessera allocates no DRA ResourceClaim; the kubelet starts no pod whose claims are not
    allocated and reserved for it, so binding it would leave it ContainerCreating for ever."""
    from services.core.devices import build_vendors
    from services.core.workload import admit, load_documents
    from services.core.workload.devicerequests import hami_parser

    reg = build_vendors()
    text = ("{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {resourceClaims: [{name: gpu, "
            "resourceClaimTemplateName: one-gpu}], containers: [{name: c, image: x, resources: "
            "{claims: [{name: gpu}]}}]}}")  # fmt: skip
    w = admit(load_documents(text), hami_parser(reg), reg.resource_names())
    assert not w.jobs
    [r] = w.rejections
    assert r.path == "spec.resourceClaims" and "Tessera does not allocate DRA ResourceClaims" in r.rule
