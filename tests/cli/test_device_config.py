"""A HAMi device-config.yaml reaches every place that reads the catalogue: simulate's admission
and the scheduler's fit, and in the running system admission, scheduler and node agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_up_down import tessera
from tests.processes import ROOT

DEVICE_CONFIG = ROOT / "tests" / "fixtures" / "devices" / "device-config-910b.yaml"
INVENTORY = "nodes:\n  - {name: n1, cpu: 8, memory: 64Gi, devices: [{type: Ascend910B3, count: 1}]}\n"
GENERIC = """
apiVersion: v1
kind: Pod
metadata: {name: generic}
spec:
  containers:
    - name: c
      image: busybox
      resources: {limits: {huawei.com/Ascend910: "1", huawei.com/Ascend910-memory: "2000"}}
"""


def simulated_slice(tmp: Path, *extra: str) -> tuple[str, int]:
    (tmp / "inv.yaml").write_text(INVENTORY)
    (tmp / "w.yaml").write_text(GENERIC)
    out = tessera("simulate", "--inventory", str(tmp / "inv.yaml"), "--workload", str(tmp / "w.yaml"),
                  "--report", str(tmp / "r.json"), *extra)  # fmt: skip
    assert out.returncode == 0, out.stderr
    (pod,) = json.loads((tmp / "r.json").read_text())["pods"]
    assert pod["phase"] == "Running", pod
    return pod["devices"][0]["template"], pod["devices"][0]["memory"]


def test_simulate_fits_on_the_given_catalogue(tmp_path: Path) -> None:
    assert simulated_slice(tmp_path) == ("vir05_1c_16g", 16384)  # HAMi's chart values
    assert simulated_slice(tmp_path, "--device-config", str(DEVICE_CONFIG)) == ("vir10_3c_32g", 32768)


def test_running_system_uses_the_given_catalogue(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "w.yaml").write_text(GENERIC)
    state = tmp_path / "state"
    up = tessera("up", "--detach", "--state-dir", str(state), "--inventory", str(tmp_path / "inv.yaml"),
                 "--device-config", str(DEVICE_CONFIG))  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        assert tessera("apply", "-f", str(tmp_path / "w.yaml"), "--state-dir", str(state)).returncode == 0
        for _ in range(200):  # poll `get pods` until the pod runs
            pods = json.loads(tessera("get", "pods", "-o", "records", "--state-dir", str(state)).stdout)
            if pods and pods[0]["phase"] == "Running":
                break
        assert pods[0]["phase"] == "Running", pods
        assert pods[0]["devices"][0]["template"] == "vir10_3c_32g"
    finally:
        tessera("down", "--state-dir", str(state))


def test_simulate_says_which_keys_of_a_hami_configmap_it_takes_without_acting_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.cli.main import main
    from tests.core.devices.test_catalogue import HAMI_NVIDIA

    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "w.yaml").write_text(GENERIC)
    (tmp_path / "cm.yaml").write_text(HAMI_NVIDIA)
    args = ["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload", str(tmp_path / "w.yaml"),
            "-o", "json"]  # fmt: skip
    assert main([*args, "--device-config", str(tmp_path / "cm.yaml")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {tmp_path / 'cm.yaml'}: nvidia.enableNumaTopology: not acted on by Tessera" in err, err
    assert f"warning: {tmp_path / 'cm.yaml'}: nvidia.migProfileAllowlist: not acted on by Tessera" in err, err


def test_every_service_logs_them_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Admission, allocator and node agent read the file through `device_catalogue`."""
    import logging

    from services.runtime.bootstrap import device_catalogue
    from tests.core.devices.test_catalogue import VOLCANO_NVIDIA

    (tmp_path / "cm.yaml").write_text(VOLCANO_NVIDIA)
    with caplog.at_level(logging.WARNING, logger="services.runtime.bootstrap"):
        assert device_catalogue(str(tmp_path / "cm.yaml")) is not None
    said = [r.getMessage() for r in caplog.records]
    assert [s.split(": ")[1] for s in said] == ["nvidia.disableCoreLimit"], said
