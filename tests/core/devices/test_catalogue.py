"""Catalogue: HAMi chart defaults, both vnpus forms, strict errors naming the key path, aliases."""

from __future__ import annotations

import pytest

from services.core.devices.catalogue import default_catalogue, load_catalogue
from services.core.devices.templates import trim_memory
from services.core.devices.violations import CatalogueError

# chipName, commonWord, allocatable, capacity, aiCore, aiCPU, templates, slots (hami.md §2.2)
CHIP_TABLE = [
    ("910A", "Ascend910A", 32768, 32768, 30, 0, ["vir02", "vir04", "vir08", "vir16"], 15),
    (
        "910B2",
        "Ascend910B2",
        65536,
        65536,
        24,
        6,
        ["vir03_1c_8g", "vir06_1c_16g", "vir12_3c_32g"],
        8,
    ),
    ("910B3", "Ascend910B3", 65536, 65536, 20, 7, ["vir05_1c_16g", "vir10_3c_32g"], 4),
    ("910B4-1", "Ascend910B4-1", 65536, 65536, 20, 7, ["vir05_1c_16g", "vir10_3c_32g"], 4),
    ("910B4", "Ascend910B4", 32768, 32768, 20, 7, ["vir05_1c_8g", "vir10_3c_16g"], 4),
    ("310P3", "Ascend310P", 21527, 24576, 8, 7, ["vir01", "vir02", "vir04"], 7),
    ("Ascend910", "Ascend910C", 65536, 65536, 20, 7, ["vir05_1c_16g", "vir10_3c_32g"], 4),
]


@pytest.mark.parametrize(
    ("chip", "word", "alloc", "cap", "ai_core", "ai_cpu", "templates", "slots"), CHIP_TABLE
)
def test_default_chip_table_matches_hami_chart(
    chip: str,
    word: str,
    alloc: int,
    cap: int,
    ai_core: int,
    ai_cpu: int,
    templates: list[str],
    slots: int,
) -> None:
    c = default_catalogue().chip(word)
    assert c is not None
    assert (c.chip_name, c.memory_allocatable, c.memory_capacity, c.ai_core, c.ai_cpu) == (
        chip,
        alloc,
        cap,
        ai_core,
        ai_cpu,
    )
    assert [t.name for t in c.templates] == templates
    assert c.slots_per_card == slots
    assert c.resource_name == f"huawei.com/{word}"
    assert c.resource_memory_name == f"huawei.com/{word}-memory"
    assert c.super_pod == (word == "Ascend910C")


def test_nvidia_defaults_are_chart_values() -> None:
    n = default_catalogue().nvidia
    assert (n.resource_count_name, n.resource_memory_name, n.resource_core_name) == (
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
    )
    assert (n.device_split_count, n.default_memory, n.default_cores, n.default_gpu_num) == (
        10,
        0,
        0,
        1,
    )


# hami.md §2.3 trimMemory examples and volcano.md §3.2 310P table
TRIM_CASES = [
    ("Ascend910A", 2000, 2184, "vir02"),
    ("Ascend910A", 8738, 8738, "vir08"),
    ("Ascend910A", 20000, 32768, None),
    ("Ascend910A", 40000, None, None),
    ("Ascend310P", 2000, 3072, "vir01"),
    ("Ascend310P", 0, 3072, "vir01"),
    ("Ascend310P", 3072, 3072, "vir01"),
    ("Ascend310P", 3073, 6144, "vir02"),
    ("Ascend310P", 6145, 12288, "vir04"),
    ("Ascend310P", 12289, 21527, None),
    ("Ascend310P", 13000, 21527, None),
    ("Ascend310P", 24576, 21527, None),
    ("Ascend310P", 24577, None, None),
    ("Ascend310P", 30000, None, None),
    ("Ascend910B3", 2000, 16384, "vir05_1c_16g"),
    ("Ascend910B3", 16385, 32768, "vir10_3c_32g"),
    ("Ascend910B3", 40000, 65536, None),
    ("Ascend910B4-1", 20000, 32768, "vir10_3c_32g"),
]


@pytest.mark.parametrize(("word", "request_mb", "memory", "template"), TRIM_CASES)
def test_trim_memory(word: str, request_mb: int, memory: int | None, template: str | None) -> None:
    chip = default_catalogue().chip(word)
    assert chip is not None
    got = trim_memory(chip, request_mb)
    if memory is None:
        assert got is None
    else:
        assert got is not None and (got.memory, got.template) == (memory, template)


NEW_FORM = """
nvidia:
  resourceCountName: nvidia.com/gpu
  deviceSplitCount: 4
  defaultMemory: 1000
vnpus:
  hamiVnpuCore: true
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: huawei.com/Ascend910B3
    resourceMemoryName: huawei.com/Ascend910B3-memory
    memoryAllocatable: 65536
    memoryCapacity: 65536
    aiCore: 20
    aiCPU: 7
    templates:
    - {name: vir10_3c_32g, memory: 32768, aiCore: 10, aiCPU: 3}
    - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
"""

OLD_FORM = """
vnpus:
- chipName: 910B
  commonWord: Ascend910B
  resourceName: huawei.com/Ascend910B
  resourceMemoryName: huawei.com/Ascend910B-memory
  memoryAllocatable: 65536
  memoryCapacity: 65536
  aiCore: 20
  templates:
  - {name: vir05_1c_16g, memory: 16384, aiCore: 5}
"""


def test_new_vnpus_form_loads_and_sorts_templates() -> None:
    cat = load_catalogue(NEW_FORM)
    assert cat.hami_vnpu_core is True
    assert cat.nvidia.device_split_count == 4 and cat.nvidia.default_memory == 1000
    assert [c.common_word for c in cat.ascend] == ["Ascend910B3"]
    chip = cat.ascend[0]
    assert [t.name for t in chip.templates] == ["vir05_1c_16g", "vir10_3c_32g"]
    assert chip.resource_core_name == "huawei.com/Ascend910B3-core"
    # an alias whose target is absent from the configured chips disappears
    assert "huawei.com/Ascend910B" in cat.aliases and "huawei.com/Ascend910" in cat.aliases
    assert cat.aliases["huawei.com/Ascend910"] == ("Ascend910B3",)


def test_old_flat_vnpus_form_and_real_legacy_commonword_beats_alias() -> None:
    cat = load_catalogue(OLD_FORM)
    assert cat.hami_vnpu_core is False
    assert cat.ascend[0].common_word == "Ascend910B"
    assert "huawei.com/Ascend910B" not in cat.aliases


def test_empty_document_gives_defaults_and_other_vendor_sections_are_accepted() -> None:
    assert load_catalogue("") == default_catalogue()
    cat = load_catalogue("cambricon:\n  resourceCountName: cambricon.com/vmlu\n")
    assert cat.ascend == default_catalogue().ascend


BAD = [
    (
        "vnpus:\n  configs:\n"
        + "".join(
            f"  - {{chipName: c{i}, commonWord: W{i}, resourceName: huawei.com/W{i}, resourceMemoryName: huawei.com/W{i}-memory, memoryAllocatable: 100, memoryCapacity: 100, aiCore: 1{', templates: [{name: t, memroy: 5, aiCore: 1}]' if i == 2 else ''}}}\n"
            for i in range(3)
        ),
        "vnpus.configs[2].templates[0].memroy: unknown key",
    ),
    (
        "nvidia:\n  deviceSplitCount: ten\n",
        "nvidia.deviceSplitCount: expected an integer, got 'ten'",
    ),
    ("nvidia:\n  deviceSplitCount: 0\n", "nvidia.deviceSplitCount: must be >= 1, got 0"),
    ("nvidia:\n  resourceCountNam: x\n", "nvidia.resourceCountNam: unknown key"),
    ("vnpus:\n  hamiVnpuCore: yes please\n", "vnpus.hamiVnpuCore: expected true or false"),
    ("vnpus:\n  configz: []\n", "vnpus.configz: unknown key"),
    (
        "vnpus:\n- {chipName: a, commonWord: A}\n",
        "vnpus[0].aiCore: required key missing",
    ),
    (
        "vnpus:\n- {chipName: a, commonWord: A, resourceName: r, resourceMemoryName: m, memoryAllocatable: 200, memoryCapacity: 100, aiCore: 1}\n",
        "vnpus[0].memoryAllocatable: 200 exceeds memoryCapacity 100",
    ),
    (
        "vnpus:\n- {chipName: a, commonWord: A, resourceName: r, resourceMemoryName: m, memoryAllocatable: 100, memoryCapacity: 100, aiCore: 1, templates: [{name: t, memory: 500, aiCore: 1}]}\n",
        "vnpus[0].templates[0].memory: 500 exceeds memoryCapacity 100",
    ),
    ("gpus: {}\n", "gpus: unknown key"),
    ("- 1\n", "expected a mapping at the top level"),
    ("nvidia: [\n", "not valid YAML"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_catalogue_names_the_key_path(text: str, message: str) -> None:
    with pytest.raises(CatalogueError) as info:
        load_catalogue(text)
    assert message in str(info.value)


def test_duplicate_common_word_is_an_error() -> None:
    chip = "{chipName: a, commonWord: A, resourceName: r, resourceMemoryName: m, memoryAllocatable: 1, memoryCapacity: 1, aiCore: 1}"
    with pytest.raises(CatalogueError, match=r"vnpus\[1\]\.commonWord: duplicate"):
        load_catalogue(f"vnpus:\n- {chip}\n- {chip}\n")


# The `nvidia:` sections of the two ConfigMaps users already have: HAMi's chart
# (`hami-scheduler-device`, keys of HAMi's NvidiaConfig and NodeDefaultConfig) and Volcano's
# (`volcano-vgpu-device-config`, keys of Volcano's NvidiaConfig), with their values shortened.
HAMI_NVIDIA = """
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  preConfiguredDeviceMemory: 0
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  enableNumaTopology: false
  gpuCorePolicy: default
  libCudaLogLevel: 1
  runtimeClassName: ""
  migProfileAllowlist:
  - models: ["A30"]
    profiles: ["1g.6gb", "2g.12gb", "4g.24gb"]
"""
VOLCANO_NVIDIA = """
nvidia:
  resourceCountName: volcano.sh/vgpu-number
  resourceMemoryName: volcano.sh/vgpu-memory
  resourceMemoryPercentageName: volcano.sh/vgpu-memory-percentage
  resourceCoreName: volcano.sh/vgpu-cores
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  disableCoreLimit: false
  gpuMemoryFactor: 1
  knownMigGeometries:
  - models: ["A30"]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.6gb, memory: 6144, count: 4}]
"""


@pytest.mark.parametrize(("text", "keys"), [
    (HAMI_NVIDIA, ["enableNumaTopology", "migProfileAllowlist", "resourcePriorityName"]),
    (VOLCANO_NVIDIA, ["disableCoreLimit"]),  # knownMigGeometries: acted on (devices/mig.py)
])  # fmt: skip
def test_hami_and_volcano_configmaps_load_and_name_what_tessera_does_not_act_on(
    text: str, keys: list[str]
) -> None:
    cat = load_catalogue(text)
    assert [line.split(":")[0] for line in cat.not_acted_on] == [f"nvidia.{k}" for k in keys]
    assert all("not acted on by Tessera (" in line or "acted on only on nodes running Tessera's "
               "device plugin" in line for line in cat.not_acted_on)  # fmt: skip
    assert all("MIG" in line for line in cat.not_acted_on if "mig" in line.split(":")[0].lower())  # why
    assert load_catalogue(NEW_FORM).not_acted_on == ()
    wrapped = "apiVersion: v1\nkind: ConfigMap\ndata:\n  device-config.yaml: |\n" + "".join(
        f"    {line}\n" for line in text.strip().splitlines())  # fmt: skip
    assert load_catalogue(wrapped).not_acted_on == tuple(
        f"data.device-config.yaml: {line}" for line in cat.not_acted_on)  # fmt: skip


def test_a_misspelt_hami_key_is_still_unknown() -> None:
    with pytest.raises(CatalogueError, match=r"nvidia\.enableNumaTopolgy: unknown key"):
        load_catalogue(HAMI_NVIDIA.replace("enableNumaTopology", "enableNumaTopolgy"))


def test_volcano_gpu_memory_factor_is_the_unit_of_a_memory_request() -> None:
    from services.core.devices.nvidia import NvidiaVendor

    cat = load_catalogue(VOLCANO_NVIDIA.replace("gpuMemoryFactor: 1", "gpuMemoryFactor: 10"))
    assert cat.nvidia.memory_factor == 10
    (req,), _ = NvidiaVendor(cat.nvidia).parse(
        {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 1024}, {}, {})  # fmt: skip
    assert req.memory == 10240  # MB: volcano-vgpu-device-plugin gives the container 1024 × 10
    both = VOLCANO_NVIDIA.replace("gpuMemoryFactor: 1", "gpuMemoryFactor: 10\n  memoryFactor: 1")
    with pytest.raises(CatalogueError, match=r"nvidia\.gpuMemoryFactor: 10 differs from memoryFactor 1"):
        load_catalogue(both)
    same = both.replace("memoryFactor: 1", "memoryFactor: 10")
    assert load_catalogue(same).nvidia.memory_factor == 10
    with pytest.raises(CatalogueError, match=r"nvidia\.gpuMemoryFactor: must be >= 1"):
        load_catalogue(VOLCANO_NVIDIA.replace("gpuMemoryFactor: 1", "gpuMemoryFactor: 0"))


def test_default_aliases() -> None:
    aliases = default_catalogue().aliases
    assert aliases["huawei.com/Ascend910B"] == ("Ascend910B3",)
    assert set(aliases["huawei.com/Ascend910"]) == {
        "Ascend910A",
        "Ascend910B2",
        "Ascend910B3",
        "Ascend910B4",
        "Ascend910B4-1",
        "Ascend910C",
    }


def test_keys_hamis_webhook_acts_on_say_what_tessera_does_instead() -> None:
    """MutateAdmission: gpuCorePolicy and nvidia.com/priority become env (Tessera's device plugin
    gives them; on HAMi's plugin nobody does), overwriteEnv sets NVIDIA_VISIBLE_DEVICES=none in
    containers asking no GPU (nothing can, once the pod is created)."""
    cat = load_catalogue("nvidia:\n  gpuCorePolicy: force\n  overwriteEnv: true\n")
    assert cat.nvidia.gpu_core_policy == "force" and cat.nvidia.overwrite_env
    lines = dict(line.split(": ", 1) for line in cat.not_acted_on)
    assert list(lines) == ["nvidia.gpuCorePolicy", "nvidia.overwriteEnv"]
    assert lines["nvidia.gpuCorePolicy"].startswith(
        "acted on only on nodes running Tessera's device plugin, whose Allocate gives a GPU "
        "container GPU_CORE_UTILIZATION_POLICY=force; on a node running HAMi's device plugin")
    assert "set NVIDIA_VISIBLE_DEVICES=none in such containers' env" in lines["nvidia.overwriteEnv"]
    assert load_catalogue("nvidia:\n  gpuCorePolicy: default\n  overwriteEnv: false\n").not_acted_on == ()
