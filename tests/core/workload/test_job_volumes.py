"""A Volcano Job's own `spec.volumes`: the claim mounted in every app container of every task
(so admission schedules for the claim as for a pod's own), and Volcano's webhook rules in its
words; a claim spec to create is the claim the job controller makes, under the name admission
schedules for."""

from __future__ import annotations

import re

import pytest

from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.core.workload.jobvolumes import CONFLICT, with_job_volumes

REG = build_vendors()


def job(volumes: str) -> Workload:
    text = f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: j}}
spec:
  minAvailable: 1
  volumes: {volumes}
  tasks:
  - name: a
    replicas: 1
    template: {{spec: {{containers: [{{name: c, image: x}}], initContainers: [{{name: i, image: x}}]}}}}
  - name: b
    replicas: 1
    template: {{spec: {{volumes: [{{name: own, persistentVolumeClaim: {{claimName: scratch}}}}],
                        containers: [{{name: c, image: x}}, {{name: d, image: x}}]}}}}
"""
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def test_the_jobs_claims_are_every_tasks_claims() -> None:
    w = job("[{mountPath: /data, volumeClaimName: dataset}, {mountPath: /ckpt, volumeClaimName: ckpt}]")
    assert not w.rejections
    assert [t.claims for t in w.jobs[0].tasks] == [("dataset", "ckpt"), ("scratch", "dataset", "ckpt")]


def test_every_app_container_mounts_them() -> None:
    template = {"spec": {"containers": [{"name": "c"}, {"name": "d", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}],
                         "initContainers": [{"name": "i"}]}}  # fmt: skip
    got = with_job_volumes(template, [{"mountPath": "/data", "volumeClaimName": "dataset"},
                                      {"mountPath": "/again", "volumeClaimName": "dataset"}])  # fmt: skip
    assert got["spec"]["volumes"] == [{"name": "job-volume-0", "persistentVolumeClaim": {"claimName": "dataset"}}]
    assert [c["volumeMounts"][-1] for c in got["spec"]["containers"]] == [{"name": "job-volume-0", "mountPath": "/data"}] * 2
    assert "volumeMounts" not in got["spec"]["initContainers"][0]
    assert "volumes" not in template["spec"]  # the Job's own template is untouched


@pytest.mark.parametrize(
    ("volumes", "line"),
    [
        ("[{volumeClaimName: dataset}]", "spec.volumes[0].mountPath: mountPath is required"),
        ("[{mountPath: /d, volumeClaimName: a}, {mountPath: /d, volumeClaimName: b}]",
         "spec.volumes[1].mountPath: duplicated mountPath: /d (value: /d)"),
        ("[{mountPath: /d}]", "spec.volumes[0]: either VolumeClaim or VolumeClaimName must be specified"),
        ("[{mountPath: /d, volumeClaimName: a, volumeClaim: {accessModes: [ReadWriteOnce]}}]", f"spec.volumes[0]: {CONFLICT}"),
        ("[{mountPath: /d, volumeClaim: [ReadWriteOnce]}]",
         "spec.volumes[0].volumeClaim: must be a PersistentVolumeClaim spec (value: ['ReadWriteOnce'])"),
    ],
)  # fmt: skip
def test_volcanos_webhook_rules(volumes: str, line: str) -> None:
    w = job(volumes)
    assert not w.jobs
    assert [r.line() for r in w.rejections] == [line]


def test_a_claim_to_make_is_scheduled_for_under_the_name_the_controller_gives_it() -> None:
    """Volcano names it `<job>-volume-<12 characters>`: here from the Job's uid and the
    volume's index, so admission and the job controller (which makes it) agree on it."""
    from services.core.workload.jobupdate import OBJECT_UID
    from services.core.workload.jobvolumes import claims_to_make, generated_claim

    made = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "uid": "u-1", "annotations": {OBJECT_UID: "u-1"}},
            "spec": {"minAvailable": 1, "volumes": [
                {"mountPath": "/data", "volumeClaimName": "dataset"},
                {"mountPath": "/ckpt", "volumeClaim": {"accessModes": ["ReadWriteOnce"],
                                                       "resources": {"requests": {"storage": "1Gi"}}}}],
                     "tasks": [{"name": "a", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]}}  # fmt: skip
    w = admit([made], hami_parser(REG), REG.resource_names())
    name = generated_claim("j", "u-1", 1)
    assert re.fullmatch(r"j-volume-[0-9a-f]{12}", name) and name != generated_claim("j", "u-2", 1)
    assert not w.rejections and [t.claims for t in w.jobs[0].tasks] == [("dataset", name)]
    assert claims_to_make(made) == [(name, made["spec"]["volumes"][1]["volumeClaim"])]
