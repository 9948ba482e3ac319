"""`tessera simulate` over time with a namespace ResourceQuota (issue 25): a gang held at
enqueue while a pod holds the namespace's cards is admitted once that pod ends; the report's
quota record (what `tessera get quota` prints) counts what Tessera's jobs hold at the end."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from services.cli.get import Listing, listing
from services.cli.kubeobjects import Catalog
from services.cli.main import main
from services.core.simulate.jsonl import read_jsonl

INVENTORY = {
    "nodes": [
        {
            "name": "n1",
            "cpu": 64,
            "memory": "256Gi",
            "devices": [{"type": "Ascend910B3", "count": 16}],
        }
    ]
}
WORKLOAD = """
{apiVersion: v1, kind: ResourceQuota, metadata: {name: npu, namespace: team-a}, spec: {hard: {requests.huawei.com/Ascend910B3: '8', limits.huawei.com/Ascend910B3-memory: '600000'}}}
---
{apiVersion: v1, kind: Pod, metadata: {name: first, namespace: team-a, annotations: {tessera.io/duration: '10'}}, spec: {containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: '6'}}}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: keeper, namespace: team-a, annotations: {tessera.io/arrive-at: '1', tessera.io/duration: '1000'}}, spec: {containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: '2'}}}]}}
---
{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {name: big, namespace: team-a, annotations: {tessera.io/arrive-at: '2'}}, spec: {minAvailable: 4, tasks: [{name: w, replicas: 4, template: {metadata: {annotations: {tessera.io/duration: '1000'}}, spec: {containers: [{name: c, image: busybox, resources: {limits: {huawei.com/Ascend910B3: '1', huawei.com/Ascend910B3-memory: '4096'}}}]}}}]}}
"""


def test_a_gang_held_by_its_quota_runs_once_the_namespace_frees_cards(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(INVENTORY))
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    args = ["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
            "--until", "100", "--report", str(tmp_path / "r.json"), "--events", str(tmp_path / "ev.jsonl")]  # fmt: skip
    assert main(args) == 0
    held = [json.loads(m.data)["reason"] for m in read_jsonl(tmp_path / "ev.jsonl")
            if m.headers.get("Tessera-Type") == "JobUnschedulable" and m.subject.endswith(".team-a.big")]  # fmt: skip
    assert held and held[0].startswith(
        "namespace team-a: huawei.com/Ascend910B3 requested 4, quota 8, used 8"
    )
    report = json.loads((tmp_path / "r.json").read_text())
    pods = {p["name"]: p["phase"] for p in report["pods"]}
    assert pods == {
        "first": "Succeeded",
        "keeper": "Running",
        **{f"big-w-{i}": "Running" for i in range(4)},
    }
    (quota,) = report["quotas"]
    # what the slices hold: 4 vNPUs of the 16 GB template and the keeper's 2 whole 64 GB cards
    assert quota == {"namespace": "team-a", "name": "npu",
                     "hard": {"limits.huawei.com/Ascend910B3-memory": "600000", "requests.huawei.com/Ascend910B3": "8"},
                     "used": {"limits.huawei.com/Ascend910B3-memory": "196608", "requests.huawei.com/Ascend910B3": "6"},
                     "tessera": {"limits.huawei.com/Ascend910B3-memory": "196608", "requests.huawei.com/Ascend910B3": "6"},
                     "others": {"limits.huawei.com/Ascend910B3-memory": "0", "requests.huawei.com/Ascend910B3": "0"}}  # fmt: skip
    got: Listing = listing("quotas", report["quotas"], Catalog())
    assert got.rows[0]["used/hard"] == ("limits.huawei.com/Ascend910B3-memory: 196608/600000, "
                                        "requests.huawei.com/Ascend910B3: 6/8")  # fmt: skip
    assert got.objects[0]["kind"] == "ResourceQuota"
