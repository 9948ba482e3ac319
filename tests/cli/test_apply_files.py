"""`tessera apply -f A -f B` reads each file on its own (rev-newcomer findings 2, 3): a file that
is no YAML is named with the line, column and the parser's words, and the other files are still
applied, as kubectl does; a rejected object names the file it came from. `queue update
--capability` says it replaced the whole capability, naming what is no longer capped (10)."""

from __future__ import annotations

import pytest

from contracts.api import ACCEPTED, REJECTED, ApplyReply, ObjectResult
from services.cli.control import capability_replaced, object_files, print_apply, readable
from services.core.workload.manifests import ManifestError, load_documents

TAB = "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: tabbed\nspec: {}\n"
BAD_INDENT = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: badindent\n spec:\n  containers: []\n"
GOOD = "apiVersion: v1\nkind: Pod\nmetadata: {name: good-one}\nspec: {containers: [{name: c, image: busybox}]}\n"
QUEUE = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"


@pytest.mark.parametrize(("text", "problem"), [
    (TAB, "line 4, column 1: found character that cannot start any token (while scanning for the next "
          "token); it is a tab: YAML indents with spaces only"),
    (BAD_INDENT, "line 5, column 2: did not find expected key (while parsing a block mapping that began "
                 "at line 1, column 1)"),
])  # fmt: skip
def test_a_yaml_error_keeps_its_line_column_and_cause(text: str, problem: str) -> None:
    with pytest.raises(ManifestError) as exc:
        load_documents(text)
    assert str(exc.value) == problem


def test_a_file_that_is_no_yaml_is_named_and_the_others_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    files = [("good.yaml", GOOD), ("16-tab.yaml", TAB), ("q.json", '{"kind": "Queue"}')]
    assert readable(files) == [("good.yaml", GOOD), ("q.json", '{"kind": "Queue"}')]
    assert capsys.readouterr().err == (
        "error: error parsing 16-tab.yaml: line 4, column 1: found character that cannot start any token "
        "(while scanning for the next token); it is a tab: YAML indents with spaces only\n")  # fmt: skip


def test_a_rejected_object_names_its_file(capsys: pytest.CaptureFixture[str]) -> None:
    sources = object_files([("good.yaml", GOOD), ("queues.yaml", QUEUE), ("-", GOOD.replace("good-one", "piped"))])
    reply = ApplyReply(results=(
        ObjectResult(kind="Pod", name="good-one", namespace="default", outcome=REJECTED, reasons=("spec: x",)),
        ObjectResult(kind="Queue", name="q", outcome=REJECTED),
        ObjectResult(kind="Pod", name="piped", namespace="default", outcome=REJECTED),
        ObjectResult(kind="Pod", name="fine", namespace="default", outcome=ACCEPTED)))  # fmt: skip
    print_apply(reply, "table", sources=sources)
    assert capsys.readouterr().out.splitlines() == [
        "pod/default/good-one rejected (from good.yaml)", "    spec: x",
        "queue/q rejected (from queues.yaml)",
        "pod/default/piped rejected",  # stdin: no file to name
        "pod/default/fine accepted"]  # fmt: skip


def test_queue_update_capability_says_it_replaces_the_whole_capability() -> None:
    assert capability_replaced({"cpu": "64"}, {"cpu": "32"}) == (
        "    capability is now cpu=32 (--capability replaces the whole capability)")
    assert capability_replaced({"cpu": "64", "huawei.com/Ascend910B3": "8"}, {"cpu": "32"}) == (
        "    Warning: capability is now cpu=32 (--capability replaces the whole capability): no longer "
        "capped: huawei.com/Ascend910B3 (was 8); to keep it, give --capability cpu=32,huawei.com/Ascend910B3=8")
