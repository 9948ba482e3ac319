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
