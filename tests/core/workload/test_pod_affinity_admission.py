"""Inter-pod affinity at admission (issue 22): the compact terms the scheduling core reads, and
the API server's rules for bad terms, in its words and with the field path."""

from __future__ import annotations

from contracts.workloads import LabelRequirement, PodAffinity, PodAffinityTerm, TaskSpec
from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()
BASE = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def pod(affinity: str, labels: str = "{app: web, version: v1}") -> str:
    return (f"{{apiVersion: v1, kind: Pod, metadata: {{name: p, namespace: team, labels: {labels}}},"
            f" spec: {{containers: [{{name: c, image: busybox}}], affinity: {affinity}}}}}")  # fmt: skip


def task(affinity: str) -> TaskSpec:
    w = run(pod(affinity))
    assert not w.rejections, [r.line() for r in w.rejections]
    return w.jobs[0].tasks[0]


def reasons(affinity: str) -> list[str]:
    return [r.line() for r in run(pod(affinity)).rejections]


def anti(term: str) -> str:
    return f"{{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{term}]}}}}"


def test_terms_are_read_with_their_namespace_defaults() -> None:
    t = task("{podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: "
             "{matchLabels: {app: db}, matchExpressions: [{key: tier, operator: Exists}]}, "
             "topologyKey: zone}], preferredDuringSchedulingIgnoredDuringExecution: [{weight: 7, "
             "podAffinityTerm: {labelSelector: {}, namespaceSelector: {}, topologyKey: region}}]},"
             " podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector:"
             " {matchLabels: {app: web}}, namespaces: [a, b], topologyKey: kubernetes.io/hostname}]}}")  # fmt: skip
    assert t.pod_affinity == PodAffinity(
        affinity=(PodAffinityTerm(topology_key="zone", namespaces=("team",), selector=(
            LabelRequirement(key="app", operator="In", values=("db",)),
            LabelRequirement(key="tier", operator="Exists"))),),
        anti_affinity=(PodAffinityTerm(topology_key="kubernetes.io/hostname", namespaces=("a", "b"),
                       selector=(LabelRequirement(key="app", operator="In", values=("web",)),)),),
        preferred=(PodAffinityTerm(topology_key="region", selector=(), namespace_selector=(),
                                   weight=7),),
    )  # fmt: skip


def test_a_pod_without_pod_affinity_carries_none() -> None:
    assert task("{nodeAffinity: {}}").pod_affinity is None


def test_match_label_keys_join_the_selector_with_the_pods_own_values() -> None:
    t = task(anti("{labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [version, absent],"
                  " mismatchLabelKeys: [app2], topologyKey: kubernetes.io/hostname}"))  # fmt: skip
    assert t.pod_affinity is not None
    assert t.pod_affinity.anti_affinity[0].selector == (
        LabelRequirement(key="app", operator="In", values=("web",)),
        LabelRequirement(key="version", operator="In", values=("v1",)),
    )


def test_bad_terms_are_refused_in_the_api_servers_words() -> None:
    got = reasons(anti("{labelSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]},"
                       " {key: b, operator: Near, values: [y]}, {key: c, operator: In}]},"
                       " topologyKey: ''}"))  # fmt: skip
    assert got == [
        f"{BASE}.topologyKey: Required value: can not be empty",
        f"{BASE}.labelSelector.matchExpressions[0].values: Forbidden: may not be specified when "
        "`operator` is 'Exists' or 'DoesNotExist'",
        f'{BASE}.labelSelector.matchExpressions[1].operator: Invalid value: "Near": not a valid '
        "selector operator",
        f"{BASE}.labelSelector.matchExpressions[2].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'",
    ]


def test_a_preferred_weight_outside_1_to_100_is_refused() -> None:
    where = "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"
    got = reasons("{podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 101,"
                  " podAffinityTerm: {topologyKey: zone}}]}}")  # fmt: skip
    assert got == [f"{where}: Invalid value: 101: must be in the range 1-100"]


def test_label_keys_rules() -> None:
    got = reasons(anti("{matchLabelKeys: [version], topologyKey: zone}"))
    assert got == [f"{BASE}.matchLabelKeys: Forbidden: must not be specified when labelSelector "
                   "is not set"]  # fmt: skip
    got = reasons(anti("{labelSelector: {matchLabels: {version: v1}}, matchLabelKeys: [version, x],"
                       " mismatchLabelKeys: [x], topologyKey: zone}"))  # fmt: skip
    assert got == [
        f'{BASE}.matchLabelKeys[0]: Invalid value: "version": exists in both matchLabelKeys and '
        "labelSelector",
        f'{BASE}.matchLabelKeys[1]: Invalid value: "x": exists in both matchLabelKeys and '
        "mismatchLabelKeys",
    ]


def test_a_bad_topology_key_or_namespace_is_refused() -> None:
    got = reasons(anti("{labelSelector: {}, namespaces: [Bad_NS], topologyKey: 'no spaces'}"))
    assert [g.split(":")[0] for g in got] == [f"{BASE}.topologyKey", f"{BASE}.namespace"]


def test_a_mistyped_field_inside_a_term_is_an_unknown_field() -> None:
    got = reasons(anti("{labelSelector: {matchLabels: {app: web}}, topologyKy: zone}"))
    assert any(g.startswith(f"{BASE}.topologyKy") for g in got), got
