"""Tessera beside a Volcano that stays, and PodGroups whose name outlives their object
(rev-shared's review).

- A PodGroup deleted and made again under its name while Tessera was down is a new object:
  the old job ends and the new one is judged. It was refused for good ("a live job of this name
  exists with a different spec (delete it first)", and deleting it again did not help), and the
  queue service wrote the old job's status over the new object, which woke admission's refusal
  again: thousands of writes a minute on an object another team owns.
"""

from __future__ import annotations

from typing import Any

from contracts.events import JobDeleted, JobSubmitted
from services.admission.service import AdmissionService
from services.kube import volcano
from services.kube.jobcontroller import JobController
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from tests.kube.cluster import Cluster
from tests.kube.test_judged_again import replayed
from tests.kube.test_status_counts import Clock

SYNCED = Change("synced", "", {})


def team_pg(min_member: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup", "metadata": {"name": "team-pg", "namespace": "default"},
            "spec": {"minMember": min_member, "queue": "default", "minResources": {"cpu": cpu}}}  # fmt: skip


def upsert(obj: dict[str, Any], kind: str) -> Change:
    m = obj["metadata"]
    return Change("upsert", f"{m['namespace']}/{m['name']}", volcano.typed(obj, kind))


async def listed(source: PodSource, *changes: tuple[str, Change]) -> None:
    """What a (re)started admission's first listings bring: the changes, then every watch synced."""
    await source.process([*changes, *((what, SYNCED) for what in ("queue", "podgroup", "job", "pod"))])


async def submitted_uids(log: MemoryLog, name: str) -> list[str]:
    return [e.spec.annotations.get(volcano.OBJECT_UID, "") for _m, e in await replayed(log)
            if isinstance(e, JobSubmitted) and e.spec.name == name]  # fmt: skip


async def deletions(log: MemoryLog, name: str) -> int:
    return sum(isinstance(e, JobDeleted) and e.name == name for _m, e in await replayed(log))


def podgroup_writes(cluster: Cluster) -> int:
    """Writes of PodGroups (a patch is counted as an update) by the test's client."""
    return sum(n for (agent, verb, what), n in cluster.requests.items() if agent == cluster.kube.agent
               and verb in ("update", "patch") and what.startswith("scheduling.volcano.sh/podgroups"))  # fmt: skip


async def restarted(log: MemoryLog, cluster: Cluster) -> PodSource:
    """Admission started again on the same log."""
    admission = AdmissionService(log)
    await admission.recover()
    return PodSource(admission, cluster.kube)


async def test_a_podgroup_made_again_under_its_name_while_tessera_was_down_is_a_new_job(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    assert await submitted_uids(log, "team-pg") == [volcano.uid(old)]
    # Tessera is down (an upgrade): the group is deleted and made again, with another spec
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    new = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(2, "2"))
    source = await restarted(log, cluster)
    # its listing's object judged before that listing is over (batches cut anywhere)
    await source.process([*((what, SYNCED) for what in ("queue", "job", "pod")),
                          ("podgroup", upsert(new, "PodGroup"))])  # fmt: skip
    assert await submitted_uids(log, "team-pg") == [volcano.uid(old), volcano.uid(new)]
    await source.process([("podgroup", SYNCED)])
    assert await deletions(log, "team-pg") == 1, "the old object's job ended once, before the new one"
    job = source.admission.known.jobs[("default", "team-pg")]
    assert job.live and job.spec.min_available == 2
    refused = [e for e in await cluster.events() if e.get("reason") == "FailedAdmission"]
    assert not refused, refused
    status = (await cluster.present(volcano.podgroups_path("default", "team-pg")) or {}).get("status") or {}
    assert not any(c.get("type") == "Admitted" for c in status.get("conditions") or []), status


async def test_a_podgroup_deleted_while_tessera_was_down_ends_its_job_at_the_first_listing(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    source = await restarted(log, cluster)
    await listed(source)  # no watch event says it: the listing does not have it
    assert await deletions(log, "team-pg") == 1
    assert not source.admission.known.jobs[("default", "team-pg")].live


async def test_the_queue_service_writes_no_status_on_a_podgroup_it_did_not_admit(cluster: Cluster) -> None:
    """The log's job `team-pg` was admitted from the object with uid A; the API server's
    `team-pg` now has uid B (made again while Tessera was away, admission not caught up): its
    status is not the log's job's to write. It was, whole (conditions included), which dropped
    admission's `Admitted=False`, whose next judgment wrote it again: a loop of thousands of
    writes a minute. Counted: no write at all, however often the job is reconciled."""
    await cluster.volcano_crds()
    log = MemoryLog()
    first = PodSource(AdmissionService(log), cluster.kube)
    old = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(1, "1"))
    await listed(first, ("podgroup", upsert(old, "PodGroup")))
    await cluster.kube.delete(volcano.podgroups_path("default", "team-pg"))
    new = await cluster.kube.create(volcano.podgroups_path("default"), team_pg(2, "2"))
    controller = JobController(log, cluster.kube, clock=Clock())
    for m, event in await replayed(log):
        controller.fold(m.seq, event)
    controller.podgroups["default/team-pg"] = volcano.typed(new, "PodGroup")
    before = podgroup_writes(cluster)
    for _ in range(5):
        await controller.reconcile("default/team-pg")
    assert podgroup_writes(cluster) == before, "status written on a PodGroup the log did not admit"
    assert controller.writes == 0
    status = (await cluster.present(volcano.podgroups_path("default", "team-pg")) or {}).get("status") or {}
    assert status.get("phase") != "Inqueue", status

