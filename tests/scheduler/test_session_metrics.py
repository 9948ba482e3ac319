"""The session's Volcano metrics as Volcano writes them: the e2e latency's buckets, the queue
capacity under the resource names its allocated and deserved use, and `job_id` as the PodGroup's
name."""

from __future__ import annotations

import msgspec
from prometheus_client import CollectorRegistry

from contracts.events import JobSubmitted, QueueCreated
from contracts.workloads import JobSpec, QueueSpec
from services.cli import kubeobjects as ko
from services.core.workload.podgroups import OBJECT_UID, POD_UID, podgroup_name
from services.kube import pods as kube_pods
from services.runtime.eventlog import MemoryLog
from services.runtime.metrics import ServiceMetrics
from services.scheduler.metrics import SessionMetrics
from services.scheduler.service import Scheduler
from tests.allocator.scenario import put
from tests.scheduler.test_gauges import scrape
from tests.scheduler.test_scheduler_service import inference_job, seed


def test_e2e_latency_has_volcanos_buckets() -> None:
    """Volcano's `ExponentialBuckets(5, 2, 15)` (pkg/scheduler/metrics/metrics.go): 5 ms to
    81.92 s. Ours stopped at 5 s, and a session of 3–12 s (a backlog on 5,000 nodes) fell in
    +Inf, where no quantile can say how long it took."""
    metrics = SessionMetrics(ServiceMetrics("scheduler", CollectorRegistry()))
    metrics.session(7.0, 0.5, 0, 0, ())  # 7.5 s
    samples = {s.labels.get("le"): s.value for f in metrics.e2e.collect() for s in f.samples
               if s.name.endswith("_bucket")}  # fmt: skip
    assert [float(le) for le in samples if le != "+Inf"] == [5.0 * 2**i for i in range(15)]
    assert samples["5120.0"] == 0 and samples["10240.0"] == 1


async def test_queue_capacity_names_the_card_type_allocated_and_deserved_name() -> None:
    """A queue capped on the family alias (`huawei.com/Ascend910`) on a 910B3 cluster:
    allocated and deserved say `huawei.com/Ascend910B3`, and so must its capacity, or a panel
    dividing one by the other matches nothing."""
    log = MemoryLog()
    await seed(log)
    s = log.subjects
    await put(log, s.queue("train"), QueueCreated(spec=QueueSpec(
        name="train", parent="root", capability={"cpu": 64000, "huawei.com/Ascend910": 8000})))  # fmt: skip
    await put(log, s.job("default", "small"), JobSubmitted(spec=inference_job("small")))
    sched = Scheduler(log)
    await sched.recover()
    await sched._session()
    got = scrape(sched)
    train = (("queue_name", "train"),)
    capacity = {labels: v for (n, labels), v in got.items() if n == "volcano_queue_capacity_scalar_resources"}
    assert capacity == {(*train, ("resource", "huawei.com/Ascend910B3")): 8000}
    assert got[("volcano_queue_capacity_milli_cpu", train)] == 64000
    assert ("volcano_queue_allocated_scalar_resources", (("queue_name", "default"), ("resource", "huawei.com/Ascend910B3"))) in got


async def test_unschedule_task_count_names_the_job_by_its_podgroup_as_volcano_does() -> None:
    """Volcano's gang plugin writes `job.Name`, which `JobInfo.SetPodGroup` takes from the
    PodGroup: its name, no namespace — `<job>-<uid>` for a Volcano Job, `podgroup-<pod uid>`
    for a plain pod, an explicit PodGroup's own. Tessera wrote `default/huge`."""
    log = MemoryLog()
    await seed(log)
    s = log.subjects
    base = inference_job("x", replicas=9)
    task = base.tasks[0]
    jobs = {
        "vcjob": JobSpec(namespace="default", name="vcjob", kind="Job", min_available=9, tasks=(task,),
                         annotations={OBJECT_UID: "0b7c-job"}),
        "group": JobSpec(namespace="default", name="group", kind="PodGroup", min_available=9, tasks=(task,)),
        "applied": JobSpec(namespace="default", name="applied", kind="Job", min_available=9, tasks=(task,)),
        "pod": JobSpec(namespace="default", name="pod", kind="Pod", min_available=1, tasks=(
            msgspec.structs.replace(task, replicas=1, pod_names=("pod",), cpu_milli=10**9,
                                    annotations={POD_UID: "9f1e-pod"}),)),
    }  # fmt: skip
    for name, spec in jobs.items():
        await put(log, s.job("default", name), JobSubmitted(spec=spec))
    sched = Scheduler(log)
    await sched.recover()
    await sched._session()
    ids = {labels[0][1] for (n, labels) in scrape(sched) if n == "volcano_unschedule_task_count"}
    messages = [m async for m in log.replay()]
    applied = ko.podgroup_name(ko.catalog(messages), {"namespace": "default", "name": "applied", "kind": "Job"})
    assert ids == {"vcjob-0b7c-job", "group", "podgroup-9f1e-pod", applied}  # `tessera get pg`'s name too
    assert applied.startswith("applied-")
    assert kube_pods.POD_UID == POD_UID == ko.POD_UID
    assert podgroup_name(jobs["group"], 1) == "group"
