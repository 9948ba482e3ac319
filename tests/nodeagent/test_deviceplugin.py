"""The node side's pure parts: the node annotations read back as the same cards by the reader
of HAMi's protocol, the kubelet's device counts, Allocate's answer per vendor and mode with
HAMi's pop semantics, its refusals, and the preferred allocation."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from contracts import hami
from contracts.devices import CardSpec
from contracts.events import TaskFinished
from services.core.devices.catalogue import default_catalogue
from services.kube.nodes import UNHEALTHY_REGISTERED, node_view
from services.kube.pods import task_event
from services.nodeagent.deviceplugin.allocate import AllocateError, HostPaths, allocate
from services.nodeagent.deviceplugin.node import installed_limiters, served, writable_dirs
from services.nodeagent.deviceplugin.resources import node_annotations, preferred, resources
from services.nodeagent.inventory import discovered_node
from tests.nodeagent.test_discovery import fixture

CATALOGUE = default_catalogue()
NOW = 1_796_000_000.0


def _node(npu: str = "", gpu: str = "", core: bool = False) -> list[CardSpec]:
    return list(discovered_node("n1", 0, 0, npu_smi=npu, nvidia_smi_xml=gpu, hami_vnpu_core=core).cards)


def _node_object(annotations: dict[str, str]) -> dict:
    return {"metadata": {"name": "n1", "annotations": annotations},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "20"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


@pytest.mark.parametrize("core", [False, True])
def test_annotations_read_back_as_the_discovered_cards(core: bool) -> None:
    cards = _node(fixture("npu-smi-910b3x8.txt"), fixture("nvidia-smi-a100x2.xml"), core)
    ann = node_annotations(cards, CATALOGUE, NOW, core)
    assert ann[hami.ascend_handshake_key("Ascend910B3")] == hami.reported_value(NOW) == "Reported_2026.11.30 00:53:20"
    assert ann[hami.VNPU_CORE] == ("true" if core else "false")
    view = node_view(_node_object(ann), CATALOGUE, NOW)
    assert view.problems == ()
    key = lambda c: (c.vendor, c.index, c.uuid)  # noqa: E731
    # HAMi's annotation carries health, not why: the read-back names the annotation instead
    assert [replace(c, health_reason="") for c in view.registered.cards] == sorted(
        [replace(c, health_reason="") for c in cards], key=key)
    assert not view.registered.cards[6].healthy  # the Critical chip, as HAMi omits health false
    assert view.registered.cards[6].health_reason == UNHEALTHY_REGISTERED
    assert '"health"' not in ann[hami.ascend_register_key("Ascend910B3")].split("},{")[6]


def test_the_kubelet_counts_split_count_devices_per_card() -> None:
    cards = _node(fixture("npu-smi-910b3x8.txt"), fixture("nvidia-smi-a100x2.xml"))
    res = {r.name: r for r in resources(cards, CATALOGUE)}
    # the family and pre-v2.7 names too (the article's YAML asks `huawei.com/Ascend910`): the
    # same devices, popped from the model's annotation
    assert {n: len(r.devices) for n, r in res.items()} == {
        "huawei.com/Ascend910B3": 32, "huawei.com/Ascend910": 32, "huawei.com/Ascend910B": 32, "nvidia.com/gpu": 20}  # fmt: skip
    assert res["huawei.com/Ascend910"].devices == res["huawei.com/Ascend910B3"].devices
    assert res["huawei.com/Ascend910"].to_allocate == res["huawei.com/Ascend910B"].to_allocate \
        == hami.ascend_to_allocate_key("Ascend910B3")  # fmt: skip
    npu = res["huawei.com/Ascend910B3"]
    assert npu.devices[0].id == "n1-Ascend910B3-0-0" and npu.devices[0].numa is None
    assert [d.health for d in npu.devices if d.card == "n1-Ascend910B3-6"] == ["Unhealthy"] * 4
    gpu = res["nvidia.com/gpu"]
    assert gpu.devices[0].id == "GPU-9a8c1f3e-5b2d-4c7a-8e61-0f2b7d4c9a13-0" and gpu.devices[0].numa == 0
    assert (npu.to_allocate, gpu.to_allocate) == (hami.ascend_to_allocate_key("Ascend910B3"), hami.NVIDIA_TO_ALLOCATE)
    assert npu.socket == "tessera-huawei.com_Ascend910B3.sock"


def test_a_node_of_two_card_models_serves_no_family_name() -> None:
    """Allocate pops the devices from one model's annotation: a family name over two models on
    one node could not say which, so the node serves only the models' own names (and the
    pre-v2.7 name of 910B3, which is one model)."""
    cards = _node(fixture("npu-smi-910b3x8.txt"))
    mixed = [replace(c, type="Ascend910B4") if c.index >= 4 else c for c in cards]
    assert sorted(r.name for r in resources(mixed, CATALOGUE)) == [
        "huawei.com/Ascend910B", "huawei.com/Ascend910B3", "huawei.com/Ascend910B4"]  # fmt: skip


def _pod(key: str, slots: list[list[tuple[str, int, int]]], word: str, templates: dict[str, str] | None = None) -> dict[str, str]:
    devs = [[hami.PodDevice(u, word, m, c) for u, m, c in slot] for slot in slots]
    out = {key: hami.encode_pod_devices(devs), hami.BIND_PHASE: "allocating"}
    if templates is not None:
        out[f"huawei.com/{word}"] = hami.encode_runtime_info([d for s in devs for d in s], templates)
    return out


def test_ascend_template_mode_pops_one_container_per_call() -> None:
    cards = _node(fixture("npu-smi-910b3x8.txt"))
    res = resources(cards, CATALOGUE)[0]
    by_uuid = {c.uuid: c for c in cards}
    a, b = "n1-Ascend910B3-2", "n1-Ascend910B3-5"
    ann = _pod(res.to_allocate, [[], [(a, 16384, 5)], [(b, 65536, 20)]], "Ascend910B3",
               {a: "vir05_1c_16g", b: ""})  # an init container without devices, then two  # fmt: skip
    first = allocate(res, by_uuid, ann, [["x-0"]], containers=["init", "c1", "c2"], pod_uid="u")
    assert [g.envs for g in first.grants] == [{"ASCEND_VISIBLE_DEVICES": "2", "ASCEND_VNPU_SPECS": "vir05_1c_16g"}]
    assert not first.done and hami.BIND_PHASE not in first.patch
    second = allocate(res, by_uuid, {**ann, **first.patch}, [["y-1"]], containers=["init", "c1", "c2"], pod_uid="u")
    assert [g.envs for g in second.grants] == [{"ASCEND_VISIBLE_DEVICES": "5"}]  # a whole card: no vNPU
    assert second.done and second.patch == {res.to_allocate: ";;;", hami.BIND_PHASE: "success"}
    with pytest.raises(AllocateError, match="no devices left to allocate"):
        allocate(res, by_uuid, {**ann, **second.patch}, [["z-0"]], containers=[], pod_uid="u")


def test_ascend_hami_core_sets_the_vnpu_hook_and_its_per_container_region() -> None:
    cards = _node(fixture("npu-smi-910b3x8.txt"), core=True)
    res = resources(cards, CATALOGUE)[0]
    ann = _pod(res.to_allocate, [[("n1-Ascend910B3-1", 8192, 25), ("n1-Ascend910B3-3", 8192, 25)]], "Ascend910B3")
    got = allocate(res, {c.uuid: c for c in cards}, ann, [["a", "b"]], containers=["main"], pod_uid="uid-7")
    grant = got.grants[0]
    assert grant.envs == {"ASCEND_VISIBLE_DEVICES": "1,3", "NPU_MEM_QUOTA": "8192", "NPU_PRIORITY": "25",
                          "NPU_GLOBAL_SHM_PATH": "/hami-shared-region/1_global_registry",
                          "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem"}  # fmt: skip
    mounts = {m.container_path: (m.host_path, m.read_only) for m in grant.mounts}
    assert mounts["/hami-vnpu-shmem"] == ("/usr/local/hami-vnpu-core/containers/uid-7_main", False)
    assert mounts["/etc/ld.so.preload"] == ("/usr/local/hami-vnpu-core/ld.so.preload", True)
    assert got.done


def test_nvidia_gets_uuids_and_hami_core_limits() -> None:
    cards = _node(gpu=fixture("nvidia-smi-a100x2.xml"))
    res = resources(cards, CATALOGUE)[0]
    g0, g1 = (c.uuid for c in cards)
    ann = _pod(hami.NVIDIA_TO_ALLOCATE, [[(g1, 10000, 30), (g0, 20000, 30)]], "NVIDIA")
    got = allocate(res, {c.uuid: c for c in cards}, ann, [["p", "q"]], containers=["c"], pod_uid="u1")
    envs = got.grants[0].envs
    assert envs["NVIDIA_VISIBLE_DEVICES"] == f"{g1},{g0}"
    assert (envs["CUDA_DEVICE_MEMORY_LIMIT_0"], envs["CUDA_DEVICE_MEMORY_LIMIT_1"], envs["CUDA_DEVICE_SM_LIMIT"]) == ("10000m", "20000m", "30")
    assert "CUDA_OVERSUBSCRIBE" not in envs
    assert ("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", True) in [
        (m.container_path, m.host_path, m.read_only) for m in got.grants[0].mounts]  # fmt: skip


def test_refusals_name_the_annotation_and_the_rule() -> None:
    cards = _node(fixture("npu-smi-910b3x8.txt"))
    res = resources(cards, CATALOGUE)[0]
    by_uuid = {c.uuid: c for c in cards}
    ann = _pod(res.to_allocate, [[("n1-Ascend910B3-0", 16384, 5)]], "Ascend910B3")
    with pytest.raises(AllocateError, match=r"device number not matched: the kubelet asks for 2 .* holds 1"):
        allocate(res, by_uuid, ann, [["a", "b"]], containers=["c"], pod_uid="u")
    other = _pod(res.to_allocate, [[("n2-Ascend910B3-0", 16384, 5)]], "Ascend910B3")
    with pytest.raises(AllocateError, match="card n2-Ascend910B3-0 is not one of this node's"):
        allocate(res, by_uuid, other, [["a"]], containers=["c"], pod_uid="u")


def test_preferred_allocation_steers_the_kubelet_to_the_committed_cards() -> None:
    available = [f"c{i}-{k}" for i in range(3) for k in range(4)]
    assert preferred(available, [], 2, ["c2", "c0"]) == ["c2-0", "c0-0"]
    assert preferred(available, ["c1-3"], 2, ["c2", "c0"]) == ["c1-3", "c2-0"]
    assert preferred(available, [], 3, ["c2"]) == ["c2-0", "c0-0", "c0-1"]
    assert preferred(["c0-1"], [], 1, ["c2"]) == ["c0-1"]  # the committed card has no free share


def test_a_refused_allocate_finishes_the_task_as_the_kubelet_will() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "annotations": {hami.BIND_PHASE: "failed"}},
           "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}  # fmt: skip
    assert task_event(pod, 5.0) == TaskFinished(namespace="ns", name="p", task="p", node="n1", exit_code=1,
                                                reason="UnexpectedAdmissionError", at=5.0)  # fmt: skip
    pod["metadata"]["annotations"][hami.BIND_PHASE] = "allocating"
    assert task_event(pod, 5.0) is None


def test_a_gpu_in_mig_mode_is_registered_unhealthy_to_the_kubelet_and_the_scheduler() -> None:
    """Tessera's Allocate cannot give MIG instances: such a GPU advertised healthy drew pods
    that each failed the kubelet's admission. Registered unhealthy, it draws none; the other
    GPU is served as before."""
    xml = fixture("nvidia-smi-a100x2.xml").replace("<current_mig>Disabled</current_mig>",
                                                    "<current_mig>Enabled</current_mig>", 1)  # fmt: skip
    cards = served(_node(gpu=xml))
    assert [(c.mode, c.healthy) for c in cards] == [("mig", False), ("hami-core", True)]
    res = resources(cards, CATALOGUE)[0]
    health = {d.card: d.health for d in res.devices}
    assert health == {cards[0].uuid: "Unhealthy", cards[1].uuid: "Healthy"}
    registered = node_annotations(cards, CATALOGUE, NOW, False)[hami.NVIDIA_REGISTER]
    devices = hami.decode_register(hami.NVIDIA_REGISTER, registered)
    assert [(d.uuid, d.health) for d in devices] == [(cards[0].uuid, False), (cards[1].uuid, True)]


def test_without_the_limiter_on_the_node_a_slice_is_refused_and_a_whole_card_goes_bare(tmp_path: Path) -> None:
    """Nothing but HAMi's own plugin images installs HAMi-core's libvgpu.so or the vNPU hook:
    mounted anyway, the runtime made the missing files empty directories and a slice ran with
    no limit. Looked for on the node: a slice is refused naming the files, a whole card is given
    without the hook (nothing to limit)."""
    paths = HostPaths(hami_core=str(tmp_path / "local"), vnpu_core=str(tmp_path / "vnpu-core"),
                      shared_region=str(tmp_path / "shared"), vgpu_lock=str(tmp_path / "vgpulock"))  # fmt: skip
    assert installed_limiters(paths) == frozenset()
    gpus = _node(gpu=fixture("nvidia-smi-a100x2.xml"))
    res = resources(gpus, CATALOGUE)[0]
    g0 = gpus[0].uuid
    by_uuid = {c.uuid: c for c in gpus}
    none = frozenset[str]()
    with pytest.raises(AllocateError, match=r"a slice needs the in-container limiter \(HAMi-core's .*libvgpu.so"):
        allocate(res, by_uuid, _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, 10000, 30)]], "NVIDIA"), [["p"]],
                 containers=["c"], pod_uid="u", paths=paths, limiters=none)  # fmt: skip
    whole = allocate(res, by_uuid, _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, gpus[0].memory, 100)]], "NVIDIA"),
                     [["p"]], containers=["c"], pod_uid="u", paths=paths, limiters=none)  # fmt: skip
    assert whole.grants[0].envs == {"NVIDIA_VISIBLE_DEVICES": g0} and whole.grants[0].mounts == ()
    npus = _node(fixture("npu-smi-910b3x8.txt"), core=True)
    ascend = resources(npus, CATALOGUE)[0]
    with pytest.raises(AllocateError, match=r"vnpu-core/ld\.so\.preload"):
        allocate(ascend, {c.uuid: c for c in npus}, _pod(ascend.to_allocate, [[(npus[1].uuid, 8192, 25)]],
                 "Ascend910B3"), [["a"]], containers=["c"], pod_uid="u", paths=paths, limiters=none)  # fmt: skip
    # installed: found, and the grant's writable directories are made world-writable
    hook = tmp_path / "local" / "vgpu"
    hook.mkdir(parents=True)
    (hook / "libvgpu.so").write_bytes(b"\x7fELF")
    (hook / "ld.so.preload").write_text(str(hook / "libvgpu.so") + "\n")
    assert installed_limiters(paths) == frozenset({"nvidia"})
    got = allocate(res, by_uuid, _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, 10000, 30)]], "NVIDIA"), [["p"]],
                   containers=["c"], pod_uid="u", paths=paths, limiters=installed_limiters(paths))  # fmt: skip
    writable_dirs(got)
    for m in got.grants[0].mounts:
        if not m.read_only:
            assert Path(m.host_path).is_dir() and Path(m.host_path).stat().st_mode & 0o777 == 0o777, m
    assert {m.host_path for m in got.grants[0].mounts if not m.read_only} == {
        str(hook / "containers" / "u_c"), str(tmp_path / "vgpulock")}


def test_a_node_without_the_limiter_serves_its_soft_sliced_cards_whole() -> None:
    """Allocate refuses slices where the vendor's limiter is missing; offered as shares, the
    cards drew slices that each failed admission. Served whole (split count 1) to the kubelet
    and the scheduler; template-mode Ascend cards need no limiter and keep their count."""
    gpus = served(_node(gpu=fixture("nvidia-smi-a100x2.xml")), limiters=frozenset({"huawei"}))
    assert {(c.mode, c.split_count) for c in gpus} == {("hami-core", 1)}
    assert len(resources(gpus, CATALOGUE)[0].devices) == 2
    registered = hami.decode_register(hami.NVIDIA_REGISTER, node_annotations(gpus, CATALOGUE, NOW, False)[hami.NVIDIA_REGISTER])
    assert [d.count for d in registered] == [1, 1]
    npus = served(_node(fixture("npu-smi-910b3x8.txt")), limiters=frozenset())
    assert {(c.mode, c.split_count) for c in npus} == {("template", 4)}
    soft = served(_node(fixture("npu-smi-910b3x8.txt"), core=True), limiters=frozenset())
    assert {(c.mode, c.split_count) for c in soft} == {("hami-core", 1)}
    assert {c.split_count for c in served(_node(gpu=fixture("nvidia-smi-a100x2.xml")))} == {10}


def test_a_container_with_cuda_disable_control_gets_no_preload() -> None:
    """HAMi's switch: `CUDA_DISABLE_CONTROL=true` in a container skips the `/etc/ld.so.preload`
    mount (HAMi-core not loaded), the other mounts and limits stay."""
    cards = _node(gpu=fixture("nvidia-smi-a100x2.xml"))
    res = resources(cards, CATALOGUE)[0]
    g0 = cards[0].uuid
    ann = _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, 10000, 30)]], "NVIDIA")
    by_uuid = {c.uuid: c for c in cards}
    off = allocate(res, by_uuid, ann, [["p"]], containers=["c"], pod_uid="u", uncontrolled=frozenset({"c"}))
    on = allocate(res, by_uuid, ann, [["p"]], containers=["c"], pod_uid="u", uncontrolled=frozenset({"other"}))
    assert "/etc/ld.so.preload" not in {m.container_path for m in off.grants[0].mounts}
    assert "/etc/ld.so.preload" in {m.container_path for m in on.grants[0].mounts}
    assert off.grants[0].envs == on.grants[0].envs


def test_a_slice_on_a_card_served_whole_gets_the_card_bare() -> None:
    """Served at split count 1 (no limiter), a card still takes a slice in the scheduler's fit;
    it holds the card alone, so Allocate gives it the card without the hook (refused, the Job
    made the pod again onto the same card, for ever)."""
    gpus = served(_node(gpu=fixture("nvidia-smi-a100x2.xml")), limiters=frozenset())
    res = resources(gpus, CATALOGUE)[0]
    g0 = gpus[0].uuid
    got = allocate(res, {c.uuid: c for c in gpus}, _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, 4000, 30)]], "NVIDIA"),
                   [["p"]], containers=["c"], pod_uid="u", limiters=frozenset())  # fmt: skip
    assert got.grants[0].envs == {"NVIDIA_VISIBLE_DEVICES": g0} and got.grants[0].mounts == ()


def test_a_gpu_container_gets_the_env_hamis_webhook_would_have_written() -> None:
    """HAMi's MutateAdmission adds GPU_CORE_UTILIZATION_POLICY (gpuCorePolicy unless default) and
    CUDA_TASK_PRIORITY (the container's nvidia.com/priority limit); with no webhook, a created
    pod's spec cannot change, so Tessera's Allocate answer carries them."""
    from services.nodeagent.deviceplugin.node import _priority

    cards = _node(gpu=fixture("nvidia-smi-a100x2.xml"))
    res = resources(cards, CATALOGUE)[0]
    g0 = cards[0].uuid
    ann = _pod(hami.NVIDIA_TO_ALLOCATE, [[(g0, 10000, 30)]], "NVIDIA")
    by_uuid = {c.uuid: c for c in cards}
    got = allocate(res, by_uuid, ann, [["p"]], containers=["c"], pod_uid="u",
                   core_policy="force", priorities={"c": "1"})  # fmt: skip
    envs = got.grants[0].envs
    assert (envs["GPU_CORE_UTILIZATION_POLICY"], envs["CUDA_TASK_PRIORITY"]) == ("force", "1")
    plain = allocate(res, by_uuid, ann, [["p"]], containers=["c"], pod_uid="u",
                     core_policy="default", priorities={"other": "0"}).grants[0].envs  # fmt: skip
    assert "GPU_CORE_UTILIZATION_POLICY" not in plain and "CUDA_TASK_PRIORITY" not in plain
    limits = {"resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/priority": "0"}}}
    assert _priority(limits, "nvidia.com/priority") == "0"
    assert _priority({"resources": {"requests": {"nvidia.com/priority": "1"}}}, "nvidia.com/priority") is None
