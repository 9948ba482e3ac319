"""Init containers' cards (services/core/workload/initdevices.py): booked when the app asks for
none, run inside the app's slices when covered, refused with the field and the rule otherwise;
and the booked request takes the init container's slot in HAMi's pod annotations."""

from __future__ import annotations

from contracts.devices import CardSpec, SliceSpec
from contracts.events import SliceAssignment, TaskPlacement
from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.kube.pods import binding_annotations

REG = build_vendors()
CARD = "huawei.com/Ascend910B3"


def pod(inits: list[dict[str, str]], app: dict[str, str]) -> str:
    init = ", ".join(f"{{name: i{n}, image: busybox, resources: {{limits: {lim}}}}}"
                     for n, lim in enumerate(inits))  # fmt: skip
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  initContainers: [{init}]
  containers: [{{name: c, image: busybox, resources: {{limits: {app}}}}}]
"""


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def slice_of(memory: str) -> dict[str, str]:
    return {CARD: "1", f"{CARD}-memory": memory}


def test_the_largest_of_several_init_containers_is_booked_in_its_own_slot() -> None:
    w = run(pod([slice_of("8192"), slice_of("32768")], {"cpu": "2"}))
    assert not w.rejections
    [device] = w.jobs[0].tasks[0].devices
    assert (device.memory, device.container) == (32768, -1)
    task = w.jobs[0].tasks[0]
    spec = CardSpec(uuid="u0", node="n1", index=0, type="Ascend910B3", vendor="huawei",
                    memory=65536, cores=20, split_count=4, mode="template")  # fmt: skip
    sl = SliceSpec(kind="template", memory=32768, cores=10, template=device.template)
    placement = TaskPlacement(task="p", node="n1", slices=(SliceAssignment(card="u0", node="n1", slice=sl),))
    annotations = binding_annotations(placement, task, {"u0": spec}, 0.0)
    # slots: init 0 (empty), init 1 (the booked card), the app container (empty)
    assert annotations["hami.io/Ascend910B3-devices-to-allocate"] == ";u0,Ascend910B3,32768,10:;;"


def test_an_init_container_inside_the_app_containers_slice_books_nothing_more() -> None:
    w = run(pod([slice_of("8192")], slice_of("16384")))
    assert not w.rejections
    assert [(d.memory, d.container) for d in w.jobs[0].tasks[0].devices] == [(16384, 0)]
    whole = run(pod([slice_of("32768")], {CARD: "1"}))  # a whole card holds any slice of it
    assert not whole.rejections and len(whole.jobs[0].tasks[0].devices) == 1


def test_an_init_container_asking_more_than_the_app_of_the_same_model_is_refused_naming_it() -> None:
    [line] = [r.line() for r in run(pod([slice_of("32768")], slice_of("16384"))).rejections]
    assert line.startswith(f"spec.initContainers[0].resources.limits.{CARD}: ")
    assert "must fit within the app containers' requests of the same card model" in line
    assert "1 × Ascend910B3 (16384 MB" in line


def test_init_containers_of_two_models_book_both_and_incomparable_asks_are_refused() -> None:
    gpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}
    w = run(pod([slice_of("16384"), gpu], {"cpu": "1"}))
    assert not w.rejections
    assert sorted((d.type, d.container) for d in w.jobs[0].tasks[0].devices) == [("Ascend910B3", -2), ("NVIDIA", -1)]
    many = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4000"}  # two cards, small slices
    big = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}
    [line] = [r.line() for r in run(pod([many, big], {"cpu": "1"})).rejections]
    assert line.startswith("spec.initContainers[1].resources.limits.nvidia.com/gpu: ")
    assert "coverable by one of them" in line


def test_init_container_device_errors_name_the_init_container() -> None:
    lines = [r.line() for r in run(pod([{CARD: "1", f"{CARD}-memory": "70000"}], {"cpu": "1"})).rejections]
    assert lines and all(x.startswith("spec.initContainers[0].resources.limits.") for x in lines), lines
