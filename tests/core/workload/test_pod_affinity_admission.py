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


def job(term: str, labels: str = "{app: train}") -> str:
    return ("{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {name: jb, namespace: team},"
            " spec: {queue: default, tasks: [{name: w, replicas: 2, template: {metadata: {labels: "
            f"{labels}}}, spec: {{containers: [{{name: c, image: busybox}}], affinity: {anti(term)}}}}}}}]}}}}")  # fmt: skip


def test_a_jobs_match_label_keys_merge_the_labels_its_controller_adds() -> None:
    w = run(job("{labelSelector: {matchLabels: {app: train}}, matchLabelKeys: [volcano.sh/job-name,"
                " volcano.sh/task-spec], mismatchLabelKeys: [volcano.sh/queue-name], topologyKey: zone}"))  # fmt: skip
    assert not w.rejections, [r.line() for r in w.rejections]
    pa = w.jobs[0].tasks[0].pod_affinity
    assert pa is not None and pa.anti_affinity[0].selector == (
        LabelRequirement(key="app", operator="In", values=("train",)),
        LabelRequirement(key="volcano.sh/job-name", operator="In", values=("jb",)),
        LabelRequirement(key="volcano.sh/task-spec", operator="In", values=("w",)),
        LabelRequirement(key="volcano.sh/queue-name", operator="NotIn", values=("default",)),
    )


def test_a_jobs_template_may_not_name_the_per_pod_task_index() -> None:
    # the API server merges each pod's own index; one selector for the task's pods cannot
    w = run(job("{labelSelector: {matchLabels: {app: train}}, matchLabelKeys: [volcano.sh/task-index],"
                " topologyKey: zone}"))  # fmt: skip
    got = [r.line() for r in w.rejections]
    where = "spec.tasks[0].template." + BASE
    assert got == [f'{where}.matchLabelKeys[0]: Invalid value: "volcano.sh/task-index": differs from '
                   "pod to pod of the task (the job controller numbers them); Tessera reads one "
                   "selector for all of a task's pods, so it cannot merge this key: select by a "
                   "label of the template instead"]  # fmt: skip
    # a plain pod's own task-index label is one value: merged as any other
    t = task(anti("{labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [version],"
                  " topologyKey: zone}"))  # fmt: skip
    assert t.pod_affinity is not None and len(t.pod_affinity.anti_affinity[0].selector) == 2


def test_a_jobs_key_in_both_the_selector_and_match_label_keys_is_refused() -> None:
    # the pods the controller makes carry job-name: the API server would refuse every one of them
    got = [r.line() for r in run(job("{labelSelector: {matchLabels: {volcano.sh/job-name: jb}},"
                                     " matchLabelKeys: [volcano.sh/job-name], topologyKey: zone}")).rejections]  # fmt: skip
    assert got == [f'spec.tasks[0].template.{BASE}.matchLabelKeys[0]: Invalid value: '
                   '"volcano.sh/job-name": exists in both matchLabelKeys and labelSelector']  # fmt: skip


def test_a_pod_the_api_server_stored_with_its_keys_merged_is_read_as_stored() -> None:
    # a Deployment's pod as the API server holds it: pod-template-hash already in matchExpressions
    stored = anti("{labelSelector: {matchLabels: {app: web}, matchExpressions: [{key: version,"
                  " operator: In, values: [v1]}]}, matchLabelKeys: [version], topologyKey: zone}")  # fmt: skip
    t = task(stored)
    assert t.pod_affinity is not None
    assert t.pod_affinity.anti_affinity[0].selector == (  # not merged a second time
        LabelRequirement(key="app", operator="In", values=("web",)),
        LabelRequirement(key="version", operator="In", values=("v1",)),
    )


def test_a_key_in_the_selector_is_refused_only_when_the_merge_repeats_it() -> None:
    # validateMatchLabelKeysAndMismatchLabelKeys judges the merged selector: a key in matchLabels
    # the pod does not carry is not merged, so not repeated; mismatchLabelKeys are not held to it
    task(anti("{labelSelector: {matchLabels: {absent: x}}, matchLabelKeys: [absent], topologyKey: zone}"))
    t = task(anti("{labelSelector: {matchExpressions: [{key: version, operator: Exists}]},"
                  " mismatchLabelKeys: [version], topologyKey: zone}"))  # fmt: skip
    assert t.pod_affinity is not None and t.pod_affinity.anti_affinity[0].selector[-1] == (
        LabelRequirement(key="version", operator="NotIn", values=("v1",)))
    # a user's own expression on the key, beside the merged one: twice in matchExpressions
    got = reasons(anti("{labelSelector: {matchExpressions: [{key: version, operator: NotIn,"
                       " values: [v0]}]}, matchLabelKeys: [version], topologyKey: zone}"))  # fmt: skip
    assert got == [f'{BASE}.matchLabelKeys[0]: Invalid value: "version": exists in both '
                   "matchLabelKeys and labelSelector"]  # fmt: skip
