"""topologySpreadConstraints at admission (issue 22): the constraints the scheduling core reads,
with the API server's defaults, and its rules for bad ones, in its words."""

from __future__ import annotations

from contracts.workloads import LabelRequirement, SpreadConstraint
from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()
AT = "spec.topologySpreadConstraints"


def run(constraints: str) -> Workload:
    doc = ("{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {app: web, rev: r1}}, spec: "
           f"{{containers: [{{name: c, image: busybox}}], topologySpreadConstraints: {constraints}}}}}")  # fmt: skip
    return admit(load_documents(doc), hami_parser(REG), REG.resource_names())


def reasons(constraints: str) -> list[str]:
    return [r.line() for r in run(constraints).rejections]


def test_constraints_are_read_with_the_api_servers_defaults() -> None:
    w = run("[{maxSkew: 2, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, minDomains: 3,"
            " labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [rev]},"
            " {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway,"
            " nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor}]")  # fmt: skip
    assert not w.rejections, [r.line() for r in w.rejections]
    assert w.jobs[0].tasks[0].spread == (
        SpreadConstraint(max_skew=2, topology_key="zone", min_domains=3, selector=(
            LabelRequirement(key="app", operator="In", values=("web",)),
            LabelRequirement(key="rev", operator="In", values=("r1",)))),
        SpreadConstraint(max_skew=1, topology_key="kubernetes.io/hostname",
                         when_unsatisfiable="ScheduleAnyway", node_affinity_policy="Ignore",
                         node_taints_policy="Honor"),
    )  # fmt: skip


def test_bad_constraints_are_refused_in_the_api_servers_words() -> None:
    got = reasons("[{maxSkew: 0, topologyKey: '', whenUnsatisfiable: Sometimes},"
                  " {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2,"
                  " nodeTaintsPolicy: Always},"
                  " {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 0}]")  # fmt: skip
    assert got == [
        f"{AT}[0].maxSkew: Invalid value: 0: must be greater than zero",
        f"{AT}[0].topologyKey: Required value: can not be empty",
        f'{AT}[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: '
        '"DoNotSchedule", "ScheduleAnyway"',
        f"{AT}[1].minDomains: Invalid value: 2: can only use minDomains if "
        "whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
        f'{AT}[1].nodeTaintsPolicy: Unsupported value: "Always": supported values: "Honor", "Ignore"',
        f"{AT}[2].minDomains: Invalid value: 0: must be greater than zero",
        f'{AT}[2].{{topologyKey, whenUnsatisfiable}}: Duplicate value: "{{zone, ScheduleAnyway}}"',
    ]


def test_match_label_keys_need_a_selector() -> None:
    got = reasons("[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,"
                  " matchLabelKeys: [rev]}]")  # fmt: skip
    assert got == [f"{AT}[0].matchLabelKeys: Forbidden: must not be specified when labelSelector "
                   "is not set"]  # fmt: skip


def test_match_label_keys_follow_the_affinity_rule_on_the_merged_selector() -> None:
    # the API server merges a constraint's matchLabelKeys at creation (1.33+) and then judges
    # the merged selector as it judges affinity terms: a stored pod, merged already, is read as is
    w = run("[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector:"
            " {matchLabels: {app: web}, matchExpressions: [{key: rev, operator: In, values: [r1]}]},"
            " matchLabelKeys: [rev]}]")  # fmt: skip
    assert not w.rejections, [r.line() for r in w.rejections]
    assert w.jobs[0].tasks[0].spread[0].selector == (
        LabelRequirement(key="app", operator="In", values=("web",)),
        LabelRequirement(key="rev", operator="In", values=("r1",)),
    )
    got = reasons("[{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,"
                  " labelSelector: {matchLabels: {rev: r1}}, matchLabelKeys: [rev]}]")  # fmt: skip
    assert got == [f'{AT}[0].matchLabelKeys[0]: Invalid value: "rev": exists in both '
                   "matchLabelKeys and labelSelector"]  # fmt: skip
