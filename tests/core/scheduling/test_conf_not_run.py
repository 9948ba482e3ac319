"""A volcano-scheduler.conf naming what Tessera does not run — Volcano's `shuffle`,
`gangpreempt` and `gangreclaim` actions, plugins such as `usage` and `tdm` — is taken as Volcano
takes a plugin it lacks: the rest runs as written. The scheduler and `tessera simulate` say
what is left out, naming the field (an unknown action refused the whole conf before, and an
unknown plugin was skipped without a word)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cli.main import main
from services.core.scheduling.config import ConfigError, not_run, parse_conf
from services.core.scheduling.decide import plugin_names
from tests.processes import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "explain"

MOVED = """actions: "enqueue, allocate, preempt, shuffle, gangreclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: usage
- plugins:
  - name: predicates
  - name: tdm
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.AscendHAMiVNPUEnable: true
"""


def test_what_is_not_run_is_named_by_its_field() -> None:
    conf = parse_conf(MOVED)
    lines = not_run(conf, plugin_names())
    assert [line.split(":")[0] for line in lines] == ["actions", "actions", "tiers[0].plugins[2].name",
                                                      "tiers[1].plugins[1].name"]  # fmt: skip
    assert "'shuffle' is not run by Tessera" in lines[0] and "'gangreclaim'" in lines[1]
    assert "plugin 'usage' is not run by Tessera" in lines[2] and "deviceshare" in lines[2]
    assert not not_run(parse_conf(MOVED.replace("shuffle, gangreclaim, ", "").replace(
        "  - name: usage\n", "").replace("  - name: tdm\n", "")), plugin_names())  # fmt: skip


def test_the_configmap_volcano_reads_devices_from_is_named_with_where_tessera_reads_them() -> None:
    """The article's conf (and HAMi's vNPU guide) points deviceshare at hami-scheduler-device;
    Tessera fetches no ConfigMap, so an operator editing that one must learn it changes nothing."""
    conf = parse_conf(MOVED.replace("deviceshare.AscendHAMiVNPUEnable: true\n", "deviceshare.AscendHAMiVNPUEnable: true\n"
                                    "      deviceshare.KnownGeometriesCMNamespace: kube-system\n"
                                    "      deviceshare.KnownGeometriesCMName: hami-scheduler-device\n"))  # fmt: skip
    (line,) = [line for line in not_run(conf, plugin_names()) if "arguments" in line]
    assert line.startswith("tiers[1].plugins[3].arguments: deviceshare.KnownGeometriesCMName and "
                           "deviceshare.KnownGeometriesCMNamespace are not read by Tessera"), line  # fmt: skip
    assert "--device-config" in line and "`deviceConfig`" in line


def test_deviceshare_arguments_volcano_acts_on_and_tessera_does_not_are_named() -> None:
    """Volcano's legacy GPU switches, MindCluster's vNPU, its node-lock switch and exclusive-GPU
    rules were taken without a word: a conf moved over must say which of them do nothing here."""
    conf = parse_conf(MOVED.replace("deviceshare.AscendHAMiVNPUEnable: true\n", "deviceshare.AscendHAMiVNPUEnable: true\n"
                                    "      deviceshare.GPUNumberEnable: true\n"
                                    "      deviceshare.GPUSharingEnable: false\n"
                                    "      deviceshare.NodeLockEnable: true\n"
                                    "      deviceshare.GPUExclusiveRules: [{workloadType: training}]\n"))  # fmt: skip
    lines = [line for line in not_run(conf, plugin_names()) if "arguments" in line]
    assert [line.split(":")[0] for line in lines] == [
        "tiers[1].plugins[3].arguments.deviceshare.GPUNumberEnable",
        "tiers[1].plugins[3].arguments.deviceshare.NodeLockEnable",
        "tiers[1].plugins[3].arguments.deviceshare.GPUExclusiveRules"], lines  # fmt: skip
    assert "ask nvidia.com/gpu" in lines[0] and "--hami-node-lock" in lines[1]


def test_a_misspelt_deviceshare_argument_is_named_with_what_was_meant() -> None:
    """`deviceshare.AscendHAMiVNPUEnabel: true` left HAMi's vNPU off without a word (Volcano
    ignores an argument it does not read, too): the newcomer's review."""
    conf = parse_conf(MOVED.replace("deviceshare.AscendHAMiVNPUEnable: true\n",
                                    "deviceshare.AscendHAMiVNPUEnabel: true\n      deviceshare.Colour: blue\n"))  # fmt: skip
    lines = [line for line in not_run(conf, plugin_names()) if "arguments" in line]
    assert lines == [
        "tiers[1].plugins[3].arguments.deviceshare.AscendHAMiVNPUEnabel: not an argument of deviceshare, ignored "
        "(as Volcano ignores it); did you mean deviceshare.AscendHAMiVNPUEnable?",
        "tiers[1].plugins[3].arguments.deviceshare.Colour: not an argument of deviceshare, ignored (as Volcano "
        "ignores it)"], lines  # fmt: skip


def test_a_misspelt_action_is_still_refused() -> None:
    with pytest.raises(ConfigError, match="actions: unknown action 'alocate'"):
        parse_conf('actions: "enqueue, alocate"\ntiers: []\n')


def test_simulate_runs_the_rest_and_says_what_it_left_out(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    conf = tmp_path / "moved.conf"
    conf.write_text(MOVED)
    args = ["simulate", "--inventory", str(FIXTURES / "one-node.yaml"), "--workload",
            str(FIXTURES / "train-queue.yaml"), "-o", "json"]  # fmt: skip
    assert main([*args, "--scheduler-conf", str(conf)]) == 0
    out = capsys.readouterr()
    assert f"warning: {conf}: actions: 'shuffle' is not run by Tessera" in out.err, out.err
    assert f"warning: {conf}: tiers[1].plugins[1].name: plugin 'tdm' is not run" in out.err, out.err
    plain = tmp_path / "plain.conf"
    plain.write_text(MOVED.replace("shuffle, gangreclaim, ", "").replace("  - name: usage\n", "")
                     .replace("  - name: tdm\n", ""))  # fmt: skip
    assert main([*args, "--scheduler-conf", str(plain)]) == 0
    same = capsys.readouterr()
    assert "warning" not in same.err
    assert same.out == out.out  # the same placements: what is not run changes nothing


HDRF = MOVED.replace("shuffle, gangreclaim, ", "").replace("  - name: usage\n", "").replace(
    "  - name: tdm\n", "  - name: drf\n    enableHierarchy: true\n")  # fmt: skip


def test_drf_hierarchy_is_named_with_what_tessera_does_instead(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """drf's hDRF was taken without a word and not applied (drf.py: not implemented): an operator
    moving a conf with `enableHierarchy: true` must learn queues are not shared hierarchically by
    it — from the scheduler's log, `tessera up` and `tessera simulate` — and what to use instead."""
    lines = not_run(parse_conf(HDRF), plugin_names())
    assert [line.split(": ")[0] for line in lines] == ["tiers[1].plugins[1].enableHierarchy"], lines
    assert "not acted on by Tessera (Volcano's hDRF is not implemented" in lines[0]
    assert "flat dominant-resource share" in lines[0] and "capacity with enableHierarchy" in lines[0]
    assert not not_run(parse_conf(HDRF.replace("enableHierarchy: true", "enableHierarchy: false")), plugin_names())
    conf = tmp_path / "hdrf.conf"
    conf.write_text(HDRF)
    args = ["simulate", "--inventory", str(FIXTURES / "one-node.yaml"), "--workload",
            str(FIXTURES / "train-queue.yaml"), "-o", "json", "--scheduler-conf", str(conf)]  # fmt: skip
    assert main(args) == 0
    assert f"warning: {conf}: tiers[1].plugins[1].enableHierarchy: not acted on" in capsys.readouterr().err
    from argparse import Namespace

    from services.cli.up import check_config

    check_config(Namespace(scheduler_conf=str(conf), device_config=""))
    assert (f"warning: --scheduler-conf {conf}: tiers[1].plugins[1].enableHierarchy: not acted on"
            in capsys.readouterr().err)  # fmt: skip


HELM = """actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_a_tier_layout_that_keeps_reclaim_from_deserved_is_said_once(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Volcano's Helm tiers (gang and conformance above proportion or capacity) with reclaim: the
    first tier's victims decide reclaim, never the queues' deserved or guarantee (volcano-sh/
    volcano#5896). Kept as Volcano's; the operator is told once, naming the field."""
    (line,) = not_run(parse_conf(HELM), plugin_names())
    assert line.startswith("tiers[1].plugins[2]: proportion is in a tier below gang and conformance (tiers[0])"), line
    assert "volcano-sh/volcano#5896" in line and "reclaim does not keep to deserved" in line, line
    cap = not_run(parse_conf(HELM.replace("proportion", "capacity")), plugin_names())
    assert len(cap) == 1 and "deserved and guarantee" in cap[0], cap
    one_tier = HELM.replace("- plugins:\n  - name: drf", "  - name: drf")
    assert not not_run(parse_conf(one_tier), plugin_names())
    assert not not_run(parse_conf(HELM.replace("reclaim, ", "")), plugin_names())
    lifted = HELM.replace("  - name: gang\n", "  - name: gang\n    enableReclaimable: false\n").replace(
        "  - name: conformance\n", "  - name: conformance\n    enableReclaimable: false\n")  # fmt: skip
    assert not not_run(parse_conf(lifted), plugin_names())
    conf = tmp_path / "helm.conf"
    conf.write_text(HELM)
    assert main(["simulate", "--inventory", str(FIXTURES / "one-node.yaml"), "--workload",
                 str(FIXTURES / "train-queue.yaml"), "-o", "json", "--scheduler-conf", str(conf)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("volcano-sh/volcano#5896") == 1 and f"warning: {conf}: tiers[1].plugins[2]: proportion" in err
