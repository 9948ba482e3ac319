"""Node affinity at admission: `matchFields` read as a node-name requirement, preferred terms
with their weights, and what the API server would refuse refused in its words
(validateNodeFieldSelectorRequirement, validatePreferredSchedulingTerms)."""

from __future__ import annotations

import pytest

from contracts.workloads import LabelRequirement, PreferredNodeTerm
from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()
TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


def admitted(node_affinity: str) -> Workload:
    text = ("{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {affinity: {nodeAffinity: "
            + node_affinity + "}, containers: [{name: c, image: x}]}}")  # fmt: skip
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def run(term: str) -> Workload:
    return admitted("{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [" + term + "]}}")


def test_a_field_requirement_is_kept_beside_the_label_ones() -> None:
    w = run("{matchExpressions: [{key: pool, operator: In, values: [a]}],"
            " matchFields: [{key: metadata.name, operator: NotIn, values: [n2]}]}")
    assert not w.rejections
    assert w.jobs[0].tasks[0].affinity == ((
        LabelRequirement(key="pool", operator="In", values=("a",)),
        LabelRequirement(key="metadata.name", operator="NotIn", values=("n2",), field=True)),)  # fmt: skip


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("{key: metadata.name, operator: In, values: [n1, n2]}",
         f"{TERMS}.matchFields[0].values: Required value: must be only one value when `operator` is 'In' "
         "or 'NotIn' for node field selector"),
        ("{key: metadata.name, operator: Exists}",
         f'{TERMS}.matchFields[0].operator: Invalid value: "Exists": not a valid selector operator'),
        ("{key: metadata.labels, operator: In, values: [x]}",
         f'{TERMS}.matchFields[0].key: Invalid value: "metadata.labels": not a valid field selector key'),
    ],
)  # fmt: skip
def test_what_the_api_server_refuses_is_refused_in_its_words(field: str, line: str) -> None:
    w = run("{matchFields: [" + field + "]}")
    assert not w.jobs
    assert [r.line() for r in w.rejections] == [line]


def preferred(entries: str) -> Workload:
    return admitted("{preferredDuringSchedulingIgnoredDuringExecution: [" + entries + "]}")


def test_preferred_terms_keep_their_weights_and_fields() -> None:
    w = preferred("{weight: 30, preference: {matchExpressions: [{key: zone, operator: In, values: [x]}]}},"
                  " {weight: 5, preference: {matchFields: [{key: metadata.name, operator: In, values: [n1]}]}}")
    assert not w.rejections
    assert w.jobs[0].tasks[0].preferred_affinity == (
        PreferredNodeTerm(weight=30, requirements=(LabelRequirement(key="zone", operator="In", values=("x",)),)),
        PreferredNodeTerm(weight=5, requirements=(
            LabelRequirement(key="metadata.name", operator="In", values=("n1",), field=True),)),
    )  # fmt: skip


@pytest.mark.parametrize("weight", ["0", "101"])
def test_a_preferred_weight_outside_1_to_100_is_refused(weight: str) -> None:
    w = preferred("{weight: " + weight + ", preference: {matchExpressions: [{key: zone, operator: Exists}]}}")
    assert [r.line() for r in w.rejections] == [
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: "
        f"{weight}: must be in the range 1-100"]


@pytest.mark.parametrize(
    ("expression", "line"),
    [
        ("{key: gen, operator: Gt, values: ['4', '9']}",
         f"{TERMS}.matchExpressions[0].values: Required value: must be specified single value when "
         "`operator` is 'Lt' or 'Gt'"),
        ("{key: gen, operator: Lt}",
         f"{TERMS}.matchExpressions[0].values: Required value: must be specified single value when "
         "`operator` is 'Lt' or 'Gt'"),
        ("{key: gen, operator: In}",
         f"{TERMS}.matchExpressions[0].values: Required value: must be specified when `operator` is "
         "'In' or 'NotIn'"),
        ("{key: gen, operator: Exists, values: [x]}",
         f"{TERMS}.matchExpressions[0].values: Forbidden: may not be specified when `operator` is "
         "'Exists' or 'DoesNotExist'"),
        ("{key: gen, operator: Near, values: [x]}",
         f'{TERMS}.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator'),
    ],
)  # fmt: skip
def test_a_label_requirement_the_api_server_refuses_is_refused_in_its_words(expression: str, line: str) -> None:
    w = run("{matchExpressions: [" + expression + "]}")
    assert not w.jobs
    assert [r.line() for r in w.rejections] == [line]


def test_required_node_affinity_with_no_term_is_refused() -> None:
    # ValidateNodeSelector; read as no terms it was no constraint and matched every node
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    for required in ("{nodeSelectorTerms: []}", "{}"):
        w = admitted("{requiredDuringSchedulingIgnoredDuringExecution: " + required + "}")
        assert [r.line() for r in w.rejections] == [
            f"{where}: Required value: must have at least one node selector term"]
    assert not run("{}").rejections  # an empty term is the API server's to accept: it matches no node


def test_gt_and_lt_read_integers_as_go_parses_them() -> None:
    # kube parses both sides with strconv.ParseInt(s, 10, 64): no "_", no spaces, no non-ASCII
    # digits, nothing beyond int64 — a label it cannot parse matches neither Gt nor Lt
    from services.core.scheduling.nodelabels import go_int, requirement_matches

    gt = LabelRequirement(key="gen", operator="Gt", values=("4",))
    assert requirement_matches(gt, {"gen": "5"}) and requirement_matches(gt, {"gen": "+50"})
    for label in ("5_0", " 50", "50 ", "\u0665\u0660", "9223372036854775808", "5.0", ""):
        assert not requirement_matches(gt, {"gen": label}), label
    assert not requirement_matches(LabelRequirement(key="gen", operator="Lt", values=("1_0",)), {"gen": "5"})
    assert (go_int("-9223372036854775808"), go_int("9223372036854775807")) == (-(2**63), 2**63 - 1)
