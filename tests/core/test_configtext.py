"""Configuration as people paste it from Volcano's and HAMi's docs: the file, the `key: |`
block, the whole ConfigMap — all three read the same, and a mistake in any names its key path
(from the paste's top) on the command line, not in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services.core.configtext import DEVICE_KEYS, SCHEDULER_KEYS, PasteError, unwrap
from services.core.devices import CatalogueError, load_catalogue
from services.core.scheduling.config import DEFAULT_CONF, ConfigError, default_conf, parse_conf
from tests.processes import ROOT

DEVICE_CONFIG = (ROOT / "tests" / "fixtures" / "devices" / "device-config-910b.yaml").read_text()


def _indent(text: str, by: int) -> str:
    return textwrap.indent(text.strip("\n") + "\n", " " * by)


def as_block(key: str, text: str) -> str:
    return f"{key}: |\n{_indent(text, 2)}"


def as_configmap(name: str, key: str, text: str) -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
            f"data:\n  {key}: |\n{_indent(text, 4)}")  # fmt: skip


def forms(key: str, text: str) -> dict[str, str]:
    return {"file": text, "block": as_block(key, text), "conf block": as_block("conf", text),
            "configmap": as_configmap("volcano-scheduler-configmap", key, text),
            "data only": "data:\n" + _indent(as_block(key, text), 2)}  # fmt: skip


@pytest.mark.parametrize("form", ["file", "block", "conf block", "configmap", "data only"])
def test_every_form_of_the_scheduler_conf_reads_the_same(form: str) -> None:
    assert parse_conf(forms("volcano-scheduler.conf", DEFAULT_CONF)[form]) == default_conf()


@pytest.mark.parametrize("form", ["file", "block", "configmap", "data only"])
def test_every_form_of_the_device_config_reads_the_same(form: str) -> None:
    expected = load_catalogue(DEVICE_CONFIG)
    assert expected != load_catalogue("")  # the fixture differs from the defaults
    assert load_catalogue(forms("device-config.yaml", DEVICE_CONFIG)[form]) == expected


BAD_CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobReadyy: true\n'


def test_a_mistake_names_its_path_from_the_top_of_the_paste() -> None:
    with pytest.raises(ConfigError) as bare:
        parse_conf(BAD_CONF)
    assert str(bare.value) == "tiers[0].plugins[0].enableJobReadyy: unknown field"
    with pytest.raises(ConfigError) as wrapped:
        parse_conf(as_configmap("volcano-scheduler-configmap", "volcano-scheduler.conf", BAD_CONF))
    assert str(wrapped.value) == "data.volcano-scheduler.conf: tiers[0].plugins[0].enableJobReadyy: unknown field"
    bad_devices = DEVICE_CONFIG.replace("memoryAllocatable: 65536", "memoryAllocatable: lots", 1)
    with pytest.raises(CatalogueError) as dev:
        load_catalogue(as_configmap("hami-scheduler-device", "device-config.yaml", bad_devices))
    assert dev.value.path == "data.device-config.yaml: vnpus[0].memoryAllocatable"


def test_a_configmap_without_the_configuration_says_what_it_has() -> None:
    cm = "kind: ConfigMap\napiVersion: v1\ndata:\n  a.conf: x\n  b.conf: y\n"
    with pytest.raises(PasteError, match=r"data: none of volcano-scheduler.conf, conf \(it has a.conf, b.conf\)"):
        unwrap(cm, SCHEDULER_KEYS)
    with pytest.raises(ConfigError, match="none of"):
        parse_conf(cm)
    with pytest.raises(PasteError, match=r"data.device-config.yaml: expected the configuration text"):
        unwrap("kind: ConfigMap\ndata:\n  device-config.yaml: {vnpus: []}\n", DEVICE_KEYS)


def test_a_configuration_that_only_looks_like_a_wrapper_is_left_alone() -> None:
    only_vnpus = "vnpus: []\n"  # a device-config.yaml with one section is not a snippet
    assert unwrap(only_vnpus, DEVICE_KEYS) == (only_vnpus, "")
    assert unwrap("actions: allocate\n", SCHEDULER_KEYS) == ("actions: allocate\n", "")
    assert unwrap(": not yaml: [", SCHEDULER_KEYS) == (": not yaml: [", "")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip


@pytest.mark.parametrize("command", [
    ("services.scheduler", "--scheduler-conf"),
    ("services.cli.main", "up", "--state-dir", "{tmp}/state", "--scheduler-conf"),
])  # fmt: skip
def test_a_bad_scheduler_conf_is_one_line_on_the_command_line(command: tuple[str, ...], tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler-configmap.yaml"
    conf.write_text(as_configmap("volcano-scheduler-configmap", "volcano-scheduler.conf", BAD_CONF))
    out = _run(*(a.replace("{tmp}", str(tmp_path)) for a in command), str(conf),
               "--nats", "nats://127.0.0.1:1")  # fmt: skip
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"--scheduler-conf {conf}: data.volcano-scheduler.conf: tiers[0].plugins[0].enableJobReadyy: unknown field")
    assert not (tmp_path / "state").exists()  # `up` started nothing


def test_a_bad_device_config_stops_a_service_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    out = _run("services.admission", "--device-config", str(missing), "--nats", "nats://127.0.0.1:1")
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == f"--device-config {missing}: No such file or directory"
