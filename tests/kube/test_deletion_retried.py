"""A deleted PodGroup's or Volcano Job's `JobDeleted`, waiting for the last of its pods, is written
even when the batch that saw that pod go fails once and is taken again (`PodSource.run`): the
wait was forgotten before the write, and the retry found no pod placed and nothing waiting — the
job, and its cards and CPUs, held until the next relist or restart."""

from __future__ import annotations

import copy
from typing import Any

from services.admission.service import AdmissionService
from services.kube import volcano
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.service import TransientError
from tests.kube.cluster import Cluster
from tests.kube.test_job_ttl import one_pod_job
from tests.kube.test_operators import owner, pod, podgroup

SYNCED = Change("synced", "", {})


def fails_once(admission: AdmissionService) -> dict[str, int]:
    """`delete_job` raises once, as it does when the log is out of reach (or after ten
    conflicts); the calls are counted."""
    real = admission.delete_job
    calls = {"n": 0}

    async def flaky(*a: Any, **kw: Any) -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TransientError("the log is out of reach")
        return await real(*a, **kw)

    admission.delete_job = flaky  # type: ignore[method-assign]
    return calls


async def taken_again(source: PodSource, batch: list[tuple[str, Change]]) -> None:
    """The batch fails once and is processed again, as `PodSource.run` does."""
    try:
        await source.process(batch)
    except TransientError:
        pass
    else:
        raise AssertionError("the first try was to fail")
    await source.process(batch)


async def test_a_deleted_podgroups_job_ends_when_the_batch_that_saw_its_last_pod_go_is_retried(
        cluster: Cluster) -> None:  # fmt: skip
    await cluster.volcano_crds()
    admission = AdmissionService(MemoryLog())
    source = PodSource(admission, cluster.kube)
    ref = owner("kubeflow.org/v1", "MPIJob", "mpi")
    pg = volcano.typed(await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "mpi", ref, 1, queue="default", min_resources={"cpu": "1"})), "PodGroup")
    w = pod("mpi-w-0", "mpi", ref, requests={"cpu": "1"})
    w["metadata"]["uid"] = "u-w0"
    w["spec"]["nodeName"] = "n1"
    w["status"] = {"phase": "Running"}
    await source.process([("pod", SYNCED), ("podgroup", SYNCED),
                          ("podgroup", Change("upsert", "default/mpi", pg)),
                          ("pod", Change("upsert", "default/mpi-w-0", w))])  # fmt: skip
    assert admission.known.jobs[("default", "mpi")].live
    await source.process([("podgroup", Change("delete", "default/mpi", pg))])
    assert admission.known.jobs[("default", "mpi")].live and ("default", "mpi") in source.group_deleting

    calls = fails_once(admission)
    await taken_again(source, [("pod", Change("delete", "default/mpi-w-0", copy.deepcopy(w)))])
    assert calls["n"] == 2
    assert not admission.known.jobs[("default", "mpi")].live, "the deleted PodGroup's job lives on (its cards held)"
    assert ("default", "mpi") not in source.group_deleting


async def test_a_deleted_volcano_jobs_job_ends_when_the_batch_that_saw_its_last_pod_go_is_retried(
        cluster: Cluster) -> None:  # fmt: skip
    await cluster.volcano_crds()
    admission = AdmissionService(MemoryLog())
    source = PodSource(admission, cluster.kube)
    vj = volcano.typed(await cluster.kube.create(volcano.jobs_path("default"), one_pod_job("train", None)), "Job")
    uid = volcano.uid(vj)
    w = pod("train-w-0", "train", {"apiVersion": volcano.BATCH, "kind": "Job", "name": "train", "uid": uid,
                                   "controller": True}, requests={"cpu": "1"})  # fmt: skip
    w["metadata"]["uid"] = "u-train-w0"
    w["spec"]["nodeName"] = "n1"
    w["status"] = {"phase": "Running"}
    await source.process([("pod", SYNCED), ("job", SYNCED), ("job", Change("upsert", "default/train", vj)),
                          ("pod", Change("upsert", "default/train-w-0", w))])  # fmt: skip
    assert admission.known.jobs[("default", "train")].live
    await source.process([("job", Change("delete", "default/train", vj))])
    assert admission.known.jobs[("default", "train")].live and ("default", "train", uid) in source.deleting

    calls = fails_once(admission)
    await taken_again(source, [("pod", Change("delete", "default/train-w-0", copy.deepcopy(w)))])
    assert calls["n"] == 2
    assert not admission.known.jobs[("default", "train")].live, "the deleted Job's job lives on (its cards held)"
    assert not source.deleting
