"""What `tessera up` says the log already holds: deleted jobs and queues are not held. It read
only each subject's last event, and a deleted pod's end is reported after its deletion (the
node agent's `TaskFinished … deleted`), so deleted jobs were counted as unfinished, and a
deleted queue was listed as though it would come back."""

from __future__ import annotations

from contracts.events import (
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    QueueCreated,
    QueueDeleted,
    TaskFinished,
)
from contracts.workloads import QueueSpec
from services.cli.held import held_of
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.allocator.scenario import put
from tests.queue.test_queue_service import spec


async def test_deleted_jobs_and_queues_are_not_held(jetstream_log: JetStreamLog) -> None:
    log, s = jetstream_log, jetstream_log.subjects
    for q in ("team-a", "team-b"):
        await put(log, s.queue(q), QueueCreated(spec=QueueSpec(name=q)))
    await put(log, s.queue("team-a"), QueueDeleted(queue="team-a"))
    for name in ("live", "gone", "gone-quietly", "done", "back"):
        await put(log, s.job("ns", name), JobSubmitted(spec=spec(name)))
    # a running pod deleted: the deletion, then its end
    await put(log, s.job("ns", "gone"), JobDeleted(namespace="ns", name="gone"))
    await put(log, s.job("ns", "gone"), TaskFinished(namespace="ns", name="gone", task="gone-w-0", node="n1",
                                                     exit_code=137, reason="deleted"))  # fmt: skip
    await put(log, s.job("ns", "gone-quietly"), JobDeleted(namespace="ns", name="gone-quietly"))
    await put(log, s.job("ns", "done"), JobPhaseChanged(namespace="ns", name="done", phase="Terminated"))
    # deleted, then made again under the name: held, and its pod's end says nothing of that
    await put(log, s.job("ns", "back"), JobDeleted(namespace="ns", name="back"))
    await put(log, s.job("ns", "back"), JobSubmitted(spec=spec("back")))
    await put(log, s.job("ns", "back"), TaskFinished(namespace="ns", name="back", task="back-w-0", node="n1"))
    # a live job whose last event is a pod's end
    await put(log, s.job("ns", "live"), TaskFinished(namespace="ns", name="live", task="live-w-0", node="n1",
                                                     exit_code=1))  # fmt: skip

    held = await held_of(log)
    assert held.queues == ("team-b",)
    assert (held.jobs, held.live_jobs) == (3, 2)  # live, back (live), done (finished)
