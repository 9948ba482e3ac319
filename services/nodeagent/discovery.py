"""Device discovery: what `npu-smi info` and `nvidia-smi -q -x` print → `CardSpec` records.

Pure text in, records out, so the parsers are tested on recorded outputs and a node agent on a
real machine only adds the subprocess call. Parsing is two steps: the tool's output becomes
plain facts (`NpuChip`, `NvidiaGpu`: what the tool said), then the catalogue turns facts into
cards the way HAMi's device plugins register them:

- Ascend (HAMi ascend-device-plugin): `Type = commonWord`, memory = the chip config's
  `memoryAllocatable` (not the HBM the tool reports: HAMi books against the configured figure),
  cores = `aiCore` in template mode (100 on a hami-vnpu-core node), split count = VDeviceCount
  (`memoryAllocatable // smallest template`), `NetworkID` 0 for index ≤ 3 else 1 on Ascend910*
  chips except the super-pod 910C. `npu-smi info` shows no uuid, so the uuid is
  `<node>-<commonWord>-<index>`, the same as a simulated node's (services.core.simulate).
- NVIDIA (HAMi nvidia device plugin `register.go`, `getAPIDevices`): `Type` = the device name
  as NVML/nvidia-smi report it, with `NVIDIA-` put in front only when it does not already start
  with `NVIDIA` (an A100 on a current driver is `NVIDIA A100-SXM4-40GB`, a V100
  `NVIDIA-Tesla V100-PCIE-32GB`), memory = total MiB × `deviceMemoryScaling`, where a GPU whose
  memory the driver does not report (unified memory, e.g. GB10: nvidia-smi prints `[N/A]`)
  takes `preConfiguredDeviceMemory` instead and, that unset, is not registered; cores = 100 ×
  `deviceCoreScaling`, split count = `deviceSplitCount`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from contracts.devices import CardSpec
from services.core.devices.catalogue import AscendChip, Catalogue


class DiscoveryError(ValueError):
    """The tool output cannot be read as what it claims to be (names what is wrong)."""


# --- Ascend: npu-smi info ------------------------------------------------------------------------

#: npu-smi Health values the Ascend device plugin still schedules on (dcmi health 0 and 1:
#: a minor warning does not take a chip out of service); Alarm/Critical/UNKNOWN do.
_ASCEND_HEALTHY = frozenset({"OK", "WARNING"})


@dataclass(frozen=True, slots=True)
class NpuChip:
    """One chip as `npu-smi info` lists it (a 310P Duo card has two, a 910B card one)."""

    npu: int  # the NPU (card) id of the first column
    chip: int  # chip id within the card
    device: int | None  # logical device id (310P layout's "Device" column), if shown
    name: str  # chip name, e.g. "910B3", "310P3"
    health: str
    bus_id: str
    memory_used: int  # MB: HBM-Usage where shown, else Memory-Usage
    memory_total: int


_USAGE = re.compile(r"(\d+)\s*/\s*(\d+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_npu_smi(text: str) -> list[NpuChip]:
    """Read the chip table of `npu-smi info` (910A/910B 2-line rows and the 310P layout).

    Each chip is a pair of lines between `+---`/`+===` rules: `NPU Name | Health | ...` then
    `Chip [Device] | Bus-Id | AICore Memory-Usage [HBM-Usage]`. The process table below it
    (header `Process id`) is not read.
    """
    chips: list[NpuChip] = []
    has_device_column = False
    in_table = False
    pending: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        head = cells[0].split()
        if head[:2] == ["NPU", "Name"]:
            in_table = True
            continue
        if head and head[0] == "Chip" and len(cells) > 1 and cells[1].startswith("Bus-Id"):
            has_device_column = "Device" in head
            continue
        if "Process id" in line:
            break
        if not in_table or len(cells) < 3:
            continue
        if pending is None:
            pending = cells
            continue
        chips.append(_chip(pending, cells, has_device_column))
        pending = None
    if pending is not None:
        raise DiscoveryError(f"npu-smi: NPU row without its chip row: {' | '.join(pending)}")
    return chips


def _chip(npu_row: list[str], chip_row: list[str], has_device: bool) -> NpuChip:
    first = npu_row[0].split()
    if len(first) < 2 or not first[0].isdigit():
        raise DiscoveryError(f"npu-smi: expected `<npu id> <name>`, got {npu_row[0]!r}")
    ids = chip_row[0].split()
    if not ids or not all(i.isdigit() for i in ids):
        raise DiscoveryError(f"npu-smi: expected `<chip id> [<device id>]`, got {chip_row[0]!r}")
    usages = _USAGE.findall(chip_row[2])
    if not usages:
        raise DiscoveryError(f"npu-smi: no `used / total` memory in {chip_row[2]!r}")
    used, total = usages[-1]  # HBM-Usage when the chip has HBM, else Memory-Usage
    return NpuChip(
        npu=int(first[0]),
        chip=int(ids[0]),
        device=int(ids[1]) if has_device and len(ids) > 1 else None,
        name=first[1],
        health=npu_row[1],
        bus_id=chip_row[1],
        memory_used=int(used),
        memory_total=int(total),
    )


def _ascend_chip(catalogue: Catalogue, name: str) -> AscendChip:
    for chip in catalogue.ascend:
        if chip.chip_name == name:
            return chip
    raise DiscoveryError(f"npu-smi: chip {name!r} is not in the device catalogue (vnpus.configs)")


def ascend_cards(
    node: str, chips: list[NpuChip], catalogue: Catalogue, hami_vnpu_core: bool = False
) -> list[CardSpec]:
    """Cards as HAMi's Ascend plugin registers them. The index is the device id npu-smi shows
    (310P layouts), else the NPU id on a module server (one chip per NPU, HCCS-grouped: 910B,
    910C; the NPU id is the module's place 0-7, and a module the driver dropped leaves a gap —
    counted by list position, every card after it took its neighbour's id, which became the
    container's ASCEND_VISIBLE_DEVICES and HCCS group), else the list position (PCIe cards,
    whose NPU ids may be slot numbers)."""
    npu_ids = [chip.npu for chip in chips]
    one_chip_each = len(set(npu_ids)) == len(npu_ids)
    cards: list[CardSpec] = []
    for position, chip in enumerate(chips):
        config = _ascend_chip(catalogue, chip.name)
        if chip.device is not None:
            index = chip.device
        else:
            index = chip.npu if one_chip_each and config.network_grouped else position
        grouped = config.network_grouped and not config.super_pod
        cards.append(
            CardSpec(
                uuid=f"{node}-{config.common_word}-{index}",
                node=node,
                index=index,
                type=config.common_word,
                vendor="huawei",
                memory=config.memory_allocatable,
                cores=100 if hami_vnpu_core else config.ai_core,
                split_count=config.slots_per_card,
                network_id=(0 if index <= 3 else 1) if grouped else 0,
                healthy=chip.health.upper() in _ASCEND_HEALTHY,
                health_reason="" if chip.health.upper() in _ASCEND_HEALTHY else f"npu-smi Health: {chip.health}",
                mode="hami-core" if hami_vnpu_core else "template",
            )
        )
    return cards


# --- NVIDIA: nvidia-smi -q -x --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NvidiaGpu:
    """One `<gpu>` of `nvidia-smi -q -x`."""

    index: int  # enumeration order = NVML index (minor_number is /dev/nvidiaN and may differ)
    uuid: str
    minor_number: int | None
    product_name: str
    memory_total: int | None  # MiB (fb_memory_usage/total); None: the driver does not say
    numa: int  # 0 when the output does not say
    mig: bool
    row_remap_failed: bool


def _text(gpu: ET.Element, path: str) -> str:
    node = gpu.find(path)
    return (node.text or "").strip() if node is not None else ""


#: what nvidia-smi prints for a value NVML answers NOT_SUPPORTED (unified-memory GPUs' memory)
_NOT_REPORTED = frozenset({"n/a", "[n/a]", "not supported", "[not supported]"})


def _mib(value: str, what: str) -> int | None:
    if value.lower() in _NOT_REPORTED:
        return None
    m = re.fullmatch(r"(\d+)\s*MiB", value)
    if m is None:
        raise DiscoveryError(f"nvidia-smi: {what} is {value!r}, expected `<n> MiB`")
    return int(m.group(1))


def parse_nvidia_smi_xml(text: str) -> list[NvidiaGpu]:
    """Read every `<gpu>` of the XML report, in the order printed."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DiscoveryError(f"nvidia-smi: not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise DiscoveryError(f"nvidia-smi: root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus: list[NvidiaGpu] = []
    for index, gpu in enumerate(root.findall("gpu")):
        uuid = _text(gpu, "uuid")
        if not uuid:
            raise DiscoveryError(f"nvidia-smi: gpu {index} has no <uuid>")
        minor = _text(gpu, "minor_number")
        numa = _text(gpu, "numa_node") or _text(gpu, "pci/numa_node")
        gpus.append(
            NvidiaGpu(
                index=index,
                uuid=uuid,
                minor_number=int(minor) if minor.isdigit() else None,
                product_name=_text(gpu, "product_name"),
                memory_total=_mib(_text(gpu, "fb_memory_usage/total"), f"{uuid} fb total"),
                numa=int(numa) if numa.isdigit() else 0,
                mig=_text(gpu, "mig_mode/current_mig") == "Enabled",
                row_remap_failed=_text(gpu, "remapped_rows/remapped_row_failure") == "Yes",
            )
        )
    return gpus


def nvidia_cards(node: str, gpus: list[NvidiaGpu], catalogue: Catalogue) -> list[CardSpec]:
    """Cards as HAMi's NVIDIA plugin registers them.

    A GPU whose row remapping failed has uncorrectable memory and needs a reset: it is reported
    unhealthy (HAMi learns the same from NVML Xid events). `preConfiguredDeviceMemory` stands in
    only for memory the driver does not report; such a GPU without it is left out, as HAMi
    leaves it out.
    """
    conf = catalogue.nvidia
    cards: list[CardSpec] = []
    for gpu in gpus:
        total = gpu.memory_total
        if total is None:
            if conf.pre_configured_device_memory <= 0:
                continue
            total = conf.pre_configured_device_memory
        memory = int(total * conf.device_memory_scaling)
        name = gpu.product_name
        cards.append(
            CardSpec(
                uuid=gpu.uuid,
                node=node,
                index=gpu.index,
                type=name if name.startswith("NVIDIA") else f"NVIDIA-{name}",
                vendor="nvidia",
                memory=memory,
                cores=int(100 * conf.device_core_scaling),
                split_count=conf.device_split_count,
                numa=gpu.numa,
                healthy=not gpu.row_remap_failed,
                health_reason="nvidia-smi: a row remapping failed" if gpu.row_remap_failed else "",
                mode="mig" if gpu.mig else "hami-core",
            )
        )
    return cards
