"""What the job controller writes, as pure functions: the PodGroup and pods of a Job (names,
Volcano's labels and annotations, owner references, minResources as quantities) and status
compared without timestamps, so an unchanged status is never written again."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from contracts.workloads import JobSpec, TaskSpec
from services.core.scheduling import snapshot as st
from services.kube import pods, volcano

JOB = {"apiVersion": volcano.BATCH, "kind": "Job",
       "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "labels": {"team": "a"}},
       "spec": {"tasks": [{"name": "worker", "replicas": 2, "template": {
           "metadata": {"labels": {"app": "t"}},
           "spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}}}]}}  # fmt: skip
SPEC = JobSpec(namespace="ml", name="train", queue="q", kind="Job", min_available=2,
               tasks=(TaskSpec(name="worker", replicas=2, min_available=2),),
               min_resources={"cpu": 2500, "memory": 2048, "huawei.com/Ascend910": 2000})  # fmt: skip


def test_podgroup_of_a_job() -> None:
    pg = volcano.podgroup_for(JOB, SPEC)
    assert pg["metadata"]["name"] == "train-u-1" and pg["metadata"]["namespace"] == "ml"
    assert pg["metadata"]["ownerReferences"] == [{"apiVersion": volcano.BATCH, "kind": "Job", "name": "train",
                                                  "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    assert pg["spec"] == {"minMember": 2, "minTaskMember": {"worker": 2}, "queue": "q",
                          "minResources": {"cpu": "2500m", "huawei.com/Ascend910": "2", "memory": "2Gi"}}  # fmt: skip


def test_pod_of_a_job_belongs_to_the_job() -> None:
    pod = volcano.pod_for(JOB, SPEC, "worker", 1, retries=2)
    m = pod["metadata"]
    assert m["name"] == "train-worker-1" and m["labels"]["app"] == "t"
    assert m["labels"][volcano.TASK_SPEC] == "worker" and m["annotations"][volcano.RETRY_COUNT] == "2"
    assert m["annotations"]["scheduling.k8s.io/group-name"] == "train-u-1"
    assert pod["spec"]["schedulerName"] == "volcano" and pod["spec"]["restartPolicy"] == "Never"
    r = pods.ref(pod)
    assert (r.job, r.name, r.grouped) == ("train", "train-worker-1", True)  # the Job, not the PodGroup


def test_status_compared_without_timestamps() -> None:
    tasks = [st.TaskSnap("train-worker-0", "worker", 0, SPEC.tasks[0], status=st.RUNNING)]
    desired = volcano.podgroup_status("Running", tasks, "", 1)
    written = volcano.stamp(dict(desired, conditions=[dict(c) for c in desired["conditions"]]), None,
                            "2026-12-01T00:00:00Z")  # fmt: skip
    assert written["conditions"][0]["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    assert not volcano.status_differs(written, volcano.podgroup_status("Running", tasks, "", 1))
    assert volcano.status_differs(written, volcano.podgroup_status("Running", [], "", 1))
    job = volcano.job_status(SPEC, "Inqueue", tasks, 0, restarting=False)
    assert job["state"] == {"phase": "Pending"} and job["running"] == 1 and job["minAvailable"] == 2


def test_a_jobs_status_counts_its_tasks_pods_by_phase_and_those_stopping() -> None:
    """`taskStatusCount` (per task, pods by phase) and `terminating`, as Volcano's controller
    writes them: `vcctl job view` and JobFlow conditions read them; a count that drops to
    nothing is deleted from the object by the merge patch, not left behind."""
    w = SPEC.tasks[0]
    tasks = [st.TaskSnap("train-worker-0", "worker", 0, w, status=st.RUNNING),
             st.TaskSnap("train-worker-1", "worker", 1, w, status=st.RELEASING)]  # fmt: skip
    job = volcano.job_status(SPEC, "Running", tasks, 0, False)
    assert job["taskStatusCount"] == {"worker": {"phase": {"Running": 1}}}  # the stopping one is not
    assert job["terminating"] == 1
    later = volcano.job_status(SPEC, "Running", [replace(tasks[0], status=st.SUCCEEDED)], 0, False)
    assert later["taskStatusCount"] == {"worker": {"phase": {"Succeeded": 1}}}
    assert volcano.counts_only(job, later)
    patch = volcano.removals(job, later)
    assert patch["taskStatusCount"] == {"worker": {"phase": {"Running": None, "Succeeded": 1}}}


def test_a_job_ending_with_pods_still_stopping_shows_volcanos_phase() -> None:
    """Completing is a Volcano Job's phase only under a CompleteJob action; minSuccess reached
    (or every pod finished) with pods still being stopped is Completed there at once — its
    running state sets Completed, whose state kills the rest. Failing is Failed."""
    tasks = [st.TaskSnap("train-worker-0", "worker", 0, SPEC.tasks[0], status=st.RELEASING)]
    shown = lambda phase, why: volcano.job_status(SPEC, phase, tasks, 0, False, reason=why)["state"]["phase"]  # noqa: E731
    assert shown("Completing", "minSuccess 1 reached") == "Completed"
    assert shown("Completing", "CompleteJob on TaskCompleted") == "Completing"
    assert shown("Completing", "CompleteJob requested by user") == "Completing"
    assert shown("Failing", "RestartJob on PodFailed") == "Failed"
    assert shown("Terminating", "TerminateJob requested by user") == "Terminating"


def test_a_job_shows_running_once_min_available_pods_run() -> None:
    """The log's Running is the PodGroup's (the gang placed); Volcano's job controller shows a
    Job Running only once minAvailable of its pods run (or ran): an operator saw
    `state.phase: Running` beside `running: 0, pending: 2` while the pods waited for devices."""
    bound = [st.TaskSnap(f"train-worker-{i}", "worker", i, SPEC.tasks[0], status=st.BOUND) for i in range(2)]
    one = [bound[0], st.TaskSnap("train-worker-1", "worker", 1, SPEC.tasks[0], status=st.RUNNING)]
    both = [st.TaskSnap(f"train-worker-{i}", "worker", i, SPEC.tasks[0], status=st.RUNNING) for i in range(2)]
    shown = lambda tasks, ran=False: volcano.job_status(SPEC, "Running", tasks, 0, False, ran=ran)["state"]["phase"]  # noqa: E731
    assert (shown(bound), shown(one), shown(both)) == ("Pending", "Pending", "Running")
    assert shown(one, ran=True) == "Running"  # a pod failed after it ran: it stays Running


def test_a_stop_concerns_the_run_it_was_asked_for() -> None:
    """An eviction at #50 stops a pod bound or made before it, never a later run's pod under
    the same name (bound for commit #60, or made by the controller after reading #50)."""
    pod = volcano.pod_for(JOB, SPEC, "worker", 1, retries=1, made_after=50)
    assert pod["metadata"]["annotations"][volcano.MADE_AFTER] == "50"
    assert not pods.stop_concerns(pod, 50) and pods.stop_concerns(pod, 51)

    assert pods.stop_concerns({"metadata": {}}, 50)  # neither stamp: a pod from before stamps
    assert pods.stop_concerns({"metadata": {"annotations": {volcano.PLACEMENT: "40"}}}, 50)
    assert pods.stop_concerns({"metadata": {"annotations": {volcano.PLACEMENT: "50"}}}, 50)
    assert not pods.stop_concerns({"metadata": {"annotations": {volcano.PLACEMENT: "60"}}}, 50)
    assert not pods.stop_concerns({"metadata": {"annotations": {volcano.PLACEMENT: "40", volcano.MADE_AFTER: "55"}}}, 50)
    assert pods.stop_concerns({"metadata": {"annotations": {volcano.PLACEMENT: "x"}}}, 50)  # not a stamp


def test_a_pod_of_a_job_asks_the_count_of_the_card_its_template_asks_memory_of() -> None:
    """HAMi's webhook adds the count resource to a container asking `-memory` alone; the
    kubelet would otherwise call no device plugin and the pod would start without its card."""
    import yaml

    from services.core.devices import build_vendors
    from services.core.workload import admit, load_documents
    from services.core.workload.devicerequests import hami_parser

    reg = build_vendors()
    job = yaml.safe_load("""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: infer, namespace: ml, uid: u-2}
spec:
  minAvailable: 1
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        initContainers:
        - {name: warm, image: x, resources: {limits: {huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "8192"}}}
        containers:
        - {name: side, image: x, resources: {limits: {cpu: "1"}}}
        - {name: npu, image: x, resources: {limits: {huawei.com/Ascend910B3-memory: "16384", cpu: "2"}}}
        - {name: gpu, image: x, resources: {limits: {nvidia.com/gpumem: "4000"}}}
        - {name: gpu2, image: x, resources: {limits: {nvidia.com/gpu: "1", nvidia.com/gpumem: "2000"}}}
""")
    w = admit(load_documents(yaml.safe_dump(job)), hami_parser(reg), reg.resource_names())
    assert not w.rejections
    pod = volcano.pod_for(job, w.jobs[0], "worker", 0, retries=0)
    limits = [c.get("resources", {}).get("limits") for c in pod["spec"]["containers"]]
    assert limits == [{"cpu": "1"},
                      {"huawei.com/Ascend910B3-memory": "16384", "cpu": "2", "huawei.com/Ascend910B3": "1"},
                      {"nvidia.com/gpumem": "4000", "nvidia.com/gpu": "1"},
                      {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}]  # fmt: skip
    # the Job's own object is untouched
    assert "huawei.com/Ascend910B3" not in job["spec"]["tasks"][0]["template"]["spec"]["containers"][1]["resources"]["limits"]


def test_a_pod_of_a_job_mounts_the_jobs_own_volumes() -> None:
    job = {**JOB, "spec": {**JOB["spec"], "volumes": [{"mountPath": "/data", "volumeClaimName": "dataset"}]}}
    pod = volcano.pod_for(job, SPEC, "worker", 0, retries=0)
    assert pod["spec"]["volumes"] == [{"name": "job-volume-0", "persistentVolumeClaim": {"claimName": "dataset"}}]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "job-volume-0", "mountPath": "/data"}]
    assert "volumes" not in JOB["spec"]["tasks"][0]["template"]["spec"]  # the Job object is untouched


def test_a_pod_of_a_job_carries_the_jobs_priority_class_unless_its_template_names_one() -> None:
    """Volcano's `createJobPod`: the Job's `priorityClassName` is written into a pod whose
    template names none (the API server then gives the pod that class's priority and
    preemptionPolicy, which admission books for its task); a template's own class stays."""
    spec = msgspec.structs.replace(SPEC, priority_class="urgent")
    assert volcano.pod_for(JOB, spec, "worker", 0, retries=0)["spec"]["priorityClassName"] == "urgent"
    assert "priorityClassName" not in volcano.pod_for(JOB, SPEC, "worker", 0, retries=0)["spec"]
    own = {**JOB, "spec": {"tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
        "priorityClassName": "low", "containers": [{"name": "c", "image": "x"}]}}}]}}  # fmt: skip
    assert volcano.pod_for(own, spec, "worker", 0, retries=0)["spec"]["priorityClassName"] == "low"


def test_a_jobs_status_keeps_volcanos_history_version_and_running_duration() -> None:
    """Volcano's job controller appends a condition (the phase, and when) at each phase change,
    bumps `version` at each kill of the pods (a restart, the end) and writes `runningDuration`
    (creation to the kill) when it kills; `unknown` and every pending kind of pod are counted.
    The status showed none of these."""
    created = "2026-12-01T00:00:00Z"
    w = SPEC.tasks[0]
    waiting = [st.TaskSnap(f"train-worker-{i}", "worker", i, w, status=s)
               for i, s in enumerate((st.ALLOCATED, st.BINDING))]  # fmt: skip
    running = [replace(t, status=st.RUNNING) for t in waiting]

    def write(current: dict | None, phase: str, tasks: list, retries: int, now: str) -> dict:
        desired = volcano.job_status(SPEC, phase, tasks, retries, phase == "Restarting", ran=phase != "Pending")
        if current is not None and not volcano.status_differs(current, desired):
            return current
        return {**(current or {}), **volcano.stamp(desired, current, now, created)}

    pending = write(None, "Pending", waiting, 0, "2026-12-01T00:00:05Z")
    assert (pending["pending"], pending["unknown"], pending["version"]) == (2, 0, 0)
    assert pending["taskStatusCount"] == {"worker": {"phase": {"Pending": 2}}}
    run = write(pending, "Running", running, 0, "2026-12-01T00:01:00Z")
    assert write(run, "Running", running, 0, "2026-12-01T00:02:00Z") is run  # nothing changed: not written
    restarted = write(run, "Restarting", [], 1, "2026-12-01T00:03:00Z")
    assert restarted["version"] == 1 and "runningDuration" not in restarted
    again = write(restarted, "Running", running, 1, "2026-12-01T00:04:00Z")
    ended = write(again, "Aborted", [], 1, "2026-12-01T01:02:03Z")
    assert [(c["status"], c["lastTransitionTime"]) for c in ended["conditions"]] == [
        ("Pending", "2026-12-01T00:00:05Z"), ("Running", "2026-12-01T00:01:00Z"),
        ("Restarting", "2026-12-01T00:03:00Z"), ("Running", "2026-12-01T00:04:00Z"),
        ("Aborted", "2026-12-01T01:02:03Z")]  # fmt: skip
    assert ended["version"] == 2 and ended["runningDuration"] == "1h2m3s"
    later = volcano.stamp(volcano.job_status(SPEC, "Aborted", [], 1, False), ended, "2026-12-02T00:00:00Z", created)
    assert later["runningDuration"] == "1h2m3s" and later["conditions"] == ended["conditions"]  # kept, not grown
