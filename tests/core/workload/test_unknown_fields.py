"""An unknown field is refused naming its path (Kubernetes' strict field validation); the
rule says what to write instead where that can be told — the field of that object it most
looks like, or what to do with a line a known source pastes (the article's Queue
`policy: besteffort`): the newcomer read "spec.policy: unknown field" and had no fix."""

from __future__ import annotations

from services.core.workload import admit, load_documents

MANIFEST = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: train-queue}
spec: {weight: 1, policy: besteffort, capabilty: {cpu: "8"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: c, image: x, resoures: {limits: {cpu: "1"}}}
  nodeSelecter: {zone: a}
  tolerations: [{key: a, operater: Exists}]
  flavour: x
"""


def test_unknown_fields_say_what_was_meant() -> None:
    admitted = admit(load_documents(MANIFEST), None, frozenset())
    rules = {f"{r.kind} {r.path}": r.rule for r in admitted.rejections}
    assert rules == {
        "Queue spec.policy": "unknown field: Volcano's Queue has no spec.policy (the `policy: besteffort` of a widely "
                             "copied article; an API server prunes it, or with kubectl's strict validation refuses "
                             "it): remove the line",
        "Queue spec.capabilty": "unknown field; did you mean capability?",
        "Pod spec.containers[0].resoures": "unknown field; did you mean resources?",
        "Pod spec.nodeSelecter": "unknown field; did you mean nodeSelector?",
        "Pod spec.tolerations[0].operater": "unknown field; did you mean operator?",
        "Pod spec.flavour": "unknown field",  # nothing near it: no guess
    }  # fmt: skip


def test_a_misspelt_queue_is_refused_naming_the_queue_meant() -> None:
    manifest = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: train-queue}
spec: {weight: 1}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  queue: trian-queue
  minAvailable: 1
  tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: k}
spec:
  queue: elsewhere
  minAvailable: 1
  tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: busybox}]}}}]
"""
    admitted = admit(load_documents(manifest), None, frozenset())
    assert sorted(r.message() for r in admitted.rejections) == [
        'Job: spec.queue: queue does not exist (unable to find job queue: queues.scheduling.volcano.sh '
        '"elsewhere" not found) (value: elsewhere)',
        'Job: spec.queue: queue does not exist (unable to find job queue: queues.scheduling.volcano.sh '
        '"trian-queue" not found); did you mean train-queue? (value: trian-queue)']
