"""Volcano's own example manifests, as it ships them, through `tessera apply` / `simulate`'s
admission and simulator (rev-examples findings F2-F5; the files are in
tests/fixtures/volcano-examples, copied from volcano-sh/volcano `example/` and `docs/user-guide`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.simulate.engine import Simulation, load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.simulate.report import build_report
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser
from tests.core.scheduling.scenarios import vendors

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "volcano-examples"
#: three nodes of 8 CPUs with nothing but what the inventory says (no labels written)
NODES = {"nodes": [{"name": "node", "count": 3, "cpu": 8, "memory": "32Gi"}]}


def _admit(*texts: str) -> Workload:
    reg = vendors()
    return admit(load_documents("\n---\n".join(texts)), hami_parser(reg), reg.resource_names())


def _simulate(text: str, inventory: dict[str, Any] = NODES) -> Simulation:
    reg = vendors()
    sim = load_simulation(parse_conf(DEFAULT_CONF), reg, load_inventory(inventory, reg.catalogue), _admit(text))
    sim.run()
    return sim


def _started(sim: Simulation) -> list[str]:
    """The pods in the order the log says they started."""
    from contracts.events import TaskStarted

    reg = sim.registry
    return [e.task for m in sim.log.messages()
            if m.headers.get("Tessera-Type") == "TaskStarted"
            and isinstance(e := reg.decode("TaskStarted", m.data), TaskStarted)]  # fmt: skip


def test_pods_naming_a_podgroup_given_nowhere_are_told_what_volcano_does_and_what_to_write() -> None:
    """F2: Volcano's guide "multiple single pods with podgroup" shows its podgroup controller
    making `busybox-pg` from the pods' group-min-resources; that is volcano-sh/volcano#2358,
    closed unmerged — Volcano's controller skips a pod naming a group and its scheduler ignores
    pods of a missing one. The refusal said only the scheduler's half, not what to write."""
    work = _admit((EXAMPLES / "podgroup-single-pods.yaml").read_text())
    assert [r.name for r in work.rejections] == ["busybox1", "busybox2", "busybox3"]
    for r in work.rejections:
        assert r.path == "metadata.annotations[scheduling.k8s.io/group-name]" and r.value == "busybox-pg"
        assert "volcano-sh/volcano#2358, never merged" in r.rule, r.rule
        assert "declare the PodGroup" in r.rule and "minMember: 1" in r.rule, r.rule
    assert not work.jobs
    # declared with them, as the refusal says, the three pods run as one group
    group = """apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: busybox-pg}
spec: {minMember: 1, minResources: {cpu: 200m, memory: 256Mi}}
"""
    work = _admit(group, (EXAMPLES / "podgroup-single-pods.yaml").read_text())
    assert not work.rejections and [len(j.tasks) for j in work.jobs] == [3]


def test_a_jobflow_and_its_templates_are_refused_saying_flows_run_on_a_cluster() -> None:
    """F3: `did you mean Job?` told a user trying Volcano's example/jobflow locally that flows
    were not supported, while the queue service runs them on a cluster."""
    work = _admit((EXAMPLES / "jobflow-JobTemplate.yaml").read_text(), (EXAMPLES / "jobflow-JobFlow.yaml").read_text())
    kinds = sorted({r.kind for r in work.rejections})
    assert kinds == ["JobFlow", "JobTemplate"]
    for r in work.rejections:
        assert r.path == "kind"
        assert "run only on a cluster" in r.rule and "did you mean" not in r.rule, r.rule


def test_simulated_nodes_carry_the_kubelets_os_and_arch_labels() -> None:
    """F4: every kubelet labels its Node `kubernetes.io/os` and `kubernetes.io/arch`; simulated
    nodes had only the hostname, so Volcano's task-start-dependency example (each task selects
    `kubernetes.io/os: linux`) stayed Pending for good. An inventory's label still wins."""
    reg = vendors()
    node, arm = load_inventory({"nodes": [{"name": "n", "cpu": 1, "memory": "1Gi"},
                                          {"name": "a", "cpu": 1, "memory": "1Gi",
                                           "labels": {"kubernetes.io/arch": "arm64"}}]}, reg.catalogue)  # fmt: skip
    assert node.labels == {"kubernetes.io/hostname": "n", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    assert arm.labels["kubernetes.io/arch"] == "arm64" and arm.labels["kubernetes.io/os"] == "linux"
    sim = _simulate((EXAMPLES / "task-start-dependency-job.yaml").read_text())
    pods = build_report(sim.log.messages())["pods"]
    assert len(pods) == 11 and {p["phase"] for p in pods} == {"Running"}, pods


def test_simulate_starts_a_task_only_once_the_task_it_depends_on_is_ready() -> None:
    """F5: simulate started every committed pod at once, in placement order: nginx3-0 (which
    depends on nginx2) started with one of nginx2's five pods running. Volcano's job controller
    makes a dependent task's pods only once the named task's minAvailable pods are ready."""
    sim = _simulate((EXAMPLES / "task-start-dependency-job.yaml").read_text())
    order = _started(sim)
    assert len(order) == 11
    task = [p.rsplit("-", 1)[0].removeprefix("job-") for p in order]
    first2, last2 = task.index("job-nginx2"), len(task) - 1 - task[::-1].index("job-nginx2")
    assert task.index("job-nginx1") < first2, order
    assert last2 < task.index("job-nginx3"), order


def test_simulate_holds_a_dependent_task_while_the_task_it_depends_on_cannot_run() -> None:
    """A task whose dependency never becomes ready keeps its pods committed and not started,
    as on a cluster (its pods are never made), and a task that does not depend on it runs."""
    text = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: dep}
spec:
  schedulerName: volcano
  minAvailable: 1
  tasks:
  - name: after
    replicas: 2
    dependsOn: {name: [big]}
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
  - name: free
    replicas: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
  - name: big
    replicas: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "64"}}}]}}
"""
    sim = _simulate(text)
    assert _started(sim) == ["dep-free-0"]
    assert sim.held == {"default/dep": {"dep-after-0", "dep-after-1"}}


def test_a_live_job_judged_again_keeps_its_dependson_and_an_edit_of_it_is_refused() -> None:
    """Specs carry a task's `dependsOn` since simulate acts on it: a Job admitted before (its
    spec without it) judged again after an upgrade is the same object, not a forbidden edit;
    changing the tasks a live Job's task depends on is one (Volcano's update webhook)."""
    import msgspec

    from services.core.workload.jobupdate import JOB_RULE, judge_update

    work = _admit((EXAMPLES / "task-start-dependency-job.yaml").read_text())
    (new,) = work.jobs
    assert [(t.name, t.depends_on) for t in new.tasks] == [
        ("job-nginx1", ()), ("job-nginx2", ("job-nginx1",)), ("job-nginx3", ("job-nginx2",))]
    before = msgspec.structs.replace(new, tasks=tuple(msgspec.structs.replace(t, depends_on=()) for t in new.tasks))
    change = judge_update(before, new)
    assert not change.refusals, change
    edited = msgspec.structs.replace(new, tasks=(*new.tasks[:2], msgspec.structs.replace(new.tasks[2], depends_on=("job-nginx1",))))
    refused = judge_update(new, edited).refusals
    assert refused == (f"spec.tasks[2].dependsOn: {JOB_RULE}",), refused
