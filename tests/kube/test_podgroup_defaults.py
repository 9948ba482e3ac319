"""Operators' PodGroups on a cluster, where Volcano's PodGroup webhooks check little and default
much (found by a review playing a Kubeflow / KubeRay / Spark user):

- a `priorityClassName` naming no PriorityClass (the training-operator writes
  `schedulingPolicy.priorityClass` on the PodGroup alone) was refused for good: the group never
  had a phase and the operator never made its pods. Volcano's webhook does not check it and its
  scheduler runs the job at the default priority, then at the class's value once it exists;
- a PodGroup admitted after a refusal kept its stale `Admitted=False` beside its phase;
- a PodGroup made without `spec.queue` ignored its namespace's `scheduling.volcano.sh/queue-name`
  annotation (Volcano's mutating webhook writes it at create) and escaped the team's capability;
- an edit of a PodGroup's `spec.queue` was refused; Volcano's scheduler cache moves the job.
"""

from __future__ import annotations

from typing import Any

from contracts.events import JobUpdated
from services.admission.service import AdmissionService
from services.cli.up import ControlPlane
from services.kube import volcano
from services.kube.client import PRIORITY_CLASSES
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import NAMESPACES, Cluster
from tests.kube.test_judged_again import replayed
from tests.kube.test_operators import group_status, owner, plane, podgroup, queue  # noqa: F401
from tests.processes import wait_until

PYTORCH = ("kubeflow.org/v1", "PyTorchJob")


def _conditions(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.get("type", ""), c.get("status", "")) for c in status.get("conditions") or []]


async def test_a_podgroup_naming_a_missing_priority_class_is_admitted_and_takes_it_once_created(
    cluster: Cluster,
) -> None:
    await cluster.volcano_crds()
    log = MemoryLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    pg = volcano.typed(await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "pl", owner(*PYTORCH, "pl"), 2, queue="default", priority_class="later",
        min_resources={"cpu": "4"})), "PodGroup")  # fmt: skip
    await source.process([("pod", Change("synced", "", {})), ("podgroup", Change("upsert", "default/pl", pg))])
    job = admission.known.jobs[("default", "pl")]
    assert job.live and (job.spec.priority, job.spec.priority_class) == (0, "later")
    assert _conditions(await group_status(cluster, "pl")) == []  # no refusal written
    pc = await cluster.kube.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                      "metadata": {"name": "later"}, "value": 1000})  # fmt: skip
    await source.process([("priorityclass", Change("upsert", "later", pc))])
    updates = [e for _m, e in await replayed(log) if isinstance(e, JobUpdated)]
    assert [(u.name, u.spec.priority) for u in updates] == [("pl", 1000)]
    assert admission.known.jobs[("default", "pl")].spec.priority == 1000


async def test_a_podgroup_admitted_after_a_refusal_no_longer_says_it_was_refused(
    cluster: Cluster, plane: ControlPlane,  # noqa: F811
) -> None:  # fmt: skip
    """Refused (its queue does not exist): `Admitted=False`. Edited to a queue that does: the
    job controller's status (its phase) takes the refusal's condition off — it alone does."""
    path = volcano.podgroups_path("default", "pj")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "pj", owner(*PYTORCH, "pj"), 1, queue="nowhere", min_resources={"cpu": "1"}))  # fmt: skip

    async def refused() -> bool:
        return ("Admitted", "False") in _conditions(await group_status(cluster, "pj"))

    await wait_until(refused, 30, "the refusal in the group's status")
    await cluster.kube.patch(path, {"spec": {"queue": "default"}})

    async def admitted() -> bool:
        now = await group_status(cluster, "pj")
        return bool(now.get("phase")) and ("Admitted", "False") not in _conditions(now)

    await wait_until(admitted, 30, "the group with a phase and without its refusal")


async def test_a_podgroup_without_a_queue_takes_its_namespaces_and_its_capability(
    cluster: Cluster, plane: ControlPlane,  # noqa: F811
) -> None:  # fmt: skip
    """The reviewer's KubeRay cluster without the queue label, in a namespace annotated with
    the team's queue (capability 2 CPUs): its 4-CPU group waits there, Pending, instead of
    running in `default`."""
    await queue(cluster, "team-a", capability={"cpu": "2"})
    await cluster.kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "ns-a", "annotations": {"scheduling.volcano.sh/queue-name": "team-a"}}})  # fmt: skip
    await cluster.create_node("n1", cpu="8")
    await cluster.kube.create(volcano.podgroups_path("ns-a"), podgroup(
        "ray-rc-pg", owner("ray.io/v1", "RayCluster", "rc"), 2, min_resources={"cpu": "4"}, pending=True, ns="ns-a"))

    async def counted() -> bool:
        status = ((await cluster.present(volcano.queues_path("team-a"))) or {}).get("status") or {}
        return status.get("pending") == 1

    await wait_until(counted, 30, "the group counted Pending in team-a")
    pg = (await cluster.present(volcano.podgroups_path("ns-a", "ray-rc-pg"))) or {}
    assert (pg.get("status") or {}).get("phase") == "Pending"
    default = ((await cluster.present(volcano.queues_path("default"))) or {}).get("status") or {}
    assert default.get("inqueue", 0) + default.get("running", 0) == 0


async def test_editing_a_pending_podgroups_queue_moves_it(cluster: Cluster, plane: ControlPlane) -> None:  # noqa: F811
    """Pending in `small` (capability 2 < its 4 CPUs); the user edits `spec.queue: big`: it
    moves, is Inqueue there, and `small` no longer counts it."""
    await queue(cluster, "small", capability={"cpu": "2"})
    await queue(cluster, "big")
    await cluster.create_node("n1", cpu="16")
    await cluster.kube.create(volcano.podgroups_path("default"), podgroup(
        "pj", owner(*PYTORCH, "pj"), 2, queue="small", min_resources={"cpu": "4"}))  # fmt: skip

    async def counts(name: str) -> dict[str, Any]:
        return ((await cluster.present(volcano.queues_path(name))) or {}).get("status") or {}

    async def pending_in_small() -> bool:
        return (await counts("small")).get("pending") == 1

    await wait_until(pending_in_small, 30, "the group Pending in small")
    path = volcano.podgroups_path("default", "pj")
    obj = await cluster.kube.get(path)
    await cluster.kube.patch(path, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                    "spec": {**obj["spec"], "queue": "big"}})  # fmt: skip

    async def moved() -> bool:
        return (await group_status(cluster, "pj")).get("phase") == "Inqueue" and (await counts("big")).get(
            "inqueue") == 1 and (await counts("small")).get("pending") == 0  # fmt: skip

    await wait_until(moved, 30, "the group Inqueue in big, gone from small")
    warned = [e for e in await cluster.events() if e.get("reason") in ("FailedUpdate", "FailedAdmission")]
    assert not warned, warned
