"""What `get queues` and `get pods` print (issue 13, items 6, 7 and 15), from the report a
simulation of the article's shapes writes — the records `get` prints from a running system's log.

Item 6: cards as cards (`2.9`, not `2938`), memory with units, and weight, capability,
deserved, allocated side by side. Item 7: a vNPU template slice's AI cores as the card has them
(`5/20 cores`), percentages only for soft slices. Item 15: rich lays the table out; piped, it has
no colour and no box, one row a line; `rich` is not imported by a command that draws no table.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.cli import tables
from services.cli.get import POD_COLUMNS, QUEUE_COLUMNS, _table_view, device_text
from services.cli.tables import amount, render
from services.core.scheduling.config import DEFAULT_CONF
from tests.core.scheduling.scenarios import Scenario, run_engine
from tests.processes import ROOT

WORKLOAD = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: infer}
spec: {weight: 3, capability: {cpu: 16, memory: 64Gi, huawei.com/Ascend910B3: 2}}
---
apiVersion: v1
kind: Pod
metadata: {name: templated, annotations: {scheduling.volcano.sh/queue-name: infer}}
spec:
  nodeSelector: {kubernetes.io/hostname: tpl}
  containers:
    - name: c
      image: busybox
      resources:
        limits: {cpu: 2, memory: 8Gi, huawei.com/Ascend910B3: 1, huawei.com/Ascend910B3-memory: 16384}
---
apiVersion: v1
kind: Pod
metadata: {name: soft, annotations: {huawei.com/vnpu-mode: hami-core}}
spec:
  nodeSelector: {kubernetes.io/hostname: soft}
  containers:
    - name: c
      image: busybox
      resources:
        limits: {huawei.com/Ascend910B3: 1, huawei.com/Ascend910B3-memory: 4096, huawei.com/Ascend910B3-core: 30}
"""
INVENTORY = {"nodes": [
    {"name": "tpl", "cpu": 64, "memory": "256Gi", "devices": [{"type": "Ascend910B3", "count": 2}]},
    {"name": "soft", "cpu": 64, "memory": "256Gi", "annotations": {"hami-vnpu-core": "true"}, "devices": [{"type": "Ascend910B3", "count": 2}]},
]}  # fmt: skip


@pytest.fixture(scope="module")
def report() -> dict:  # type: ignore[type-arg]
    inventory = INVENTORY
    sc = Scenario("tables", "article shapes", DEFAULT_CONF, inventory, WORKLOAD, {}, multi_step=True)
    return run_engine(sc)


def _row(table: str, first: str) -> list[str]:
    _, *lines = table.splitlines()
    (line,) = [x for x in lines if x.split()[0] == first]
    return line.split()


def test_get_queues_prints_weight_capability_deserved_allocated_side_by_side(report: dict) -> None:  # type: ignore[type-arg]
    (infer,) = [q for q in report["queues"] if q["name"] == "infer"]
    assert (infer["weight"], infer["parent"]) == (3, "root")
    assert infer["capability"] == {"cpu": 16000, "huawei.com/Ascend910B3": 2000, "memory": 65536}
    table = render(_table_view("queues", [infer]), QUEUE_COLUMNS, "table")
    assert table.splitlines()[0].split() == ["NAME", "STATE", "WEIGHT", "PARENT", "CAPABILITY", "DESERVED",
                                             "ALLOCATED", "WARNING"]  # fmt: skip
    name, state, weight, parent, capability, *_ = _row(table, "infer")
    assert (name, state, weight, parent) == ("infer", "Open", "3", "root")
    assert capability == "cpu=16,huawei.com/Ascend910B3=2,memory=64Gi"
    allocated = _table_view("queues", [infer])[0]["allocated"]
    assert "cpu=2" in allocated and "memory=8Gi" in allocated  # the templated pod's requests
    shares = {k: v for k, v in infer["allocated"].items() if k.startswith("huawei.com/")}
    assert shares and all(v % 1000 for v in shares.values())  # a slice: a fraction of a card
    for res, units in shares.items():
        assert f"{res}={units / 1000:.1f}".removesuffix(".0") in allocated  # 250 milli → 0.2


@pytest.mark.parametrize(("resource", "units", "shown"), [
    ("huawei.com/Ascend910", 2938, "2.9"), ("huawei.com/Ascend910", 8000, "8"), ("cpu", 2500, "2.5"),
    ("memory", 262144, "256Gi"), ("memory", 1536, "1536Mi"), ("memory", 512, "512Mi"), ("pods", 3, "3"),
    ("huawei.com/Ascend910B3-memory", 4096000, "4Gi"), ("huawei.com/Ascend910B3-core", 30000, "30%"),
    ("nvidia.com/gpumem", 2000000, "2000Mi"),
])  # fmt: skip
def test_amounts_are_shown_as_people_write_them(resource: str, units: int, shown: str) -> None:
    assert amount(resource, units) == shown


def test_get_pods_prints_a_templates_ai_cores_as_the_card_has_them(report: dict) -> None:  # type: ignore[type-arg]
    pods = {p["name"]: p for p in report["pods"]}
    (templated,) = pods["templated"]["devices"]
    assert (templated["kind"], templated["template"], templated["cores"], templated["card_cores"]) == \
        ("template", "vir05_1c_16g", 5, 20)  # fmt: skip
    (soft,) = pods["soft"]["devices"]
    assert soft["kind"] == "soft" and soft["cores"] == 30
    table = render(_table_view("pods", report["pods"]), POD_COLUMNS, "table")
    assert f"{templated['uuid']}:16384MB/5/20 cores[vir05_1c_16g]" in table
    assert f"{soft['uuid']}:4096MB/30%" in table
    assert "5%" not in table  # what it printed before: 5 of 20 cores read as a percentage
    assert device_text({"uuid": "u", "memory": 65536, "cores": 20, "template": None, "kind": "whole",
                        "card_cores": 20}) == "u:65536MB/whole"  # fmt: skip


def test_a_piped_table_has_no_colour_no_box_and_one_row_a_line() -> None:
    long = "x" * 500
    rows = [{"name": "a[bold]b[/bold]", "state": long}, {"name": "c", "state": ""}]
    text = tables.table(rows, ("name", "state"))
    assert text.splitlines() == ["NAME             STATE", f"a[bold]b[/bold]  {long}", "c"]
    assert "\x1b" not in text and not set(text) & set("─│┃━┏┗")


def test_columns_align_by_display_width_not_by_characters() -> None:
    text = tables.table([{"name": "训练队列", "state": "Open"}, {"name": "q", "state": "Closed"}], ("name", "state"))
    assert text.splitlines() == ["NAME      STATE", "训练队列  Open", "q         Closed"]  # 训练队列: 8 columns


def test_on_a_terminal_the_header_is_bold_unless_the_list_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    text = tables.table([{"name": "a"}], ("name",))
    assert "\x1b[1m" in text and "NAME" in text
    long = tables.table([{"name": str(i)} for i in range(tables.RICH_MAX_ROWS + 1)], ("name",))
    assert "\x1b" not in long and len(long.splitlines()) == tables.RICH_MAX_ROWS + 2


def test_a_command_that_draws_no_table_does_not_import_rich() -> None:
    code = ("import sys; from services.cli.main import build_parser; build_parser(); "
            "from services.cli import get, tables; tables.render([], ('a',), 'json'); "
            "print('rich' in sys.modules)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
