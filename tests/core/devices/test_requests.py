"""Request parsing per vendor: HAMi defaults, sentinels, clamps, template rounding and rejections."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.workloads import DeviceRequest
from services.core.devices.registry import build_vendors
from services.core.devices.requests import check_container, parse_container
from services.core.devices.violations import RequestRejected

REG = build_vendors()
HAMI_CORE = {"huawei.com/vnpu-mode": "hami-core"}
B3_FAMILY = (
    "Ascend910A",
    "Ascend910B2",
    "Ascend910B3",
    "Ascend910B4",
    "Ascend910B4-1",
    "Ascend910C",
)


def one(limits: dict[str, Any], annotations: dict[str, str] | None = None, **want: Any) -> None:
    got = parse_container(limits, annotations=annotations, registry=REG)
    assert len(got) == 1, got
    for key, value in want.items():
        assert getattr(got[0], key) == value, (key, got[0])


# --- NVIDIA (hami.md §1.2 and §6 G) -----------------------------------------------------------

NVIDIA_CASES = [
    # G: count only → 100 % memory, cores defaulted to 100 (exclusive)
    (
        "count only",
        {"nvidia.com/gpu": 1},
        {"count": 1, "memory": 0, "memory_pct": 100, "cores": 100, "exclusive": True},
    ),
    ("quantity string", {"nvidia.com/gpu": "2"}, {"count": 2, "memory_pct": 100, "cores": 100}),
    (
        "explicit memory",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "3000"},
        {"memory": 3000, "memory_pct": 101, "cores": 0, "exclusive": False},
    ),
    (
        "memory and cores",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024, "nvidia.com/gpucores": 30},
        {"memory": 1024, "cores": 30},
    ),
    (
        "pct 50 not exclusive",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50},
        {"memory_pct": 50, "cores": 0, "exclusive": False},
    ),
    (
        "pct 100 exclusive",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100},
        {"memory_pct": 100, "cores": 100},
    ),
    # G: 0 or negative → unset (→ 100 % of memory); 101, >100, > int32 → clamped to 100.
    # The exclusive default reads the keys (defaultExclusiveCoreIfNeeded): a percentage present
    # and not 100, or a gpumem key of any value, leaves the card shareable (defaultCores, 0)
    (
        "pct 0 unset",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0},
        {"memory": 0, "memory_pct": 100, "cores": 0, "exclusive": False},
    ),
    (
        "gpumem 0 is all the memory, shareable",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 0},
        {"memory": 0, "memory_pct": 100, "cores": 0, "exclusive": False},
    ),
    (
        "pct 100 beside gpumem is exclusive with the gpumem",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100, "nvidia.com/gpumem": 4000},
        {"memory": 4000, "memory_pct": 101, "cores": 100, "exclusive": True},
    ),
    (
        "volcano pct 150 clamped",
        {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory-percentage": 150},
        {"memory_pct": 100},
    ),
    (
        "volcano pct negative unset",
        {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory-percentage": -5},
        {"memory_pct": 100},
    ),
    # G: percentage 0 with explicit memory → memory wins
    (
        "pct 0 and memory",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpumem-percentage": 0},
        {"memory": 2000, "memory_pct": 101, "cores": 0},
    ),
    (
        "cores clamped",
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 200},
        {"cores": 100, "exclusive": True},
    ),
    ("defaultGPUNum", {"nvidia.com/gpumem": 2000}, {"count": 1, "memory": 2000}),
    ("count from requests", {}, {"count": 1}),
    (
        "volcano names",
        {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 4096, "volcano.sh/vgpu-cores": 25},
        {"count": 1, "memory": 4096, "cores": 25, "resource": "volcano.sh/vgpu-number"},
    ),
    (
        "volcano percentage",
        {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory-percentage": 30},
        {"memory_pct": 30, "cores": 0},
    ),
]


@pytest.mark.parametrize(("name", "limits", "want"), NVIDIA_CASES, ids=[c[0] for c in NVIDIA_CASES])
def test_nvidia_parsing(name: str, limits: dict[str, Any], want: dict[str, Any]) -> None:
    if name == "count from requests":
        got = parse_container({}, {"nvidia.com/gpu": "1"}, registry=REG)
        assert got[0].count == 1 and got[0].cores == 100
        return
    one(limits, **want)


def test_limits_win_over_requests() -> None:
    got = parse_container({"nvidia.com/gpumem": 1000}, {"nvidia.com/gpumem": 5000}, registry=REG)
    assert got[0].memory == 1000


def test_nvidia_annotations_become_card_filters() -> None:
    annos = {
        "nvidia.com/use-gputype": "A100,H100",
        "nvidia.com/nouse-gputype": "",
        "nvidia.com/use-gpuuuid": "GPU-b, GPU-a",
        "nvidia.com/nouse-gpuuuid": "GPU-c",
        "nvidia.com/numa-bind": "true",
        "nvidia.com/vgpu-mode": "hami-core",
    }
    one(
        {"nvidia.com/gpu": 1},
        annos,
        use_types=("A100", "H100"),
        nouse_types=(),
        use_uuids=("GPU-a", "GPU-b"),
        nouse_uuids=("GPU-c",),
        numa_bind=True,
        mode="hami-core",
    )
    one(
        {"volcano.sh/vgpu-number": 1},
        {"volcano.sh/vgpu-mode": "mig", "volcano.sh/vgpu-use-gpuuuid": "u1"},
        mode="mig",
        use_uuids=("u1",),
    )


def test_either_systems_mode_annotation_holds_either_familys_request() -> None:
    """The article's §5.1 pod asks nvidia.com/gpu with volcano.sh/vgpu-mode: hami-core; Volcano
    holds it to hami-core cards (volcano.md §3.4), so Tessera must not drop the annotation."""
    one({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096}, {"volcano.sh/vgpu-mode": "hami-core"},
        mode="hami-core")  # fmt: skip
    one({"volcano.sh/vgpu-number": 1}, {"nvidia.com/vgpu-mode": "mig"}, mode="mig")
    one({"nvidia.com/gpu": 1}, {"nvidia.com/vgpu-mode": "mig", "volcano.sh/vgpu-mode": " mig"}, mode="mig")


def test_the_two_mode_annotations_set_differently_are_refused_naming_both() -> None:
    annos = {"nvidia.com/vgpu-mode": "hami-core", "volcano.sh/vgpu-mode": "mig"}
    with pytest.raises(RequestRejected) as info:
        parse_container({"nvidia.com/gpu": 1}, annotations=annos, registry=REG)
    assert str(info.value) == ("volcano.sh/vgpu-mode=mig differs from nvidia.com/vgpu-mode=hami-core: "
                               "a card has one mode; keep one of the two annotations")  # fmt: skip
    # a container asking no NVIDIA card is not held to them
    assert parse_container({"huawei.com/Ascend910B3": 1}, annotations=annos, registry=REG)


def test_a_config_naming_volcanos_resources_reads_each_container_once() -> None:
    """volcano-vgpu-device-config's resourceCountName is volcano.sh/vgpu-number: the names Tessera
    also reads for Volcano's pods. Read twice, a container asking one vGPU got two."""
    from services.core.devices.catalogue import load_catalogue

    cat = load_catalogue("nvidia:\n  resourceCountName: volcano.sh/vgpu-number\n"
                         "  resourceMemoryName: volcano.sh/vgpu-memory\n"
                         "  resourceMemoryPercentageName: volcano.sh/vgpu-memory-percentage\n"
                         "  resourceCoreName: volcano.sh/vgpu-cores\n")  # fmt: skip
    got = parse_container({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 1000},
                          annotations={"volcano.sh/vgpu-use-gpuuuid": "u1"}, registry=build_vendors(cat))  # fmt: skip
    assert [(r.count, r.memory, r.use_uuids) for r in got] == [(1, 1000, ("u1",))]


def test_no_device_resources_no_requests() -> None:
    assert parse_container({"cpu": "2", "memory": "4Gi", "example.com/foo": 1}, registry=REG) == ()
    assert parse_container({"nvidia.com/gpu": 0}, registry=REG) == ()


# --- Ascend (hami.md §2.3, §2.4) --------------------------------------------------------------

ASCEND_CASES = [
    (
        "whole card by count",
        {"huawei.com/Ascend910B3": 1},
        None,
        {"count": 1, "memory_pct": 100, "exclusive": True, "template": None},
    ),
    (
        "template rounding",
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 2000},
        None,
        {"memory": 16384, "template": "vir05_1c_16g", "cores": 5},
    ),
    (
        "second template",
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 16385},
        None,
        {"memory": 32768, "template": "vir10_3c_32g", "cores": 10},
    ),
    (
        "between largest template and capacity",
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 40000},
        None,
        {"memory_pct": 100, "exclusive": True, "template": None},
    ),
    (
        "310P vir01",
        {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": 2000},
        None,
        {"memory": 3072, "template": "vir01"},
    ),
    (
        "310P whole",
        {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": 13000},
        None,
        {"exclusive": True},
    ),
    ("multi whole cards", {"huawei.com/Ascend910B3": 4}, None, {"count": 4, "exclusive": True}),
    (
        "memory only means 1 card",
        {"huawei.com/Ascend910A-memory": 8000},
        None,
        {"count": 1, "memory": 8738, "template": "vir08"},
    ),
    (
        "hami-core raw memory",
        {
            "huawei.com/Ascend910B3": 1,
            "huawei.com/Ascend910B3-memory": 2000,
            "huawei.com/Ascend910B3-core": 30,
        },
        HAMI_CORE,
        {"memory": 2000, "cores": 30, "template": None, "mode": "hami-core", "exclusive": False},
    ),
    (
        "hami-core multi split",
        {"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910B3-memory": 2000},
        HAMI_CORE,
        {"count": 2, "memory": 2000},
    ),
    (
        "hami-core no memory",
        {"huawei.com/Ascend910B3": 1},
        HAMI_CORE,
        {"memory_pct": 100, "exclusive": False},
    ),
    ("910C 1 becomes 2", {"huawei.com/Ascend910C": 1}, None, {"count": 2, "exclusive": True}),
    ("910C 4 stays", {"huawei.com/Ascend910C": 4}, None, {"count": 4}),
    # HAMi's "npu > 1" rule reads the count asked (1), before its rewrite to 2: a template per die
    (
        "910C vNPU of 1 is a module's two",
        {"huawei.com/Ascend910C": 1, "huawei.com/Ascend910C-memory": 1000},
        None,
        {"count": 2, "memory": 16384, "template": "vir05_1c_16g", "exclusive": False},
    ),
    (
        "legacy alias 910B",
        {"huawei.com/Ascend910B": 1, "huawei.com/Ascend910B-memory": 2000},
        None,
        {
            "type": "Ascend910B3",
            "template": "vir05_1c_16g",
            "resource": "huawei.com/Ascend910B",
            "allowed_types": (),
        },
    ),
    (
        "family alias 910",
        {"huawei.com/Ascend910": 2},
        None,
        {"type": "Ascend910", "allowed_types": B3_FAMILY, "count": 2, "exclusive": True},
    ),
    (
        "family alias soft memory",
        {"huawei.com/Ascend910": 1, "huawei.com/Ascend910-memory": 4000},
        HAMI_CORE,
        {"memory": 4000, "allowed_types": B3_FAMILY},
    ),
    (
        "uuid annotations",
        {"huawei.com/Ascend910B3": 1},
        {"hami.io/use-Ascend910B3-uuid": "u2,u1", "hami.io/no-use-Ascend910B3-uuid": "u3"},
        {"use_uuids": ("u1", "u2"), "nouse_uuids": ("u3",)},
    ),
    (
        "other vnpu-mode is hard",
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 1},
        {"huawei.com/vnpu-mode": "soft"},
        {"template": "vir05_1c_16g", "mode": ""},
    ),
]


@pytest.mark.parametrize(
    ("name", "limits", "annos", "want"), ASCEND_CASES, ids=[c[0] for c in ASCEND_CASES]
)
def test_ascend_parsing(
    name: str, limits: dict[str, Any], annos: dict[str, str] | None, want: dict[str, Any]
) -> None:
    one(limits, annos, **want)


# --- rejections: typed, all collected, readable -----------------------------------------------

REJECTIONS = [
    (
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 70000},
        None,
        ["huawei.com/Ascend910B3-memory=70000 exceeds card capacity 65536"],
    ),
    (
        {"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910B3-memory": 2000},
        None,
        [
            "huawei.com/Ascend910B3-memory=2000 vNPU not supported for multiple devices: huawei.com/Ascend910B3=2 must request whole cards"
        ],
    ),
    (
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-core": 10},
        None,
        [
            "huawei.com/Ascend910B3-core=10 is only supported in hami-core (soft split) mode; set annotation huawei.com/vnpu-mode: hami-core"
        ],
    ),
    (
        {"huawei.com/Ascend910C": 3},
        None,
        ["huawei.com/Ascend910C=3 must be 1 or 2*n (Ascend910C allocates modules of 2 NPUs)"],
    ),
    # a 910C vNPU asked as 2 (not rewritten from 1) is "npu > 1 cannot be split", as in HAMi
    (
        {"huawei.com/Ascend910C": 2, "huawei.com/Ascend910C-memory": 1000},
        None,
        ["huawei.com/Ascend910C-memory=1000 vNPU not supported for multiple devices: huawei.com/Ascend910C=2"],
    ),
    (
        {"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": "16Gi"},
        None,
        ["huawei.com/Ascend910B3-memory=16Gi is a byte quantity"],
    ),
    ({"huawei.com/Ascend910B3": "0.5"}, None, ["huawei.com/Ascend910B3=0.5 is not an integer"]),
    ({"huawei.com/Ascend910B3": 0}, None, ["huawei.com/Ascend910B3=0 must be >= 1"]),
    (
        {"huawei.com/Ascend910": 1, "huawei.com/Ascend910-memory": 70000},
        None,
        ["huawei.com/Ascend910-memory=70000 exceeds card capacity 65536"],
    ),
    (
        {"nvidia.com/gpu-mem": 3000, "nvidia.com/gpu": 1},
        None,
        ["nvidia.com/gpu-mem: unknown device resource; did you mean nvidia.com/gpumem?"],
    ),
    ({"huawei.com/Ascend910B3-memroy": 1}, None, ["did you mean huawei.com/Ascend910B3-memory?"]),
    ({"nvidia.com/gpumem": "abc"}, None, ["nvidia.com/gpumem=abc is not a Kubernetes quantity"]),
    ({"nvidia.com/gpumem": -1}, None, ["nvidia.com/gpumem=-1 must be >= 0"]),
    # HAMi's webhook denies a percentage outside 0..100 (validateMemoryPercentage)
    *(
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": pct},
            None,
            [f"nvidia.com/gpumem-percentage={pct} must be an integer between 0 and 100"],
        )
        for pct in (101, 150, 2**40, -5)
    ),
    (
        {"nvidia.com/gpu": 0, "nvidia.com/gpumem": 10},
        None,
        ["nvidia.com/gpu=0 must be >= 1 when memory or cores are requested"],
    ),
]


@pytest.mark.parametrize(("limits", "annos", "messages"), REJECTIONS)
def test_rejections_name_resource_value_and_rule(
    limits: dict[str, Any], annos: dict[str, str] | None, messages: list[str]
) -> None:
    with pytest.raises(RequestRejected) as info:
        parse_container(limits, annotations=annos, registry=REG)
    text = str(info.value)
    for m in messages:
        assert m in text
    assert all(v.resource and v.rule for v in info.value.violations)


def test_all_violations_of_a_container_are_collected() -> None:
    limits = {
        "huawei.com/Ascend910B3": 1,
        "huawei.com/Ascend910B3-memory": 70000,
        "huawei.com/Ascend910B3-core": 5,
        "nvidia.com/gpumem": "x",
        "nvidia.com/gpu-mem": 1,
    }
    requests, violations = check_container(limits, registry=REG)
    assert requests == ()
    assert {v.resource for v in violations} == {
        "huawei.com/Ascend910B3-memory",
        "huawei.com/Ascend910B3-core",
        "nvidia.com/gpumem",
        "nvidia.com/gpu-mem",
    }


def test_mixed_vendors_in_one_container() -> None:
    got = parse_container({"nvidia.com/gpu": 1, "huawei.com/Ascend310P": 1}, registry=REG)
    assert sorted(r.vendor for r in got) == ["huawei", "nvidia"]
    assert all(isinstance(r, DeviceRequest) for r in got)
