"""A wrong or old apiVersion names the version to write (rev-newcomer finding 6): it was
"apiVersion/kind: unsupported kind", though the kind was right and only the version wrong —
kubectl's `no matches for kind "Job" in version "batch.volcano.sh/v1"`, and what Tessera reads."""

from __future__ import annotations

import pytest

from contracts.api import REJECTED
from services.admission.plan import Known, plan_apply


@pytest.mark.parametrize(("api", "kind", "reason"), [
    ("batch.volcano.sh/v1", "Job", 'apiVersion: no matches for kind "Job" in version "batch.volcano.sh/v1": '
     "Volcano's CRDs serve Job only as batch.volcano.sh/v1alpha1, the version Tessera reads"),
    ("scheduling.volcano.sh/v1alpha2", "Queue", 'apiVersion: no matches for kind "Queue" in version '
     '"scheduling.volcano.sh/v1alpha2": Volcano\'s CRDs serve Queue only as scheduling.volcano.sh/v1beta1, '
     "the version Tessera reads"),
    ("scheduling.incubator.k8s.io/v1alpha1", "PodGroup", 'apiVersion: no matches for kind "PodGroup" in '
     'version "scheduling.incubator.k8s.io/v1alpha1": that is kube-batch\'s API, which Volcano replaced: '
     "PodGroup is scheduling.volcano.sh/v1beta1"),
    ("batch/v1", "Job", 'apiVersion: no matches for kind "Job" in version "batch/v1": batch/v1 is Kubernetes\' '
     "own Job, which Tessera does not run; Volcano's Job is batch.volcano.sh/v1alpha1"),
    ("", "Job", 'apiVersion: no matches for kind "Job" in version "": apiVersion is not set; Job is '
     "batch.volcano.sh/v1alpha1"),
    ("v1", "pod", 'kind: no matches for kind "pod" in version "v1"; did you mean Pod?'),
    ("scheduling.volcano.sh/v1beta1", "Quue",
     'kind: no matches for kind "Quue" in version "scheduling.volcano.sh/v1beta1"; did you mean Queue?'),
    ("apps/v1", "Deployment", 'kind: no matches for kind "Deployment" in version "apps/v1"; Tessera reads '
     "HyperNode, Job, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, PodGroup, PriorityClass, Queue, "
     "ResourceQuota, StorageClass"),
])  # fmt: skip
def test_an_apiversion_tessera_does_not_read_names_the_one_it_does(api: str, kind: str, reason: str) -> None:
    plan = plan_apply(f"apiVersion: '{api}'\nkind: {kind}\nmetadata: {{name: x}}\n", Known(), None, frozenset())
    assert [(r.outcome, r.reasons) for r in plan.results] == [(REJECTED, (reason,))]
