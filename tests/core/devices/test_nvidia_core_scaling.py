"""deviceCoreScaling > 1 (HAMi: the plugin registers `Devcore = 100 × deviceCoreScaling`, `Fit`
books against that `Totalcore`): a T4 registered with 200 cores takes three 60-core pods. The
allocator's ledger capped every hami-core card at 100 and refused what the scheduler proposed
(`CardInsufficientCore: 60+60 > 100 cores`), `get cards` said `60/100`, and the queue shares
weighed 60 cores as 0.6 of the card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.devices import CardSpec
from contracts.workloads import DeviceRequest
from services.cli.main import main
from services.core.scheduling.model import CardInfo, NodeInfo
from services.core.scheduling.plugins.shares import QueueShares
from services.core.scheduling.resources import Resource

INVENTORY = """
nodes:
  - name: t4-0
    cpu: 64
    memory: 256Gi
    devices:
      - {type: NVIDIA-Tesla-T4, count: 1, memory: 15360}
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  schedulerName: volcano
  containers:
    - {name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "1000",
       nvidia.com/gpucores: "60"}}}
"""


def _simulate(tmp_path: Path, scaling: int) -> dict:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "w.yaml").write_text("---".join(POD.replace("NAME", f"c60-{i}") for i in range(4)))
    (tmp_path / "dev.yaml").write_text(
        f"nvidia: {{deviceSplitCount: 10, deviceMemoryScaling: 1, deviceCoreScaling: {scaling}}}\n"
    )
    report, log = tmp_path / "r.json", tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
                 "--device-config", str(tmp_path / "dev.yaml"), "--until", "60", "--report", str(report),
                 "--events", str(log)]) == 0  # fmt: skip
    assert main(["replay", "--verify", "--from", str(log)]) == 0
    return json.loads(report.read_text())


@pytest.mark.parametrize(("scaling", "running", "cores"), [(2, 3, 180), (1, 1, 60)])
def test_a_card_of_scaled_cores_takes_pods_up_to_its_registered_cores(
    tmp_path: Path, scaling: int, running: int, cores: int
) -> None:
    report = _simulate(tmp_path, scaling)
    phases = sorted(p["phase"] for p in report["pods"])
    assert phases.count("Running") == running  # 3 × 60 ≤ 200, the fourth does not fit (or 1 × 60 ≤ 100)
    assert report["metrics"]["placements_rejected"] == 0  # the allocator books what was proposed
    [card] = report["cards"]
    assert (card["cores_used"], card["cores_total"]) == (cores, 100 * scaling)


def _gpu_node(cores: int) -> NodeInfo:
    card = CardInfo(CardSpec(uuid="g0", node="n1", index=0, type="NVIDIA-Tesla-T4", vendor="nvidia",
                             memory=15360, cores=cores, mode="hami-core"), None)  # type: ignore[arg-type]  # fmt: skip
    return NodeInfo("n1", 0, Resource(), Resource(), Resource(), Resource(), Resource(), {}, {},
                    (), [card])  # fmt: skip


def test_queue_shares_weigh_a_soft_requests_cores_against_the_registered_cores() -> None:
    req = DeviceRequest(vendor="nvidia", type="NVIDIA", count=1, memory=1000, cores=60,
                        resource="nvidia.com/gpu")  # fmt: skip
    assert QueueShares([_gpu_node(200)]).request(req) == {"nvidia.com/gpu": 300.0}  # 60 of 200
    assert QueueShares([_gpu_node(100)]).request(req) == {"nvidia.com/gpu": 600.0}
    # a log recorded before rules generation 2 re-runs as it ran (60 % of the card)
    assert QueueShares([_gpu_node(200)], rules=1).request(req) == {"nvidia.com/gpu": 600.0}
