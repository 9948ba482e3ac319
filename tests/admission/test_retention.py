"""Admission forgets finished jobs beyond `--keep-finished` (issue 12 item 7), and a name it
forgot can be applied again: judged by its subject's last sequence, not refused as if a
concurrent writer had created it."""

from __future__ import annotations

from contracts.api import ACCEPTED
from contracts.events import JobPhaseChanged, JobSubmitted
from services.admission.service import AdmissionService
from services.runtime.eventlog import EventLog
from services.runtime.service import Outgoing
from services.runtime.snapshot import Retention
from tests.admission.test_admission import events_of

POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers: [{name: c, image: busybox}]
"""


async def started(log: EventLog, keep: int) -> AdmissionService:
    svc = AdmissionService(log)
    svc.retain(Retention(keep_finished=keep))
    await svc.recover()
    return svc


async def finish(svc: AdmissionService, name: str) -> None:
    ended = JobPhaseChanged(namespace="default", name=name, phase="Failed", reason="test")
    await svc.service.publish(Outgoing(svc.subjects.job("default", name), ended))


async def test_finished_jobs_beyond_the_retention_are_forgotten_and_can_come_back(event_log: EventLog) -> None:
    svc = await started(event_log, keep=1)
    for name in ("p1", "p2", "p3"):
        assert [r.outcome for r in (await svc.apply(POD.replace("NAME", name))).results] == [ACCEPTED]
    for name in ("p1", "p2"):
        await finish(svc, name)

    restarted = await started(event_log, keep=1)  # folds the endings from the log
    assert set(restarted.known.jobs) == {("default", "p2"), ("default", "p3")}  # p1 forgotten
    assert not restarted.known.jobs[("default", "p2")].live
    everything = await started(event_log, keep=10)
    assert len(everything.known.jobs) == 3

    reply = await restarted.apply(POD.replace("NAME", "p1"))
    assert [r.outcome for r in reply.results] == [ACCEPTED], reply
    submitted = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert [e.spec.name for e in submitted] == ["p1", "p2", "p3", "p1"]
    assert restarted.known.jobs[("default", "p1")].live


async def test_a_forgotten_name_with_another_spec_is_written_over_its_old_job(event_log: EventLog) -> None:
    """A name admission never folded is written expecting an empty subject (no read per pod);
    the log's conflict says the name was forgotten, and the write goes over the old job."""
    svc = await started(event_log, keep=1)
    for name in ("p1", "p2"):
        assert [r.outcome for r in (await svc.apply(POD.replace("NAME", name))).results] == [ACCEPTED]
        await finish(svc, name)
    restarted = await started(event_log, keep=1)
    assert ("default", "p1") not in restarted.known.jobs
    other = POD.replace("NAME", "p1").replace("busybox", "nginx")
    reply = await restarted.apply(other)
    assert [r.outcome for r in reply.results] == [ACCEPTED], reply
    submitted = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert [e.spec.name for e in submitted] == ["p1", "p2", "p1"]
    assert restarted.known.jobs[("default", "p1")].live
    again = await started(event_log, keep=10)  # a concurrent writer's name is still refused
    busy = POD.replace("NAME", "p3")
    await svc.apply(busy)  # p3 lands after `again` folded the log
    assert [r.outcome for r in (await again.apply(busy.replace("busybox", "nginx"))).results] != [ACCEPTED]


def test_a_forgotten_jobs_object_uid_is_held_until_the_object_goes() -> None:
    """Beyond `--keep-finished` an ended job's spec goes, its Volcano Job object's uid stays
    (kubernetes edge: that object met again is the ended job, not a new one — its status may
    not say so yet), bounded, and dropped once the object is deleted or the name is submitted
    anew."""
    from contracts.events import JobDeleted
    from contracts.workloads import JobSpec, TaskSpec
    from services.admission.plan import ENDED_UIDS, Known, fold_known
    from services.core.retention import FinishedOrder
    from services.core.workload.jobupdate import OBJECT_UID

    known = Known(finished=FinishedOrder(0))
    seq = 0

    def run(name: str, uid: str = "") -> None:
        nonlocal seq
        spec = JobSpec(namespace="ns", name=name, kind="Job", annotations={OBJECT_UID: uid} if uid else {},
                       tasks=(TaskSpec(name="w", replicas=1),))  # fmt: skip
        for event in (JobSubmitted(spec=spec), JobPhaseChanged(namespace="ns", name=name, phase="Completed")):
            seq += 1
            fold_known(known, seq, "job", event)

    run("a", "uid-a")
    run("pod-job")  # a pod's implied job: no object uid to hold
    assert ("ns", "a") not in known.jobs and known.ended_uids == {("ns", "a"): "uid-a"}
    run("a", "uid-a2")  # made again under the name, ended again: the new object's uid
    assert known.ended_uids == {("ns", "a"): "uid-a2"}
    fold_known(known, seq + 1, "job", JobDeleted(namespace="ns", name="a"))
    assert not known.ended_uids
    for i in range(ENDED_UIDS + 5):
        run(f"j{i}", f"u{i}")
    assert len(known.ended_uids) == ENDED_UIDS and ("ns", "j5") in known.ended_uids and ("ns", "j4") not in known.ended_uids
