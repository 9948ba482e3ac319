"""The job controller's "its Volcano Job object was deleted" ends the job only when the live job
is the one admitted from that object: deleted and made again under its name, the log may have
the new Job (admission read it first) while the controller still acts on what it saw of the
old one — the new Job was ended the moment it was admitted."""

from __future__ import annotations

import pytest

from contracts.events import JobPhaseChanged, JobSubmitted
from contracts.workloads import JobSpec, TaskSpec
from services.core.workload.jobupdate import OBJECT_UID
from services.queue import flow as fl


def admitted(uid: str) -> fl.Flow:
    flow = fl.Flow()
    spec = JobSpec(namespace="ns", name="train", kind="Job", annotations={OBJECT_UID: uid},
                   tasks=(TaskSpec(name="w", replicas=1),))  # fmt: skip
    flow.apply(1, JobSubmitted(spec=spec))
    return flow


def test_object_deleted_ends_the_job_admitted_from_that_object_only() -> None:
    with pytest.raises(fl.Refused, match="another Job object now"):
        fl.command(admitted("u2"), fl.OBJECT_DELETED, "ns", "train", uid="u1")
    ended = fl.command(admitted("u1"), fl.OBJECT_DELETED, "ns", "train", uid="u1")
    phases = [e.phase for e in ended if isinstance(e, JobPhaseChanged)]
    assert phases and phases[-1] in ("Terminating", "Terminated")
    assert fl.command(admitted("u2"), fl.OBJECT_DELETED, "ns", "train")  # no uid said: as before
