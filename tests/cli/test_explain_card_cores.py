"""A pod waiting for a card held by an exclusive pod (`gpucores: 100`): HAMi's reason is
CardComputeUnitsExhausted (the card's cores are all used and the pod asks none), yet the words
said "0 of 1 have that free (most free: 0 MB)" of a card with 14 GB free, and the proportion
line "exceeds the 1 the cluster has ... add nvidia.com/gpu to the cluster" of a node whose
allocatable lists 10 nvidia.com/gpu (HAMi's plugin serves deviceSplitCount per GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_explain import explain, main, waits

INVENTORY = """
nodes:
  - name: t4-0
    cpu: 64
    memory: 256Gi
    devices:
      - {type: NVIDIA-Tesla-T4, count: 1, memory: 15360}
"""


def _pod(name: str, limits: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: volcano
  containers:
    - {{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: "1", {limits}}}}}}}
---"""


@pytest.mark.parametrize(("limits", "said"), [
    ('nvidia.com/gpumem: "1000"', "a pod asking no cores does not share a card whose cores are all used"),
    ('nvidia.com/gpumem: "1000", nvidia.com/gpucores: "10"', "most free: 0 of 100 cores"),
])  # fmt: skip
def test_a_card_held_by_an_exclusive_pod_is_said_to_lack_cores_not_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], limits: str, said: str
) -> None:
    inv, work, log = tmp_path / "inv.yaml", tmp_path / "w.yaml", tmp_path / "l.jsonl"
    inv.write_text(INVENTORY)
    work.write_text(_pod("excl", 'nvidia.com/gpumem: "1000", nvidia.com/gpucores: "100"')
                    + _pod("sharer", limits))  # fmt: skip
    assert main(["simulate", "--inventory", str(inv), "--workload", str(work), "--events", str(log)]) == 0
    code, out, _ = explain(capsys, "pod", "sharer", "--from", str(log))
    assert code == 0
    why = waits(out)
    assert "most free: 0 MB" not in why, why
    assert "0 of 1 with that memory free have the cores" in why and said in why, why
    assert "1 held alone by a pod asking all its cores" in why, why
    assert "1 card the cluster has for it (queue shares count nvidia.com/gpu in cards" in why, why
    assert "add nvidia.com/gpu to the cluster" not in out, out
    assert "let the admitted jobs holding nvidia.com/gpu cards finish" in out, out
    assert main(["replay", "--verify", "--from", str(log)]) == 0
