"""Issue 26 item 5: a pinning annotation under a card type the pod does not ask for is
ignored by HAMi; admission accepts the pod and says so, naming the key and the likely one."""

from __future__ import annotations

from services.core.devices import build_vendors
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()


def warnings(key: str) -> list[str]:
    doc = f"""
apiVersion: v1
kind: Pod
metadata: {{name: p, annotations: {{{key}: node-a-Ascend910B3-0}}}}
spec:
  containers: [{{name: c, image: x, resources: {{limits: {{huawei.com/Ascend910B3: "1"}}}}}}]
"""
    work = admit(load_documents(doc), hami_parser(REG), REG.resource_names())
    assert not work.rejections and len(work.jobs) == 1
    return [w.line() for w in work.warnings]


def test_a_mistyped_pin_is_accepted_with_a_warning_naming_the_key_it_meant() -> None:
    (line,) = warnings("hami.io/use-Ascend910B-uuid")
    assert "metadata.annotations[hami.io/use-Ascend910B-uuid]" in line
    assert "did you mean hami.io/use-Ascend910B3-uuid?" in line and "ignored" in line
    (line,) = warnings("hami.io/no-use-Ascend910b3-uuid")
    assert "did you mean hami.io/no-use-Ascend910B3-uuid?" in line


def test_the_pin_the_pod_reads_warns_of_nothing() -> None:
    assert warnings("hami.io/use-Ascend910B3-uuid") == []
    assert warnings("hami.io/no-use-Ascend910B3-uuid") == []


#: HAMi's examples/nvidia/specify_index_to_use.yaml and specify_index_not_use.yaml, as shipped
HAMI_INDEX_EXAMPLES = {
    "nvidia.com/use-gpuindexes": ("0,1", "1", "nvidia.com/use-gpuuuid"),
    "nvidia.com/nouse-gpuindexes": ("0", "2", "nvidia.com/nouse-gpuuuid"),
}


def test_hamis_card_index_pins_are_accepted_with_a_warning_that_they_pin_nothing() -> None:
    """rev-examples F1: the pod asked index 0 or 1 and was given index 3 without a word. HAMi's
    scheduler does not read the key either (its PR is unmerged), so the pod is accepted as HAMi
    accepts it, and the warning names the key, its value and the key that does pin."""
    for key, (value, count, uuid_key) in HAMI_INDEX_EXAMPLES.items():
        doc = f"""
apiVersion: v1
kind: Pod
metadata: {{name: gpu-pod, annotations: {{{key}: "{value}"}}}}
spec:
  containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: {count}}}}}}}]
"""
        work = admit(load_documents(doc), hami_parser(REG), REG.resource_names())
        assert not work.rejections and len(work.jobs) == 1
        (warning,) = [w for w in work.warnings if key in w.path]
        assert warning.path == f"metadata.annotations[{key}]" and warning.value == value
        assert "is not acted on" in warning.rule and uuid_key in warning.rule


def test_a_uuid_pin_is_not_warned_about() -> None:
    doc = """
apiVersion: v1
kind: Pod
metadata: {name: gpu-pod, annotations: {nvidia.com/use-gpuuuid: GPU-0}}
spec:
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
    work = admit(load_documents(doc), hami_parser(REG), REG.resource_names())
    assert not work.rejections and not [w for w in work.warnings if "nvidia.com" in w.path]
