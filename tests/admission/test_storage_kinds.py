"""`tessera apply` of a PersistentVolumeClaim, PersistentVolume or StorageClass (issue 22): the
kinds are known (simulate takes them), but the admission service appends none of them — so each
is refused, naming why, rather than answered as accepted and then forgotten."""

from __future__ import annotations

from contracts.api import REJECTED
from services.admission.plan import Known, plan_apply

MANIFEST = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {storageClassName: topo}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: topo}
provisioner: example.com/topo
volumeBindingMode: WaitForFirstConsumer
"""


def test_storage_objects_are_refused_by_apply_with_the_reason() -> None:
    plan = plan_apply(MANIFEST, Known(), None, frozenset())
    got = {(r.kind, r.namespace, r.name): r for r in plan.results}
    assert set(got) == {("PersistentVolumeClaim", "default", "data"), ("StorageClass", "", "topo")}
    for r in got.values():
        assert r.outcome == REJECTED
        assert r.reasons[0].startswith(f"kind: a {r.kind} is the cluster's"), r.reasons
    assert not plan.writes
