"""rev-examples F7: HAMi's ascend-job-910B3.yaml (`Ascend910B3: 1`, `-memory: 2000`, no
`huawei.com/vnpu-mode`) went to a hami-core node as a 16384 MB / 0 % soft slice, as HAMi v2.10
places it (#2035: the webhook's rounded memory, no cores), while the admission warning promised a
vNPU template with 5 aiCores. The warning now says what such a node gives, and this checks it
against what the simulation booked."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from services.cli.main import main

INVENTORY = {"nodes": [{"name": "b3soft", "cpu": 192, "memory": "1536Gi",
                        "annotations": {"hami-vnpu-core": "true"},
                        "devices": [{"type": "Ascend910B3", "count": 8}]}]}  # fmt: skip
#: HAMi's examples/ascend/job-910B3.yaml, its resources as shipped
POD = """
apiVersion: v1
kind: Pod
metadata: {name: ascend910b3-job}
spec:
  containers:
  - name: c
    image: x
    resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "2000"}}
"""


def test_the_rounding_warning_says_what_a_hami_core_node_books(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(INVENTORY))
    (tmp_path / "w.yaml").write_text(POD)
    report, events = tmp_path / "r.json", tmp_path / "e.jsonl"
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
                 "--report", str(report), "--events", str(events)]) == 0  # fmt: skip
    (pod,) = json.loads(report.read_text())["pods"]
    (slice_,) = pod["devices"]
    assert (pod["phase"], slice_["kind"], slice_["cores"], slice_["template"]) == ("Running", "soft", 0, None)
    submitted = [json.loads(line)["data"] for line in events.read_text().splitlines()]
    (warning,) = [w for d in submitted if d.get("type") == "JobSubmitted" for w in d["warnings"]]
    assert "rounded up to Ascend910B3's vNPU template vir05_1c_16g" in warning
    assert (f"on a hami-core node (hami-vnpu-core: \"true\") it is a soft slice of {slice_['memory']} MB "
            "instead, with no AI cores booked") in warning  # fmt: skip
