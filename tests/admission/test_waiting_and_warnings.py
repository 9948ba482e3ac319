"""What `apply` says and what `get pods` / the simulate report then show (issue 13 items 2, 3):
a clamped value is accepted with a warning, and the pods of a refused PodGroup are listed,
unbound, with the reason they wait, instead of disappearing."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from contracts.api import ACCEPTED, REJECTED
from contracts.events import JobRejected, JobSubmitted
from services.admission.service import AdmissionService
from services.cli.main import main
from services.core.simulate.report import build_report
from services.runtime.eventlog import EventLog
from tests.allocator.scenario import decoded

CLAMPED = """
apiVersion: v1
kind: Pod
metadata: {name: soft, annotations: {huawei.com/vnpu-mode: hami-core}}
spec:
  schedulerName: volcano
  containers:
    - name: c
      image: busybox
      resources:
        limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "4096",
                 huawei.com/Ascend910B3-core: "150"}
"""
CLAMP_WARNING = ("spec.containers[0].resources.limits.huawei.com/Ascend910B3-core: is more than "
                 "a card's 100 % of cores: clamped to 100 (value: 150)")  # fmt: skip

CLOSED_QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: shut}
status: {state: Closed}
"""
PARENT_QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: parent}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: child}
spec: {parent: parent}
"""


def group(queue: str, name: str = "pg") -> str:
    members = "".join(f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}-{i}, annotations: {{scheduling.k8s.io/group-name: {name}}}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{limits: {{huawei.com/Ascend910B3: "1"}}}}}}]
""" for i in range(2))
    return f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 2, queue: {queue}}}
{members}"""


async def started(log: EventLog) -> AdmissionService:
    svc = AdmissionService(log)
    await svc.recover()
    return svc


async def report_of(log: EventLog) -> dict:
    return build_report([m async for m in log.replay()])


async def test_a_clamped_value_is_accepted_with_a_warning_in_reply_log_and_report(
    event_log: EventLog,
) -> None:
    svc = await started(event_log)
    [result] = (await svc.apply(CLAMPED)).results
    assert result.outcome == ACCEPTED and result.warnings == (CLAMP_WARNING,)
    [submitted] = [e for e in decoded([m async for m in event_log.replay()]) if isinstance(e, JobSubmitted)]
    assert submitted.warnings == (CLAMP_WARNING,) and submitted.spec.tasks[0].devices[0].cores == 100
    [job] = (await report_of(event_log))["jobs"]
    assert job["warnings"] == [CLAMP_WARNING]
    again = (await svc.apply(CLAMPED)).results[0]  # unchanged, and still said
    assert again.warnings == (CLAMP_WARNING,)


async def test_pods_of_a_podgroup_on_a_closed_queue_are_listed_waiting(
    event_log: EventLog,
) -> None:
    """A PodGroup on a parent queue is not refused (Volcano's PodGroup webhook asks only that
    its queue exists and is Open): tests/admission/test_volcano_job_webhook.py."""
    svc = await started(event_log)
    await svc.apply(CLOSED_QUEUE + "---" + PARENT_QUEUE)
    for queue, why in (("shut", "can only submit PodGroup to queue with state `Open`, queue `shut` "
                                "status is `Closed`"),):  # fmt: skip
        name = f"pg-{queue}"
        [result] = (await svc.apply(group(queue, name))).results
        assert result.kind == "PodGroup" and result.outcome == REJECTED
        assert result.warnings == (f"pods {name}-0, {name}-1 wait (unbound) for this PodGroup",)
        pods = {p["name"]: p for p in (await report_of(event_log))["pods"]}
        for i in range(2):
            p = pods[f"{name}-{i}"]
            assert p["phase"] == "Pending" and p["node"] is None and p["devices"] == []
            assert p["reason"].startswith(f"waiting for PodGroup {name}, which was refused: PodGroup: "
                                          f"spec.queue: {why}"), p  # fmt: skip
    before = len([m async for m in event_log.replay()])
    await svc.apply(group("shut", "pg-shut"))  # the same refusal again: recorded once
    assert len([m async for m in event_log.replay()]) == before
    # opened (here: a fixed manifest on an open queue), the group is admitted on the same subject
    [fixed] = (await svc.apply(group("default", "pg-shut"))).results
    assert fixed.outcome == ACCEPTED, fixed
    pods = {p["name"]: p for p in (await report_of(event_log))["pods"] if p["job"] == "pg-shut"}
    assert set(pods) == {"pg-shut-0", "pg-shut-1"} and all(p["reason"] == "" for p in pods.values())
    assert sum(isinstance(e, JobRejected) for e in decoded([m async for m in event_log.replay()])) == 1


def test_simulate_report_lists_the_waiting_pods(tmp_path: Path) -> None:
    inventory = {"nodes": [{"name": "n1", "cpu": 64, "memory": "256Gi",
                            "devices": [{"type": "Ascend910B3", "count": 8}]}]}  # fmt: skip
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "w.yaml").write_text(CLOSED_QUEUE + "---" + group("shut") + "\n---" + CLAMPED)
    assert main(["simulate", "--inventory", str(tmp_path / "inv.yaml"), "--workload",
                 str(tmp_path / "w.yaml"), "--report", str(tmp_path / "r.json")]) == 0  # fmt: skip
    report = json.loads((tmp_path / "r.json").read_text())
    pods = {p["name"]: p for p in report["pods"]}
    assert pods["pg-0"]["phase"] == pods["pg-1"]["phase"] == "Pending"
    assert "waiting for PodGroup pg, which was refused" in pods["pg-0"]["reason"]
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["pg"]["phase"] == "Rejected" and jobs["soft"]["warnings"] == [CLAMP_WARNING]


def test_fields_tessera_does_not_act_on_are_accepted_with_a_warning_naming_them() -> None:
    """A task's `topologyPolicy` (Volcano's numaaware), `partitionPolicy` and a PodGroup's
    `subGroupPolicy` were accepted in silence: the job ran without what they ask. Each set one
    is named now; `none` and absent ones are not."""
    from services.admission.plan import Known, plan_apply

    job = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: numa, namespace: default}
spec:
  minAvailable: 2
  tasks:
    - {name: a, replicas: 1, topologyPolicy: single-numa-node, template: {spec: {containers: [{name: c, image: busybox}]}}}
    - {name: b, replicas: 1, topologyPolicy: none, partitionPolicy: {totalPartitions: 1, partitionSize: 1},
       template: {spec: {containers: [{name: c, image: busybox}]}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: sub, namespace: default}
spec: {minMember: 1, subGroupPolicy: [{name: g, subGroupSize: 1}]}
"""
    plan = plan_apply(job, Known(), None, frozenset())
    assert [r.outcome for r in plan.results] == [ACCEPTED, ACCEPTED]
    assert plan.results[0].warnings == (
        "spec.tasks[0].topologyPolicy: Tessera does not align a pod's CPUs and devices to one NUMA node (Volcano's "
        "numaaware plugin): its pods are placed without it (value: single-numa-node)",
        "spec.tasks[1].partitionPolicy: Tessera does not place a task's pods in partitions: they are placed as one gang")
    assert plan.results[1].warnings == (
        "spec.subGroupPolicy: Tessera does not place a PodGroup's pods in sub-groups: they are placed as one gang",)


def test_with_the_ssh_plugin_off_a_job_needing_it_is_refused_saying_why() -> None:
    """The chart's `jobPlugins.ssh: false` leaves the queue service no right to Secrets: a Job
    naming ssh — or mpi, which runs with it — would have pods waiting for a Secret never made,
    so admission refuses it and names the setting; other plugins go on."""
    from dataclasses import replace

    from services.admission.plan import Known, plan_apply
    from services.core.workload.limits import DEFAULT_WORKLOAD_LIMITS

    def job(plugins: str) -> str:
        return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: mpi, namespace: default}}
spec:
  minAvailable: 1
  plugins: {plugins}
  tasks: [{{name: master, replicas: 1, template: {{spec: {{containers: [{{name: c, image: busybox}}]}}}}}}]
"""

    off = replace(DEFAULT_WORKLOAD_LIMITS, plugins_off=frozenset({"ssh"}))
    results = {p: plan_apply(job(p), Known(), None, frozenset(), workload_limits=off).results[0]
               for p in ("{ssh: []}", "{mpi: []}", "{svc: [], env: []}")}  # fmt: skip
    assert results["{ssh: []}"].reasons == ("spec.plugins.ssh: the ssh plugin is off in this cluster: Tessera's queue "
                                            "service may not make its Secret (the chart's jobPlugins.ssh: false) (value: ssh)",)
    assert results["{mpi: []}"].reasons == ("spec.plugins.mpi: the ssh plugin is off in this cluster (it runs with ssh): "
                                            "Tessera's queue service may not make its Secret (the chart's jobPlugins.ssh: "
                                            "false) (value: mpi)",)  # fmt: skip
    assert results["{svc: [], env: []}"].outcome == ACCEPTED
    assert plan_apply(job("{ssh: []}"), Known(), None, frozenset()).results[0].outcome == ACCEPTED  # on by default
