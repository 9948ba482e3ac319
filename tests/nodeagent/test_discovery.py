"""Discovery parsers on recorded tool outputs: exact card records, equal to the inventory's."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.devices import CardSpec
from services.core.devices.catalogue import default_catalogue
from services.core.simulate.inventory import load_inventory
from services.nodeagent.discovery import (
    DiscoveryError,
    ascend_cards,
    nvidia_cards,
    parse_npu_smi,
    parse_nvidia_smi_xml,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "discovery"
CATALOGUE = default_catalogue()


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def inventory_cards(node: str, devices: list[dict[str, object]]) -> list[CardSpec]:
    doc = {"nodes": [{"name": node, "cpu": "192", "memory": "1536Gi", "devices": devices}]}
    return list(load_inventory(doc, CATALOGUE)[0].cards)


def test_910b3_node_gives_the_inventory_cards_with_the_critical_chip_unhealthy() -> None:
    chips = parse_npu_smi(fixture("npu-smi-910b3x8.txt"))
    assert [(c.npu, c.chip, c.name, c.health) for c in chips][5:7] == [
        (5, 0, "910B3", "OK"),
        (6, 0, "910B3", "Critical"),
    ]
    assert (chips[3].memory_used, chips[3].memory_total, chips[3].bus_id) == (
        61820,
        65536,
        "0000:82:00.0",
    )
    cards = ascend_cards("n1", chips, CATALOGUE)
    assert cards[0] == CardSpec(
        uuid="n1-Ascend910B3-0", node="n1", index=0, type="Ascend910B3", vendor="huawei",
        memory=65536, cores=20, split_count=4, network_id=0, healthy=True, mode="template",
    )  # fmt: skip
    assert [c.network_id for c in cards] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [c.healthy for c in cards] == [True] * 6 + [False, True]
    expected = inventory_cards("n1", [{"type": "Ascend910B3", "count": 8}])
    assert [c for c in cards if c.index != 6] == [c for c in expected if c.index != 6]
    assert cards[6] == CardSpec(**{**_fields(expected[6]), "healthy": False,
                                   "health_reason": "npu-smi Health: Critical"})  # what `describe card` says


def _fields(card: CardSpec) -> dict[str, object]:
    return {f: getattr(card, f) for f in card.__struct_fields__}


def test_310p_duo_layout_uses_the_device_column_and_the_catalogue_memory() -> None:
    chips = parse_npu_smi(fixture("npu-smi-310p.txt"))
    assert [(c.npu, c.chip, c.device) for c in chips] == [
        (2, 0, 0),
        (2, 1, 1),
        (5, 0, 2),
        (5, 1, 3),
    ]
    assert [c.memory_used for c in chips] == [1602, 1437, 1598, 1440]
    cards = ascend_cards("edge-1", chips, CATALOGUE)
    assert cards == inventory_cards("edge-1", [{"type": "Ascend310P", "count": 4}])
    assert {(c.memory, c.cores, c.split_count, c.network_id) for c in cards} == {(21527, 8, 7, 0)}


def test_hami_vnpu_core_node_reports_percent_cores() -> None:
    cards = ascend_cards("n1", parse_npu_smi(fixture("npu-smi-310p.txt")), CATALOGUE, True)
    assert {(c.cores, c.mode) for c in cards} == {(100, "hami-core")}


def test_a100_xml_gives_uuid_index_memory_and_hami_type() -> None:
    gpus = parse_nvidia_smi_xml(fixture("nvidia-smi-a100x2.xml"))
    assert [(g.index, g.minor_number) for g in gpus] == [(0, 2), (1, 0)]
    cards = nvidia_cards("g1", gpus, CATALOGUE)
    assert cards == [
        CardSpec(
            uuid=uuid,
            node="g1",
            index=i,
            type="NVIDIA A100-SXM4-40GB",  # HAMi adds NVIDIA- only to a name without it
            vendor="nvidia",
            memory=40960,
            cores=100,
            split_count=10,
            mode="hami-core",
        )
        for i, uuid in enumerate(
            ["GPU-9a8c1f3e-5b2d-4c7a-8e61-0f2b7d4c9a13", "GPU-2e47b0d6-91c3-4f58-a0d2-6c1e83f5b7a4"]
        )
    ]
    shape = inventory_cards(
        "g1", [{"type": "NVIDIA A100-SXM4-40GB", "count": 2, "memory": 40960}]
    )
    assert [{**_fields(c), "uuid": ""} for c in cards] == [
        {**_fields(c), "uuid": ""} for c in shape
    ]
    failed = fixture("nvidia-smi-a100x2.xml").replace("<remapped_row_failure>No", "<remapped_row_failure>Yes", 1)
    sick = nvidia_cards("g1", parse_nvidia_smi_xml(failed), CATALOGUE)
    assert [(c.healthy, c.health_reason) for c in sick] == [(False, "nvidia-smi: a row remapping failed"), (True, "")]


def test_bad_outputs_are_named_errors() -> None:
    with pytest.raises(DiscoveryError, match="not in the device catalogue"):
        ascend_cards(
            "n", parse_npu_smi(fixture("npu-smi-910b3x8.txt").replace("910B3", "999X")), CATALOGUE
        )
    with pytest.raises(DiscoveryError, match="not XML"):
        parse_nvidia_smi_xml("<nvidia_smi_log>")
    with pytest.raises(DiscoveryError, match="fb total"):
        parse_nvidia_smi_xml(fixture("nvidia-smi-a100x2.xml").replace("40960 MiB", "40 GiB", 1))
    assert parse_npu_smi("") == []


def test_a_card_the_driver_dropped_leaves_a_gap_not_a_shift() -> None:
    """NPU 3 missing from npu-smi's list: the cards after it keep their NPU ids (the device
    the container is given, the HCCS group); counted by position, NPU 4 became card 3 and its
    pods were given the missing chip."""
    lines = fixture("npu-smi-910b3x8.txt").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("| 3     910B3"))
    gapped = "".join(lines[:at] + lines[at + 3:])  # its NPU row, chip row and separator
    chips = parse_npu_smi(gapped)
    assert [c.npu for c in chips] == [0, 1, 2, 4, 5, 6, 7]
    cards = ascend_cards("n1", chips, CATALOGUE)
    assert [c.index for c in cards] == [0, 1, 2, 4, 5, 6, 7]
    assert [c.uuid for c in cards][3] == "n1-Ascend910B3-4"
    assert [c.network_id for c in cards] == [0, 0, 0, 1, 1, 1, 1]
    assert [c.healthy for c in cards] == [True] * 5 + [False, True]  # NPU 6 is still the Critical one


def test_a_name_without_the_nvidia_prefix_gets_it() -> None:
    xml = fixture("nvidia-smi-a100x2.xml").replace("NVIDIA A100-SXM4-40GB", "Tesla V100-PCIE-32GB")
    assert {c.type for c in nvidia_cards("g1", parse_nvidia_smi_xml(xml), CATALOGUE)} == {
        "NVIDIA-Tesla V100-PCIE-32GB"}


def test_pre_configured_memory_stands_in_only_for_memory_the_driver_does_not_report() -> None:
    """HAMi's getAPIDevices reads preConfiguredDeviceMemory only on NVML's NOT_SUPPORTED (a
    unified-memory GB10); every other GPU keeps its own memory, and an unreported one without
    the setting is not registered."""
    from services.core.devices.catalogue import load_catalogue

    unified = fixture("nvidia-smi-a100x2.xml").replace("<total>40960 MiB</total>", "<total>[N/A]</total>", 1)
    gpus = parse_nvidia_smi_xml(unified)
    assert [g.memory_total for g in gpus] == [None, 40960]
    conf = load_catalogue("nvidia:\n  preConfiguredDeviceMemory: 120000\n")
    assert [(c.index, c.memory) for c in nvidia_cards("g1", gpus, conf)] == [(0, 120000), (1, 40960)]
    both = parse_nvidia_smi_xml(fixture("nvidia-smi-a100x2.xml"))
    assert {c.memory for c in nvidia_cards("g1", both, conf)} == {40960}
    assert [c.index for c in nvidia_cards("g1", gpus, CATALOGUE)] == [1]


def test_a_discovered_node_carries_its_hostname_label_so_a_selector_on_it_places_the_pod() -> None:
    """rev-topo finding 4: `--node real1 --npu-smi …` registered real1 with no labels, so a pod
    with `nodeSelector: {kubernetes.io/hostname: real1}` waited ("2 node(s) didn't match Pod's
    node affinity/selector") where the same selector placed it on an inventory's node."""
    from services.core.scheduling.config import DEFAULT_CONF, parse_conf
    from services.core.simulate.engine import load_simulation
    from services.core.simulate.report import build_report
    from services.core.workload import admit, load_documents
    from services.core.workload.devicerequests import hami_parser
    from services.nodeagent.inventory import discovered_node
    from tests.core.scheduling.scenarios import vendors

    real1 = discovered_node("real1", 192_000, 1_572_864, npu_smi=fixture("npu-smi-910b3x8.txt"))
    assert real1.labels == {"kubernetes.io/hostname": "real1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    assert discovered_node("a1", 1, 1, arch="arm64").labels["kubernetes.io/arch"] == "arm64"
    reg = vendors()
    other = load_inventory({"nodes": [{"name": "n1", "cpu": 192, "memory": "1536Gi",
                                       "devices": [{"type": "Ascend910B3", "count": 8}]}]}, reg.catalogue)  # fmt: skip
    pod = """apiVersion: v1
kind: Pod
metadata: {name: r}
spec:
  schedulerName: volcano
  nodeSelector: {kubernetes.io/hostname: real1}
  containers: [{name: c, image: x, resources: {limits: {huawei.com/Ascend910B3: "2"}}}]
"""
    work = admit(load_documents(pod), hami_parser(reg), reg.resource_names())
    sim = load_simulation(parse_conf(DEFAULT_CONF), reg, [*other, real1], work)
    sim.run()
    (placed,) = build_report(sim.log.messages())["pods"]
    assert (placed["phase"], placed["node"]) == ("Running", "real1"), placed
