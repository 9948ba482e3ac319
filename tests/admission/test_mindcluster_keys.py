"""MindCluster's placement keys (ascend-for-volcano's `sp-block` and `huawei.com/schedule_policy`
annotations, the `fault-scheduling` and `ring-controller.atlas` labels) were accepted in
silence, and a MindCluster user's super-pod job was scattered over two super-pods (a 910C
operator's review). Tessera reads none of them: `apply` accepts the object and warns, naming
the key where it was found and what to use instead (HyperNodes + spec.networkTopology)."""

from __future__ import annotations

from contracts.api import ACCEPTED
from services.admission.plan import Known, plan_apply
from services.core.devices import build_vendors
from services.core.workload.admission import MINDCLUSTER_KEYS
from services.core.workload.devicerequests import hami_parser

VENDORS = build_vendors()

#: the review's spblock.yaml: a Job of 2 × 16 dies for one super-pod, as MindCluster writes it
JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: spb
  labels: {ring-controller.atlas: ascend-910b, fault-scheduling: force}
  annotations: {sp-block: "32"}
spec:
  schedulerName: volcano
  minAvailable: 2
  tasks:
    - name: w
      replicas: 2
      template:
        metadata:
          labels: {ring-controller.atlas: ascend-910b}
          annotations: {sp-block: "32"}
        spec:
          restartPolicy: Never
          containers: [{name: c, image: x, resources: {limits: {huawei.com/Ascend910C: "16"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: single, annotations: {huawei.com/schedule_policy: chip4-node8}}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {limits: {huawei.com/Ascend910B3: "4"}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg, annotations: {sp-block: "16"}}
spec: {minMember: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {limits: {huawei.com/Ascend910B3: "1"}}}]
"""


def _words(where: str, key: str) -> str:
    return MINDCLUSTER_KEYS[(where, key)]


def test_mindcluster_keys_are_accepted_with_a_warning_naming_each_and_what_to_use() -> None:
    plan = plan_apply(JOB, Known(), None, frozenset())
    assert [r.outcome for r in plan.results] == [ACCEPTED] * 4
    job, single, pg, plain = (r.warnings for r in plan.results)
    assert job == (
        f"metadata.annotations[sp-block]: {_words('annotations', 'sp-block')} (value: 32)",
        f"metadata.labels[fault-scheduling]: {_words('labels', 'fault-scheduling')} (value: force)",
        f"metadata.labels[ring-controller.atlas]: {_words('labels', 'ring-controller.atlas')} (value: ascend-910b)",
        f"spec.tasks[0].template.metadata.annotations[sp-block]: {_words('annotations', 'sp-block')} (value: 32)",
        f"spec.tasks[0].template.metadata.labels[ring-controller.atlas]: "
        f"{_words('labels', 'ring-controller.atlas')} (value: ascend-910b)",
    )
    assert single == (f"metadata.annotations[huawei.com/schedule_policy]: "
                      f"{_words('annotations', 'huawei.com/schedule_policy')} (value: chip4-node8)",)  # fmt: skip
    assert pg == (f"metadata.annotations[sp-block]: {_words('annotations', 'sp-block')} (value: 16)",)
    assert plain == ()


def test_the_words_say_what_tessera_uses_instead() -> None:
    sp = _words("annotations", "sp-block")
    assert "Tessera does not read it" in sp
    assert "HyperNode" in sp and "spec.networkTopology" in sp and "highestTierAllowed" in sp
    assert "HyperNode" in _words("annotations", "huawei.com/schedule_policy")
    assert "spec.policies" in _words("labels", "fault-scheduling")
    assert "ringsconfigmap" in _words("labels", "ring-controller.atlas")


#: Volcano's docs/user-guide/how_to_use_vnpu.md, MindCluster Mode, as written (the container cut
#: to what Tessera reads)
MINDCLUSTER_VNPU_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: mindx-dls
  namespace: vnpu
  labels: {ring-controller.atlas: ascend-310P}
spec:
  minAvailable: 1
  schedulerName: volcano
  queue: default
  tasks:
    - name: default-test
      replicas: 1
      template:
        metadata:
          labels: {app: infers, ring-controller.atlas: ascend-310P, vnpu-dvpp: "null", vnpu-level: low}
        spec:
          schedulerName: volcano
          containers:
            - name: resnet50infer
              image: x
              resources:
                requests: {huawei.com/npu-core: 8}
                limits: {huawei.com/npu-core: 8}
"""


def test_mindcluster_vnpu_is_refused_naming_the_mode_and_what_to_write() -> None:
    """rev-examples F6: `huawei.com/npu-core` was refused as a bare "unknown device resource", as
    if it were a typo; it is Volcano's MindCluster vNPU mode, which Tessera does not run. The
    refusal says so and gives HAMi's 310P names with the templates' memory and AI cores."""
    plan = plan_apply(MINDCLUSTER_VNPU_JOB, Known(), hami_parser(VENDORS), VENDORS.resource_names())
    (result,) = plan.results
    (reason,) = [r for r in result.reasons if "npu-core" in r]
    assert reason.startswith("spec.tasks[0].template.spec.containers[0].resources.limits.huawei.com/npu-core: ")
    assert "unknown device resource" not in reason
    assert "MindCluster vNPU mode" in reason and "deviceshare.AscendMindClusterVNPUEnable" in reason
    assert "huawei.com/Ascend310P: 1 with huawei.com/Ascend310P-memory" in reason
    assert "vir04 12288 MB = 4 AI cores" in reason and "whole chip (8 AI cores)" in reason


def test_mindclusters_vnpu_labels_are_warned_about_where_a_pod_carries_them() -> None:
    doc = """
apiVersion: v1
kind: Pod
metadata: {name: p, labels: {vnpu-level: high, vnpu-dvpp: "yes"}}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {limits: {huawei.com/Ascend310P: "1", huawei.com/Ascend310P-memory: "3072"}}}]
"""
    plan = plan_apply(doc, Known(), hami_parser(VENDORS), VENDORS.resource_names())
    (result,) = plan.results
    assert result.outcome == ACCEPTED
    assert f"metadata.labels[vnpu-level]: {_words('labels', 'vnpu-level')} (value: high)" in result.warnings
    assert f"metadata.labels[vnpu-dvpp]: {_words('labels', 'vnpu-dvpp')} (value: yes)" in result.warnings
