"""Two containers of one pod on one Ascend card (the mixed-cluster review's H1): HAMi fits each
container on the usage the earlier ones added, so two vNPUs of one template share a card; two
templates on one card would both be carved one size (the device plugin reads the template by
card), so Tessera keeps them on separate cards and says so, with what would unblock the pod."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.cli.main import main

ONE_310P = "nodes:\n  - name: p1\n    cpu: 96\n    memory: 512Gi\n    devices:\n      - {type: Ascend310P, count: 1}\n"
ONE_910B3 = "nodes:\n  - name: one\n    cpu: 192\n    memory: 1536Gi\n    devices:\n      - {type: Ascend910B3, count: 1}\n"


def _pod(name: str, word: str, *memory: int) -> str:
    containers = "".join(
        f"  - name: c{i}\n    image: x\n    resources:\n      limits:\n"
        f"        huawei.com/{word}: 1\n        huawei.com/{word}-memory: {m}\n"
        for i, m in enumerate(memory))  # fmt: skip
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n{containers}"


def _simulate(tmp_path: Path, inventory: str, workload: str) -> tuple[dict[str, dict], Path]:
    inv, work = tmp_path / "inv.yaml", tmp_path / "w.yaml"
    inv.write_text(inventory)
    work.write_text(workload)
    report, log = tmp_path / "r.json", tmp_path / "l.jsonl"
    assert main(["simulate", "--inventory", str(inv), "--workload", str(work), "--report", str(report),
                 "--events", str(log), "-o", "json"]) == 0  # fmt: skip
    return {p["name"]: p for p in json.loads(report.read_text())["pods"]}, log


def test_two_containers_of_one_template_share_the_only_card(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods, _ = _simulate(tmp_path, ONE_310P, _pod("sidecar-pair", "Ascend310P", 3072, 3072))
    capsys.readouterr()
    pod = pods["sidecar-pair"]
    assert pod["phase"] == "Running", pod
    assert [(d["uuid"], d["template"]) for d in pod["devices"]] == [("p1-Ascend310P-0", "vir01")] * 2


def test_two_templates_on_the_only_card_wait_saying_which_and_what_unblocks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    pods, log = _simulate(tmp_path, ONE_910B3, _pod("two-on-one", "Ascend910B3", 16384, 32768))
    assert pods["two-on-one"]["phase"] == "Pending"
    assert "CardHoldsAnotherTemplateOfThePod" in pods["two-on-one"]["reason"]
    capsys.readouterr()
    assert main(["explain", "pod", "two-on-one", "--from", str(log)]) == 0
    out = capsys.readouterr().out
    assert ("Ascend910B3: the pod's containers ask different vNPU templates (vir05_1c_16g, vir10_3c_32g)"
            in out), out
    assert "2 Ascend910B3 cards, the node has 1" in out
    unblock = out[out.index("What would unblock it:"):]
    assert ("ask one template size in every container (32768 MB each: slices of one template share a card), "
            "or run the pod on a node with 2 free Ascend910B3 cards") in unblock, unblock


def test_the_condition_and_a_whole_card_say_why_in_words() -> None:
    """The PodScheduled condition's words, and a whole card (its container's own) told apart
    from the two templates."""
    from contracts.workloads import DeviceRequest, JobSpec, TaskSpec
    from services.core.devices import (
        DeviceConfig,
        build_vendors,
        fit_task,
        parse_container,
        prepare_task,
    )
    from services.core.devices.fit import NodeMisfit, pod_share_words
    from services.core.scheduling import podreasons
    from tests.core.devices.test_fit import npu, use

    ask = DeviceRequest(vendor="huawei", type="Ascend910B3", count=1, memory=16384, template="vir05_1c_16g")
    spec = JobSpec(namespace="d", name="j", tasks=(TaskSpec(name="t", devices=(ask, ask)),))
    assert podreasons.phrase("1/1 CardHoldsAnotherTemplateOfThePod", spec) == (
        "have too few Ascend910B3 cards for the pod's vNPU templates (one card carves one template "
        "for a pod; ask one size in every container to share a card)")  # fmt: skip
    reg = build_vendors()
    whole = parse_container({"huawei.com/Ascend910B3": 1}, registry=reg)
    part = parse_container({"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 16384}, registry=reg)
    card = npu("c0", 0)
    misfit = fit_task([(card, use())], whole + part, registry=reg)
    assert isinstance(misfit, NodeMisfit) and misfit.message == "1/1 CardUsedByAnotherContainerOfThePod"
    words = pod_share_words(prepare_task(whole + part, {}, DeviceConfig(), reg), misfit.message, [card])
    assert words is not None and words[0].startswith(
        "Ascend910B3: the pod's containers ask 2 cards together and a whole card is its container's own, "
        "the node has 1"), words  # fmt: skip
    assert "run the pod on a node with more free Ascend910B3 cards" in words[1]
