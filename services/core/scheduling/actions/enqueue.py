"""`enqueue` (Volcano `actions/enqueue/enqueue.go`): Pending PodGroups become Inqueue when they
have no minResources or every enqueue plugin admits them (votes); admitted jobs are added to
the plugins' inqueue tallies at once (JobEnqueued) so later jobs in the cycle see them."""

from __future__ import annotations

from services.core.scheduling.decisions import ENQUEUE_REFUSED
from services.core.scheduling.model import JobInfo, QueueInfo
from services.core.scheduling.session import PriorityQueue, Session


class EnqueueAction:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase in ("Pending", ""):
                jobs_by_queue.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            ssn.queue_order, [ssn.queues[q] for q in sorted(jobs_by_queue)]
        )
        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_by_queue[queue.name]
            if jobs.empty():
                continue
            job = jobs.pop()
            if job.spec.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = "Inqueue"
                ssn.enqueued.append(job)
            else:
                job.job_fit_error = ENQUEUE_REFUSED
                job.why_plugin, job.why, job.unblock = ssn.enqueue_reason(job)
                ssn.refused.append(job)
            queues.push(queue)
