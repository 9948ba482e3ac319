"""`backfill` (Volcano `actions/backfill/backfill.go`): places pending BestEffort tasks (no
requests) of non-Pending, valid jobs on the best node, without a gang statement."""

from __future__ import annotations

from services.core.scheduling.actions.nodes import best_node, predicate_nodes
from services.core.scheduling.session import Session
from services.core.scheduling.statement import Statement


class BackfillAction:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        for job in sorted(ssn.jobs.values(), key=lambda j: (j.created, j.key)):
            if job.phase == "Pending" or ssn.job_valid(job):
                continue
            nodes, refused = ssn.nodes_for(job)
            for task in sorted(job.pending_tasks(), key=lambda t: (t.index, t.uid)):
                if not task.best_effort:
                    continue
                if task.spec.scheduling_gates or (task.volume is not None and task.volume.held):
                    job.fit_errors[task.uid] = ssn.pre_predicate(task).message()  # type: ignore[union-attr]
                    continue
                fit = predicate_nodes(ssn, task, nodes, sample=False)
                if not fit.idle:
                    fit.errors.update(refused)
                    job.fit_errors[task.uid] = fit.summary(len(ssn.node_list))
                    job.node_errors.update(fit.errors)  # explain's per-node words read them
                    continue
                node = best_node(ssn, task, fit.idle)
                stmt = Statement(ssn)
                stmt.allocate(task, node, ssn.bind_devices(task, node))
                stmt.commit()
