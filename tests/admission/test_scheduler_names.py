"""`tessera apply` of a pod that would not be Tessera's on a cluster — it names no scheduler
(the API server stores `default-scheduler`), HAMi's, or one nobody runs (`kube-batch`) — is
placed, as the local control plane has no other scheduler, and says so: a warning naming the
field, the value and the names Tessera serves. Before, all were placed without a word."""

from __future__ import annotations

from contracts.api import ACCEPTED
from services.admission.plan import Known, plan_apply
from services.admission.service import AdmissionService
from services.core.workload.limits import WorkloadLimits
from services.runtime.eventlog import EventLog

SERVED = WorkloadLimits(scheduler_names=("volcano", "tessera"))


def pod(name: str, scheduler: str | None) -> str:
    named = f"  schedulerName: {scheduler}\n" if scheduler else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
{named}  containers: [{{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}]
"""


def job(name: str, scheduler: str | None, template_scheduler: str | None = None) -> str:
    named = f"  schedulerName: {scheduler}\n" if scheduler else ""
    own = f"          schedulerName: {template_scheduler}\n" if template_scheduler else ""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
{named}  minAvailable: 1
  tasks:
    - name: w
      replicas: 1
      template:
        spec:
{own}          containers: [{{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}]
"""


def warnings_of(text: str, limits: WorkloadLimits = SERVED) -> dict[str, tuple[str, ...]]:
    plan = plan_apply(text, Known(), None, frozenset(), workload_limits=limits)
    assert not plan.error and {r.outcome for r in plan.results} == {ACCEPTED}, plan
    assert len(plan.writes) == len(plan.results)  # every one is written: placed, as Tessera's
    return {r.name: r.warnings for r in plan.results}


def test_a_pod_not_named_for_tessera_is_accepted_with_a_warning_naming_field_value_and_names() -> None:
    got = warnings_of("---".join([pod("plain", None), pod("ds", "default-scheduler"),
                                  pod("hami", "hami-scheduler"), pod("ours", "volcano"),
                                  pod("also-ours", "tessera")]))  # fmt: skip
    (plain,), (ds,), (hami,) = got["plain"], got["ds"], got["hami"]
    for line, value in ((plain, "default-scheduler"), (ds, "default-scheduler"), (hami, "hami-scheduler")):
        assert line.startswith("spec.schedulerName: ") and line.endswith(f"(value: {value})")
        assert "not one of Tessera's names (volcano or tessera)" in line and "places it anyway" in line
    assert "unset, so default-scheduler is stored" in plain and "unset" not in ds
    assert "this pod is kube-scheduler's" in ds and "this pod is HAMi's scheduler's, not Tessera's" in hami
    assert got["ours"] == () and got["also-ours"] == ()


def test_a_jobs_pods_carry_the_templates_name_else_the_jobs() -> None:
    got = warnings_of("---".join([job("old", "kube-batch"), job("plain", None), job("mixed", "volcano", "default-scheduler")]))
    (old,) = got["old"]
    assert old.startswith("spec.schedulerName: ") and old.endswith("(value: kube-batch)")
    assert "on a cluster the Job's pods wait for a scheduler named kube-batch" in old
    assert got["plain"] == ()  # Volcano's webhook stores `volcano`: Tessera's
    (mixed,) = got["mixed"]
    assert mixed.startswith("spec.tasks[0].template.spec.schedulerName: ") and "task 0's pods" in mixed


def test_names_given_to_tessera_are_the_ones_checked() -> None:
    assert warnings_of(pod("mine", "my-sched"), WorkloadLimits(scheduler_names=("my-sched",)))["mine"] == ()
    (line,) = warnings_of(pod("v", "volcano"), WorkloadLimits(scheduler_names=("my-sched",)))["v"]
    assert "not one of Tessera's names (my-sched)" in line and "schedulerName: my-sched for a cluster" in line
    assert warnings_of(pod("any", "kube-batch"), WorkloadLimits())["any"] == ()  # simulate: no check


def test_a_podgroups_pods_of_another_scheduler_are_said_once() -> None:
    members = "".join(f"""---
apiVersion: v1
kind: Pod
metadata: {{name: m{i}, annotations: {{scheduling.k8s.io/group-name: g}}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{limits: {{cpu: "1"}}}}}}]
""" for i in range(3))
    group = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 3}\n"
    (line,) = warnings_of(group + members)["g"]
    assert line.startswith("pod m0 and 2 more: spec.schedulerName: unset, so default-scheduler is stored")
    assert "these pods are kube-scheduler's" in line and "places them anyway" in line


async def test_the_admission_service_serves_volcano_and_tessera_unless_told(event_log: EventLog) -> None:
    svc = AdmissionService(event_log)
    await svc.recover()
    [result] = (await svc.apply(pod("web", None))).results
    assert result.outcome == ACCEPTED and "volcano or tessera" in result.warnings[0]
    told = AdmissionService(event_log, scheduler_names=("web-sched",))
    await told.recover()
    [other] = (await told.apply(pod("web2", "web-sched"))).results
    assert other.outcome == ACCEPTED and other.warnings == ()
