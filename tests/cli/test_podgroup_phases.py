"""`tessera get pg` lists the PodGroups a cluster would hold, in the phase each shows (Pending,
Inqueue, Running, Unknown, Completed): it showed the log's job phase as a PodGroup's
status.phase (a plain pod's failed group "Failed", a restarting job's "Restarting") and listed
the groups of ended Volcano Jobs, which Volcano's job controller deletes when it kills the job."""

from __future__ import annotations

from services.cli.get import listing_of
from services.core.scheduling.config import DEFAULT_CONF
from tests.core.scheduling.scenarios import Scenario, engine_log

WORKLOAD = """
{apiVersion: v1, kind: Pod, metadata: {name: solo, namespace: default, annotations: {tessera.io/duration: '5', tessera.io/exit-code: '1'}}, spec: {schedulerName: volcano, restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]}}
---
{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {name: done, namespace: default, annotations: {tessera.io/duration: '5'}}, spec: {minAvailable: 1, schedulerName: volcano, tasks: [{name: w, replicas: 1, template: {spec: {restartPolicy: Never, containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]}}}]}}
---
{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {name: big, namespace: default}, spec: {minAvailable: 1, schedulerName: volcano, tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: '64'}}}]}}}]}}
"""


def test_get_pg_shows_the_phase_a_podgroup_shows_and_only_the_groups_that_stay() -> None:
    sc = Scenario("podgroups", "phases", DEFAULT_CONF, {"nodes": [{"name": "n1", "cpu": 8, "memory": "32Gi"}]},
                  WORKLOAD, {}, multi_step=True, until=60)  # fmt: skip
    listed, _ = listing_of(engine_log(sc), "podgroups", None)
    phases = {r["name"]: r["phase"] for r in listed.records}
    assert phases == {"solo": "Completed", "big": "Pending"}, phases  # done's group went with its end
    shown = {o["metadata"]["name"]: o["status"]["phase"] for o in listed.objects}
    assert sorted(shown.values()) == ["Completed", "Pending"], shown
    assert [r["phase"] for r in listed.rows] == [phases[r["name"]] for r in listed.records]
