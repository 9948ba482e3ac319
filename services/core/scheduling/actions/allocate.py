"""`allocate` (Volcano `actions/allocate/allocate.go`).

Pending PodGroups are promoted to Inqueue here only when `enqueue` is not configured. Queues in
QueueOrder; an Overused queue is skipped (not pushed back); per job, pending non-BestEffort
tasks in TaskOrder through Allocatable, predicates and scoring; a task fitting only FutureIdle
is pipelined. The task loop stops as soon as the job is ready; then commit if JobReady, keep if
only JobPipelined, discard otherwise. A committed job with tasks left is pushed back, and the
queue after every job, so shares are re-evaluated — but a queue with `dequeueStrategy: fifo`
whose job could not be placed is not: its head blocks the rest of it (Volcano's; the default,
`traverse`, goes on to its next job).
"""

from __future__ import annotations

from services.core.scheduling.actions.nodes import select_node
from services.core.scheduling.actions.topology import allocate_with_topology
from services.core.scheduling.explain import no_such_cards
from services.core.scheduling.model import JobInfo, QueueInfo, TaskInfo
from services.core.scheduling.session import PriorityQueue, Session
from services.core.scheduling.statement import Statement


class AllocateAction:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        promote = "enqueue" not in ssn.conf.actions
        jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase == "Pending":
                if not promote:
                    continue
                job.phase = "Inqueue"
                ssn.enqueued.append(job)
            if not job.pending_tasks():
                continue
            reason = ssn.job_valid(job)
            if reason:
                job.job_fit_error = reason
                continue
            if job.queue not in ssn.queues:
                continue
            jobs_by_queue.setdefault(job.queue, PriorityQueue(ssn.job_order)).push(job)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            ssn.queue_order, [ssn.queues[q] for q in sorted(jobs_by_queue)]
        )
        pending_tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = jobs_by_queue.get(queue.name)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            if job.key not in pending_tasks:
                pending_tasks[job.key] = PriorityQueue(
                    ssn.task_order, [t for t in job.pending_tasks() if not t.best_effort]
                )
            tasks = pending_tasks[job.key]
            stmt = Statement(ssn)
            if job.spec.network_topology is None:
                self.allocate_job(ssn, queue, job, tasks, stmt)
            else:  # in one HyperNode (topology.py)
                allocate_with_topology(self.allocate_job, ssn, queue, job, tasks, stmt)
            if ssn.job_ready(job):
                stmt.commit()
                if not tasks.empty():
                    jobs.push(job)
            elif ssn.job_pipelined(job):
                pass  # keep: resources stay reserved in this session, nothing is bound
            else:
                stmt.discard()
                if queue.spec.dequeue_strategy == "fifo":
                    ssn.fifo_blocked[queue.name] = job.key
                    continue  # the head of a fifo queue blocks the rest of it (not pushed back)
            queues.push(queue)

    def allocate_job(
        self, ssn: Session, queue: QueueInfo, job: JobInfo, tasks: PriorityQueue[TaskInfo],
        stmt: Statement, within: frozenset[str] | None = None,
    ) -> None:  # fmt: skip
        """`within`: only these nodes (one HyperNode's, actions/topology.py)."""
        failed_roles: set[str] = set()
        nodes, refused = ssn.nodes_for(job)
        if within is not None:
            nodes = [n for n in nodes if n.name in within]
        while not tasks.empty():
            task = tasks.pop()
            absent = no_such_cards(ssn, task) if task.spec.devices else None
            if absent is not None:  # no queue limit is why: no node has such a card at all
                job.fit_errors[task.uid] = absent.why  # (it read "queue resource quota
                if not job.why:  # insufficient", issue 26 item 5)
                    job.why_plugin, job.why, job.unblock = absent.plugin, absent.why, absent.unblock
                continue
            if not ssn.allocatable(queue, task):
                job.fit_errors[task.uid] = "queue resource quota insufficient"
                if not job.why:
                    job.why_plugin, job.why, job.unblock = ssn.allocatable_reason(queue, task)
                continue
            if task.role in failed_roles:
                continue
            status = ssn.pre_predicate(task)
            if status is not None:
                job.fit_errors[task.uid] = status.message()
                failed_roles.add(task.role)
                if need_continue(ssn, job):
                    continue
                break
            node, idle, fit = select_node(ssn, task, nodes)
            if node is None:
                fit.errors.update(refused)
                job.fit_errors[task.uid] = fit.summary(len(ssn.node_list))
                job.node_errors.update(fit.errors)
                failed_roles.add(task.role)
                if need_continue(ssn, job):
                    continue
                break
            task.parts = ssn.score_parts(task, node)  # before the booking changes the node
            slices = ssn.bind_devices(task, node)
            if idle:
                stmt.allocate(task, node, slices)
            else:
                stmt.pipeline(task, node, slices)
            if ssn.job_ready(job) and not tasks.empty():
                break


def need_continue(ssn: Session, job: JobInfo) -> bool:
    """Volcano `NeedContinueAllocating`: keep going after a failed task only while the gang can
    still be met by the tasks left (never when minAvailable needs every remaining task)."""
    pending = sum(
        1 for t in job.tasks.values() if t.status == "Pending" and t.uid not in job.fit_errors
    )
    return job.ready_task_num() + job.waiting_task_num() + pending >= job.min_available
