"""A PodGroup's pod joining it (a `JobUpdated`) while another service appends to the job: the
scheduler's verdict landed between admission's read of the job's last sequence and its own
append, the write was refused "created or changed concurrently; apply again" — and nothing
watched ever applies again. The pod was never the group's member, its gang never placed (seen
under load: operators' pods made after their PodGroup never ran), and the user's PodGroup got a
FailedAdmission Warning meant for `tessera apply`. Now the group is judged again at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contracts.events import JobUnschedulable, JobUpdated
from services.admission.service import AdmissionService
from services.kube import volcano
from services.kube.listwatch import Change
from services.kube.podsource import PodSource
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Entry
from services.runtime.service import Outgoing
from tests.kube.cluster import Cluster
from tests.kube.test_operators import owner, pod, podgroup
from tests.processes import wait_until


class RacedLog(MemoryLog):
    """The in-memory log, with another writer's event landing on the job's subject just before
    admission's next append to it (what the scheduler's verdict does under load)."""

    def __init__(self) -> None:
        super().__init__()
        self.race: Entry | None = None

    async def append_pipelined(self, entries: Sequence[Entry]) -> list[Any]:
        if self.race is not None and any(e.subject == self.race.subject for e in entries):
            race, self.race = self.race, None
            await self.append(race)
        return await super().append_pipelined(entries)


async def test_a_member_joining_while_another_service_appends_is_judged_again(cluster: Cluster) -> None:
    await cluster.volcano_crds()
    log = RacedLog()
    admission = AdmissionService(log)
    source = PodSource(admission, cluster.kube)
    ref = owner("kubeflow.org/v1", "PyTorchJob", "mnist")
    pg = volcano.typed(await cluster.kube.create(volcano.podgroups_path("default"), podgroup("mnist", ref, 1)),
                       "PodGroup")  # fmt: skip
    await source.process([("pod", Change("synced", "", {})), ("podgroup", Change("upsert", "default/mnist", pg))])
    assert admission.known.jobs[("default", "mnist")].live  # admitted with no pod yet
    verdict = JobUnschedulable(namespace="default", name="mnist", reason="NotEnoughTasks")
    log.race = admission.service.entry(Outgoing(log.subjects.job("default", "mnist"), verdict))
    master = await cluster.create_pod(pod("mnist-master-0", "mnist", ref, requests={"cpu": "1"}))
    await source.process([("pod", Change("upsert", "default/mnist-master-0", master))])
    assert log.race is None, "no append raced"

    async def judged_again() -> bool:  # (the group comes back through the source's queue)
        while not source.changes.empty():
            await source.process([source.changes.get_nowait()])
        updates = [e for _m, e in await replayed(log) if isinstance(e, JobUpdated)]
        return any("mnist-master-0" in t.pod_names for u in updates for t in u.spec.tasks)

    await wait_until(judged_again, 10, "the pod taken into its group after the race")
    warned = [e for e in await cluster.events() if e.get("reason") == "FailedAdmission"]
    assert not warned, warned


async def replayed(log: MemoryLog) -> list[tuple[Any, Any]]:
    from contracts.envelope import TYPE
    from contracts.registry import default_registry

    reg = default_registry()
    return [(m, reg.decode(m.headers[TYPE], m.data)) async for m in log.replay() if m.headers.get(TYPE) in reg]
