"""NVIDIA's k8s-device-plugin serves names HAMi does not share: MIG instances under the `mixed`
strategy (`nvidia.com/mig-1g.10gb`) and time-sliced replicas renamed by `renameByDefault`
(`nvidia.com/gpu.shared`). kube-scheduler and Volcano fit them by count against allocatable; a
pod asking one was refused at admission ("unknown device resource; did you mean
nvidia.com/gpucores?") because the whole `nvidia.com/` domain was the device layer's. A real
typo of HAMi's own names is still refused, with the field and the closest name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.cli.main import main
from services.core.devices import registration
from services.kube import nodes
from tests.core.workload.test_queue_resources import _pod, _queue, _rules

MIG, SHARED = "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"


@pytest.mark.parametrize("name", [MIG, "nvidia.com/mig-3g.40gb", SHARED, "nvidia.com/a100.shared"])
def test_the_vendor_plugins_other_names_are_admitted_in_pods_and_queues(name: str) -> None:
    assert _rules(_pod(name)) == []
    assert _rules(_queue(name)) == []


def test_a_typo_of_hamis_names_is_still_refused_with_the_field_and_the_rule() -> None:
    assert _rules(_pod("nvidia.com/gpumemm")) == [
        "Pod: spec.containers[0].resources.limits.nvidia.com/gpumemm: unknown device resource; "
        "did you mean nvidia.com/gpumem?"]  # fmt: skip


INVENTORY = f"""
nodes:
  - name: a100-migmixed
    cpu: 64
    memory: 512Gi
    labels: {{nvidia.com/mig.strategy: mixed}}
    serves: {{{MIG}: 2, nvidia.com/mig-3g.40gb: 2}}
  - name: t4-renamed
    cpu: 32
    memory: 128Gi
    serves: {{{SHARED}: 1}}
"""


def test_they_are_fitted_by_count_against_what_the_node_serves(tmp_path: Path) -> None:
    pods = [_pod(MIG).replace("p1", f"mig-{i}").replace("{containers", "{schedulerName: volcano, containers")
            for i in range(3)] + [_pod(SHARED).replace("p1", "shared")]  # fmt: skip
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "w.yaml").write_text("---".join(pods))
    report = tmp_path / "r.json"
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
                 "--report", str(report)]) == 0  # fmt: skip
    got = {p["name"]: p for p in json.loads(report.read_text())["pods"]}
    assert got["shared"]["phase"] == "Running" and got["shared"]["node"] == "t4-renamed"
    running = [n for n in ("mig-0", "mig-1", "mig-2") if got[n]["phase"] == "Running"]
    assert len(running) == 2 and {got[n]["node"] for n in running} == {"a100-migmixed"}
    (waiting,) = {"mig-0", "mig-1", "mig-2"} - set(running)
    assert got[waiting]["phase"] == "Pending" and f"Insufficient {MIG}" in got[waiting]["reason"]


def test_a_cluster_nodes_allocatable_of_them_is_a_node_scalar_and_no_unregistered_device() -> None:
    allocatable = {MIG: "7", SHARED: "8", "nvidia.com/gpu": "2"}
    assert nodes.other_resources(allocatable) == {SHARED: 8000, MIG: 7000}  # milli, as pods ask
    problems = nodes.unregistered(allocatable, {})
    assert len(problems) == 1 and problems[0].startswith("status.allocatable.nvidia.com/gpu:")
    assert registration.vendor_of(MIG) is None and registration.vendor_of("nvidia.com/gpu") == "nvidia"
