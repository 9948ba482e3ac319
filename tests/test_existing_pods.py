"""Pods that already run keep their cards, in `tessera simulate` and in the running system
(`tessera apply` of a manifest with `spec.nodeName` and `status.phase: Running`): their slices
come from HAMi's `-devices-allocated` annotations where present (template names from the
RuntimeInfo), else from their requests on the node's free cards; the next pod never gets them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from contracts import hami
from services.cli.main import main
from tests.processes import ROOT

INVENTORY = ROOT / "examples" / "inventory.yaml"
CARD = "node-a-Ascend910B3-1"


def running(name: str, memory: int | None, annotations: dict[str, str] | None = None) -> dict:
    limits = {"huawei.com/Ascend910B3": "1"}
    if memory:
        limits["huawei.com/Ascend910B3-memory"] = str(memory)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x",
                                                           "resources": {"limits": limits}}]},
            "status": {"phase": "Running"}}  # fmt: skip


def newcomer(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"new-{i}", "namespace": "default"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-a"},
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"huawei.com/Ascend910B3": "1"}}}]}}  # fmt: skip


def test_simulate_books_running_pods_before_placing_others(tmp_path: Path) -> None:
    annotated = {hami.ascend_allocated_key("Ascend910B3"): f"{CARD},Ascend910B3,16384,5:;",
                 "huawei.com/Ascend910B3": json.dumps([{"UUID": CARD, "temp": "vir05_1c_16g",
                                                        "memory": 16384, "core": 5}])}  # fmt: skip
    docs = [running("old-whole", None), running("old-slice", 16384, annotated),
            *(newcomer(i) for i in range(8))]  # 8 whole cards wanted on node-a, 6 are left
    (tmp_path / "w.yaml").write_text(yaml.safe_dump_all(docs))
    report = tmp_path / "r.json"
    main(["simulate", "--inventory", str(INVENTORY), "--workload", str(tmp_path / "w.yaml"),
          "--report", str(report)])  # fmt: skip
    pods = {p["name"]: p for p in json.loads(report.read_text())["pods"]}
    assert pods["old-slice"]["devices"][0]["uuid"] == CARD
    assert pods["old-slice"]["devices"][0]["template"] == "vir05_1c_16g"
    held = {pods["old-whole"]["devices"][0]["uuid"], CARD}
    placed = [p for n, p in pods.items() if n.startswith("new-") and p["phase"] == "Running"]
    assert len(placed) == 6 and not held & {d["uuid"] for p in placed for d in p["devices"]}
    assert sum(p["phase"] == "Pending" for n, p in pods.items() if n.startswith("new-")) == 2


async def test_apply_books_running_pods_in_the_running_system(tmp_path: Path) -> None:
    import asyncio

    from services.cli.get import fetch_report
    from services.cli.up import ControlPlane
    from tests.e2e.test_system import apply
    from tests.processes import wait_until

    cp = ControlPlane(tmp_path / "state", inventory=str(INVENTORY))
    await asyncio.to_thread(cp.start, lambda _line: None)
    try:
        reply = await apply(cp.url, yaml.safe_dump_all([running("old-whole", None),
                                                        *(newcomer(i) for i in range(8))]))  # fmt: skip
        assert all(r.outcome == "accepted" for r in reply.results), reply
        report: dict = {}

        async def settled() -> bool:
            nonlocal report
            report = await fetch_report(cp.url, "tessera")
            pods = {p["name"]: p for p in report["pods"]}
            return len(pods) == 9 and sum(p["phase"] == "Running" for p in pods.values()) == 8
        await wait_until(settled, 60, "old-whole booked, 7 newcomers placed, 1 waiting")
    finally:
        await asyncio.to_thread(cp.stop)
    pods = {p["name"]: p for p in report["pods"]}
    held = pods["old-whole"]["devices"][0]["uuid"]
    assert pods["old-whole"]["node"] == "node-a"
    assert held not in {d["uuid"] for n, p in pods.items() if n != "old-whole" for d in p["devices"]}


def test_a_pod_made_with_a_node_name_and_no_status_runs_there(tmp_path: Path) -> None:
    """A pod created with `spec.nodeName` has no status yet (the API server stores it Pending):
    kube-scheduler skips it and the node's kubelet starts it. It was refused as claiming a node
    it was never given; it is read as bound there (with a warning: the kubelet's own admission —
    node there, pod fits — is not judged), its cards held before anything else is placed."""
    from services.core.devices import build_vendors
    from services.core.workload import admit
    from services.core.workload.devicerequests import hami_parser

    preset = running("preset", None)
    del preset["status"]
    reg = build_vendors()
    w = admit([preset], hami_parser(reg), reg.resource_names())
    assert not w.rejections and [(p.pod, p.node) for p in w.running] == [("preset", "node-a")]
    assert [r.path for r in w.warnings] == ["spec.nodeName"]
    (tmp_path / "w.yaml").write_text(yaml.safe_dump_all([preset, *(newcomer(i) for i in range(8))]))
    report = tmp_path / "r.json"
    main(["simulate", "--inventory", str(INVENTORY), "--workload", str(tmp_path / "w.yaml"),
          "--report", str(report)])  # fmt: skip
    pods = {p["name"]: p for p in json.loads(report.read_text())["pods"]}
    assert (pods["preset"]["phase"], pods["preset"]["node"]) == ("Running", "node-a")
    assert sum(p["phase"] == "Running" for n, p in pods.items() if n.startswith("new-")) == 7
