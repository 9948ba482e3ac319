"""The queue service's decisions: what a job or queue owes the log, given the projection.

Level-triggered on purpose: every function looks at the current state of one job or queue and
returns the events that bring the log in line (PodGroup Running/Completed, terminal job phases,
lifecycle-policy restarts, Closing → Closed), or nothing. Because the service folds its own
events back before deciding again, asking twice gives nothing the second time — which is what
makes a crash between "decided" and "acked" harmless: the redelivered event asks again.

Stopping pods goes through `EvictionRequested` (the node agent owns running pods); a failed pod
that only has to go back to Pending gets `TaskFinished{reason: "restarted"}` directly, as the
simulator does. Everything derives from the log: retries are the job's `Restarting` phases,
suspended specs are remembered from the job's `Aborted` phase with the suspend reason.

TerminateJob and CompleteJob (a policy's action or a bus Command) go through Volcano's
intermediate phases (`state/terminating.go`, `completing.go`): `Terminating`/`Completing` is
appended with an eviction for every unfinished pod, and the job ends (`Terminated`/`Completed`)
once none of them runs; pods that finished before are kept as they are. While it ends, the job
stays in the projection (its running pods still hold their cards) but nothing of it is placed
again, and a pod it is killing that reports a failure is a kill, not a failure for the policies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from contracts.base import Event
from contracts.events import (
    EvictionRequested,
    JobDeleted,
    JobPhaseChanged,
    JobSubmitted,
    PlacementCommitted,
    QueueDeleted,
    QueueStateChanged,
    TaskFinished,
    TaskStarted,
)
from contracts.workloads import JobSpec, TaskSpec
from services.core.retention import FinishedOrder, ended
from services.core.scheduling import lifecycle
from services.core.scheduling import snapshot as st
from services.core.taskindex import ByJob
from services.core.workload.jobupdate import OBJECT_UID

SUSPENDED = "suspended by user"
#: what an Aborting job's reason gains when it is resumed before its pods stopped
RESUME_ASKED = "resumed by user"
#: TaskFinished reasons that are the system stopping a pod, not the pod failing.
STOPPED_BY_SYSTEM = frozenset({"evicted", "restarted", "deleted", "killed"})
LIVE_TASK = (st.RUNNING, st.BOUND)
#: the phases a job ends through → the phase it ends in (`Failing` is Tessera's: a job whose
#: end is Failed while its pods are stopped, shown Failed on its Volcano Job as Volcano shows it)
ENDING = {"Terminating": "Terminated", "Completing": "Completed", "Aborting": "Aborted", "Failing": "Failed"}
#: a terminal phase → the ending phase a job with pods still holding their nodes goes through
FINISHING = {"Failed": "Failing", "Completed": "Completing"}
#: the actions that end a job through one of them
ENDING_ACTIONS = {"TerminateJob": "Terminating", "CompleteJob": "Completing", "AbortJob": "Aborting"}


@dataclass
class Flow:
    """What the projection does not keep: retry counts and the specs of suspended jobs."""

    projection: st.ClusterProjection = field(default_factory=st.ClusterProjection)
    retries: dict[str, int] = field(default_factory=dict)
    suspended: dict[str, JobSpec] = field(default_factory=dict)
    submitted: set[str] = field(default_factory=set)
    #: jobs in a restart round: from `Restarting` until every pod the round stopped is back
    #: to Pending (`stopping`), as Volcano's Restarting state lasts while pods terminate — a
    #: failure meanwhile is one more pod of the same round, restarted with it without a retry
    #: (`pod_failed`). Not until they are placed again: a pod that found no room kept the
    #: round open, and its gang's pods run again meanwhile failed for ever without a retry
    restarting: set[str] = field(default_factory=set)
    #: job → the pods a restart or the job's end is stopping (evicted for it, not finished yet)
    stopping: dict[str, set[str]] = field(default_factory=dict)
    #: job → the sequence of its last `Restarting`: a failure appended before it (read after:
    #: pods failing together) is of the run that round ended, restarted with it for no retry
    round_began: dict[str, int] = field(default_factory=dict)
    #: job → (Terminating | Completing, why) while its unfinished pods are being killed
    ending: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: the job's last JobPhaseChanged phase (what `get jobs` and the Job object show)
    shown: dict[str, str] = field(default_factory=dict)
    #: (job key, pod) -> sequence of the last event about the pod (commit, start, finish)
    task_seq: ByJob[tuple[str, str], int] = field(default_factory=lambda: ByJob(1))
    #: queues closed because their parent closed (Volcano's `volcano.sh/closed-by-parent`):
    #: the ones that open again with it
    closed_by_parent: set[str] = field(default_factory=set)
    #: ended jobs, oldest first; beyond `keep` their retries, pods and name are forgotten (a
    #: suspended job is not: it can be resumed)
    finished: FinishedOrder[str] = field(default_factory=FinishedOrder)

    def _forget_tasks(self, key: str) -> None:
        self.task_seq.forget_job(key)

    def _ended(self, key: str) -> None:
        for old in self.finished.finished(key):
            self._forget_tasks(old)
            self.submitted.discard(old)
            self.retries.pop(old, None)
            self.restarting.discard(old)
            self.stopping.pop(old, None)
            self.round_began.pop(old, None)
            self.shown.pop(old, None)
            self.ending.pop(old, None)

    def apply(self, seq: int, event: Event) -> None:
        match event:
            case TaskFinished() if self.projection.ends_again(event):
                pass  # a finished pod's late second end: not its latest word, no policy acts on it
            case TaskStarted() | TaskFinished():
                self.task_seq[(f"{event.namespace}/{event.name}", event.task)] = seq
            case PlacementCommitted():
                for p in event.placements:
                    self.task_seq[(f"{event.namespace}/{event.name}", p.task)] = seq
            case _:
                pass
        match event:
            case EvictionRequested() if event.reason == "restarted" or job_key(event) in self.ending:
                self._stop(f"{event.namespace}/{event.name}", event.task, event.reason == "restarted")
            case TaskFinished() if event.reason in st.BACK_TO_PENDING:
                self.stopping.get(f"{event.namespace}/{event.name}", set()).discard(event.task)
            case TaskFinished() if event.reason != st.POD_DELETED and job_key(event) in self.ending:
                # it ended on its own before its kill landed (the kill is asked for what the log
                # showed running): it is stopped, and kept Succeeded or Failed, as Volcano's
                # kill keeps finished pods (PodRetainPhaseSoft) — an eviction of a pod that has
                # finished is answered by nobody, and the job waited for ever. (A kill reports
                # `pod deleted` on a cluster: `pod_failed` says it is one.)
                self.stopping.get(f"{event.namespace}/{event.name}", set()).discard(event.task)
            case _:
                pass
        match event:
            case QueueStateChanged(state="Open") | QueueDeleted():
                self.closed_by_parent.discard(event.queue)
            case QueueStateChanged(reason=reason) if reason.startswith(lifecycle.CLOSED_WITH_PARENT):
                self.closed_by_parent.add(event.queue)
            case JobSubmitted():
                key = f"{event.spec.namespace}/{event.spec.name}"
                self.stopping.pop(key, None)
                self.round_began.pop(key, None)
                self._forget_tasks(key)
                self.finished.revived(key)
                self.submitted.add(key)
                self.restarting.discard(key)
                if self.suspended.pop(key, None) is None:  # a resumed job keeps its retries
                    self.retries.pop(key, None)
                self.shown.pop(key, None)
                self.ending.pop(key, None)
            case JobDeleted():
                key = f"{event.namespace}/{event.name}"
                self._forget_tasks(key)
                self.submitted.discard(key)
                self.suspended.pop(key, None)
                self.shown.pop(key, None)
                self.stopping.pop(key, None)
                self.round_began.pop(key, None)
                self.ending.pop(key, None)
            case JobPhaseChanged(phase="Restarting"):
                key = f"{event.namespace}/{event.name}"
                self.retries[key] = self.retries.get(key, 0) + 1
                self.restarting.add(key)
                self.round_began[key] = seq
            case JobPhaseChanged(phase="Failing" | "Failed") if lifecycle.counts_a_retry(
                event.phase, event.reason, self.shown.get(f"{event.namespace}/{event.name}", "")
            ):
                key = f"{event.namespace}/{event.name}"
                self.retries[key] = self.retries.get(key, 0) + 1
            case JobPhaseChanged(phase="Aborted", reason=reason) if reason.startswith(SUSPENDED):
                job = self.projection.jobs.get(f"{event.namespace}/{event.name}")
                if job is not None:
                    self.suspended[job.key] = job.spec
            case _:
                pass
        if isinstance(event, JobPhaseChanged):
            key = f"{event.namespace}/{event.name}"
            self.shown[key] = event.phase
            if event.phase == "Failed":
                self.suspended.pop(key, None)  # resumed at maxRetry: failed, nothing to resume
            if event.phase in ENDING:
                self.ending[key] = (event.phase, event.reason)
                self.restarting.discard(key)  # what it was stopping for a restart, it now kills
                self.round_began.pop(key, None)
            else:
                self.ending.pop(key, None)
        if (moved := self.projection.apply(seq, event)) is not None:
            self.shown[moved] = self.projection.jobs[moved].phase  # as its JobPhaseChanged did
            self.ending.pop(moved, None)
        key = job_key(event)
        if key is not None and ended(event) and key not in self.suspended:
            self._ended(key)
        if key in self.restarting and not self.stopping.get(key):
            # the round is over once every pod it stopped is back to Pending (Volcano's
            # Restarting leaves once none terminates): a failure of a pod run since is a new
            # run's, its policy applies and a retry is counted. A failure appended before the
            # `Restarting` (a second pod failing at the same moment as the one restarted at
            # once, with nothing to stop) is still the round's: `round_began`
            self.restarting.discard(key)
            self.stopping.pop(key, None)

    def _stop(self, key: str, pod: str, restart: bool) -> None:
        """`pod` is asked to stop: it is waited for while it holds its node, or, for a restart,
        until it is back to Pending. A pod that finished already (its end read after the
        eviction was asked, replaying the log) is not: it reports nothing more."""
        tasks = self.projection.tasks.get(key, {})
        t = tasks.get(pod)
        if t is not None and (t.status in st.HOLDING or (restart and t.status != st.PENDING)):
            self.stopping.setdefault(key, set()).add(pod)


def job_key(event: Event) -> str | None:
    if isinstance(event, JobSubmitted):
        return f"{event.spec.namespace}/{event.spec.name}"
    ns, name = getattr(event, "namespace", None), getattr(event, "name", None)
    return f"{ns}/{name}" if isinstance(ns, str) and isinstance(name, str) else None


def job_events(flow: Flow, key: str) -> list[Event]:
    """PodGroup phase and SyncJob's terminal phases for one job."""
    job = flow.projection.jobs.get(key)
    if job is None:
        return []
    if key in flow.ending:
        return ending_events(flow, key)
    tasks = flow.projection.tasks.get(key, {})
    if key in flow.restarting and (done := finished_meanwhile(flow, key)):
        return done
    out: list[Event] = scaled_down(flow, key)
    sync = lifecycle.sync_job(job.spec, job.phase, flow.shown.get(key, ""), tasks.values(), key in flow.restarting)
    if sync.running:
        out.append(JobPhaseChanged(namespace=job.spec.namespace, name=job.spec.name, phase="Running",
                                   reason=sync.reason))  # fmt: skip
    if sync.terminal:
        out += terminate(flow, key, sync.terminal, sync.end)
    return out


def finished_meanwhile(flow: Flow, key: str) -> list[Event]:
    """A restart's pods that finished on their own before their eviction landed (a pod
    succeeding as another's failure restarts the job): Volcano's RestartJob kills Succeeded
    pods too (PodRetainPhaseNone), so they go back to Pending with the rest. Left Succeeded,
    nothing answered their eviction: the round never ended, and the failed pod ran again alone,
    outside its gang, failing for ever without a retry counted."""
    ns, name = key.split("/", 1)
    tasks = flow.projection.tasks.get(key, {})
    return [TaskFinished(namespace=ns, name=name, task=pod, node="", exit_code=0, reason="restarted")
            for pod in sorted(flow.stopping.get(key, set()))
            if pod in tasks and tasks[pod].status == st.SUCCEEDED]  # fmt: skip (a failed one: pod_failed's)


SCALED_DOWN = "scaled down"


def scaled_down(flow: Flow, key: str) -> list[Event]:
    """Pods a `JobUpdated` removed that still run are stopped, as Volcano's job controller
    deletes the pods beyond the new replicas; once asked they are Releasing, so asking again
    gives nothing."""
    leaving = flow.projection.leaving.get(key)
    if not leaving:
        return []
    ns, name = key.split("/", 1)
    tasks = flow.projection.tasks.get(key, {})
    return [EvictionRequested(namespace=ns, name=name, task=pod, reason=SCALED_DOWN)
            for pod in sorted(leaving) if tasks[pod].status in LIVE_TASK]  # fmt: skip


def terminate(flow: Flow, key: str, phase: str, reason: str) -> list[Event]:
    """The job ends in `phase`, its unfinished pods stopped. One that still has pods holding
    their nodes (maxRetry spent while the others run, minSuccess reached) ends through
    `Failing` / `Completing` until they are gone: ended at once, it left the projection the
    scheduler places from, which then saw their nodes free while they ran on — a pod bound
    there met the kubelet's OutOfcpu (and its job's PodFailed policies)."""
    job = flow.projection.jobs[key]
    ns, name = job.spec.namespace, job.spec.name
    tasks = flow.projection.tasks.get(key, {})
    out: list[Event] = [
        EvictionRequested(namespace=ns, name=name, task=pod, reason=f"job {phase}: {reason}")
        for pod, t in tasks.items()
        if t.status in LIVE_TASK
    ]
    if phase in FINISHING and any(t.status in st.HOLDING for t in tasks.values()):
        return [JobPhaseChanged(namespace=ns, name=name, phase=FINISHING[phase], reason=reason), *out]
    out.append(JobPhaseChanged(namespace=ns, name=name, phase=phase, reason=reason))
    return out


def end_job(flow: Flow, key: str, action: str, reason: str) -> list[Event]:
    """TerminateJob / CompleteJob: `Terminating` / `Completing` and an eviction for every
    unfinished pod; ended at once when none runs (Volcano's next sync would find none)."""
    job = flow.projection.jobs[key]
    ns, name = job.spec.namespace, job.spec.name
    phase = ENDING_ACTIONS[action]
    tasks = flow.projection.tasks.get(key, {})
    live = [pod for pod, t in tasks.items() if t.status in LIVE_TASK]
    out: list[Event] = [JobPhaseChanged(namespace=ns, name=name, phase=phase, reason=reason)]
    out += [EvictionRequested(namespace=ns, name=name, task=pod, reason=f"job {phase}: {reason}") for pod in live]
    if not any(t.status in st.HOLDING for t in tasks.values()):  # a pod evicted before still runs
        out.append(JobPhaseChanged(namespace=ns, name=name, phase=ENDING[phase], reason=reason))
    return out


def ending_events(flow: Flow, key: str) -> list[Event]:
    """A Terminating/Completing job: a pod placed since (a proposal answered late) is evicted
    too; once none runs and none is still being stopped, the job ends."""
    job = flow.projection.jobs[key]
    ns, name = job.spec.namespace, job.spec.name
    phase, reason = flow.ending[key]
    stopping = flow.stopping.get(key, set())
    tasks = flow.projection.tasks.get(key, {})
    live = [pod for pod, t in tasks.items() if t.status in LIVE_TASK]
    if stopping or any(t.status in st.HOLDING for t in tasks.values()):  # also one evicted before, not gone yet
        return [EvictionRequested(namespace=ns, name=name, task=pod, reason=f"job {phase}: {reason}")
                for pod in live if pod not in stopping]  # fmt: skip
    out: list[Event] = [JobPhaseChanged(namespace=ns, name=name, phase=ENDING[phase],
                                        reason=f"{reason}; no unfinished pod left")]  # fmt: skip
    if phase == "Aborting" and RESUME_ASKED in reason:  # resumed while it was being suspended
        out += resumed(flow, key, job.spec)
    return out


RESUME = "ResumeJob"


def resumed(flow: Flow, key: str, spec: JobSpec) -> list[Event]:
    """A suspended job resumed: Volcano's aborted and aborting states answer ResumeJob as a
    restart — Restarting with the retry count one up, Failed once that reaches maxRetry
    (`state/restarting.go`). Submitted again with its count forgotten, a job suspended and
    resumed over and over ran for ever on `maxRetry` restarts."""
    ns, name = key.split("/", 1)
    retry = flow.retries.get(key, 0)
    count = f"retry {retry + 1}/{spec.max_retry}"
    if lifecycle.restart_phase(spec, retry) == "Failed":
        return [JobPhaseChanged(namespace=ns, name=name, phase="Failed", reason=f"{RESUME}: {count}, maxRetry reached")]
    return [JobSubmitted(spec=spec), JobPhaseChanged(namespace=ns, name=name, phase="Restarting",
                                                     reason=f"{RESUME}: {count}")]  # fmt: skip


def restart_job(flow: Flow, key: str, targets: list[str], action: str, exit_code: int, why: str) -> list[Event]:
    """Stop `targets` (live ones evicted, finished ones straight back to Pending) and go
    Restarting with the retry count one up — or Failed once the job has used maxRetry
    restarts (`lifecycle.restart_phase`, the rule a policy-driven restart follows)."""
    job = flow.projection.jobs[key]
    ns, name = job.spec.namespace, job.spec.name
    retry = flow.retries.get(key, 0)
    if lifecycle.restart_phase(job.spec, retry) == "Failed":
        return terminate(flow, key, "Failed", f"{action} {why}")
    tasks = flow.projection.tasks.get(key, {})
    out: list[Event] = []
    for pod in targets:
        t = tasks.get(pod)
        if t is None:
            continue
        if t.status in LIVE_TASK:
            out.append(EvictionRequested(namespace=ns, name=name, task=pod, reason="restarted"))
        elif t.status in (st.FAILED, st.SUCCEEDED):  # Volcano kills them all (PodRetainPhaseNone): they run again
            out.append(TaskFinished(namespace=ns, name=name, task=pod, node="",
                                    exit_code=exit_code, reason="restarted"))  # fmt: skip
    out.append(JobPhaseChanged(namespace=ns, name=name, phase="Restarting",
                               reason=f"{action}: retry {retry + 1}/{job.spec.max_retry}"))  # fmt: skip
    return out


def pod_failed(flow: Flow, event: TaskFinished, seq: int) -> list[Event]:
    """Volcano's lifecycle policies for a pod that failed on its own (exit ≠ 0, node lost), or
    was deleted from the API server while it held its node (PodEvicted, issue 28).

    Edge-triggered, unlike the rest: it acts only if the failure at `seq` is still the pod's
    latest event. A failure delivered again after the job was restarted for it (a restart of
    this service, a new durable consumer, long after the duplicate window) would otherwise
    restart the job a second time and spend another retry."""
    key = f"{event.namespace}/{event.name}"
    job = flow.projection.jobs.get(key)
    if job is None or event.exit_code == 0 or event.reason in STOPPED_BY_SYSTEM:
        return []
    if flow.task_seq.get((key, event.task)) != seq:
        return []
    if key in flow.ending:
        # a pod the job's end is killing reports its kill (a deleted pod exits -1): stopped,
        # not failed; one that failed on its own meanwhile (no kill's reason: `Flow.apply`
        # counted it stopped) is a finished pod, kept as it is
        if event.task not in flow.stopping.get(key, set()):
            return []
        return [TaskFinished(namespace=event.namespace, name=event.name, task=event.task, node="",
                             exit_code=event.exit_code, reason="evicted")]  # fmt: skip
    if key in flow.restarting or seq < flow.round_began.get(key, 0):
        # Volcano's Restarting state waits for its pods to stop: a pod failing meanwhile is one
        # of those it is stopping anyway — back to Pending with it, no second restart. So is
        # one whose failure the log holds before the round began (pods failing together: the
        # first one's restart is decided before the second one's failure is read)
        return [TaskFinished(namespace=event.namespace, name=event.name, task=event.task, node="",
                             exit_code=event.exit_code, reason="restarted")]  # fmt: skip
    spec = next((t for p, _, _, t in st.task_names(job.spec) if p == event.task), None)
    # a pod on a lost node is evicted on a cluster (the taint manager deletes it, and
    # Volcano's job controller answers PodEvicted: made again without a policy); as PodFailed
    # it was never made again and the job ended Failed on the simulated cluster
    cause = "PodEvicted" if event.reason in (st.POD_DELETED, st.NODE_LOST) else "PodFailed"
    if cause == "PodEvicted" and job.spec.kind != "Job":
        return []  # nobody makes it again: a Pod's deletion ends its job, a member leaves its PodGroup
    decision = lifecycle.on_pod_failed(job.spec, spec, event.exit_code, flow.retries.get(key, 0), cause)
    if cause == "PodEvicted" and decision.action == "SyncJob":  # made again, same retry count
        return [TaskFinished(namespace=event.namespace, name=event.name, task=event.task, node="",
                             exit_code=event.exit_code, reason="evicted")]  # fmt: skip
    return _decided(flow, key, decision, spec, event, cause)


def task_completed(flow: Flow, event: TaskFinished, seq: int) -> list[Event]:
    """Volcano's `TaskCompleted`: the pod whose success made every pod of its task Succeeded
    raises it (`job_controller_handler.go` updatePod, `TaskCompleted` of the job cache), and the
    task's then the job's policies answer it (`*` too) — Volcano's MPI example ends its job
    with `mpimaster: TaskCompleted → CompleteJob` while its workers' sshd runs on; never raised,
    such a job ran for ever. Edge-triggered on the pod's latest event, as `pod_failed` is."""
    key = f"{event.namespace}/{event.name}"
    job = flow.projection.jobs.get(key)
    if job is None or event.exit_code != 0 or event.reason in STOPPED_BY_SYSTEM:
        return []
    if flow.task_seq.get((key, event.task)) != seq or key in flow.ending or key in flow.restarting:
        return []
    spec = next((t for p, _, _, t in st.task_names(job.spec) if p == event.task), None)
    if not lifecycle.task_completed(job.spec, spec, flow.projection.tasks.get(key, {}).values()):
        return []
    decision = lifecycle.on_pod_failed(job.spec, spec, 0, flow.retries.get(key, 0), "TaskCompleted")
    return _decided(flow, key, decision, spec, event, "TaskCompleted")


def _decided(flow: Flow, key: str, decision: lifecycle.PolicyDecision, spec: TaskSpec | None,
             event: TaskFinished, cause: str) -> list[Event]:  # fmt: skip
    """The events of a policy's action on `event` (a pod's failure, eviction or its task's
    completion): the restart it asks for, the job's end, or nothing (SyncJob)."""
    if decision.phase in ("Restarting", "Failed") and decision.action in lifecycle.RESTARTS:
        targets = lifecycle.restart_targets(decision.action, event.task, spec, flow.projection.tasks.get(key, {}))
        return restart_job(flow, key, targets, decision.action, event.exit_code, f"on {cause}")
    if decision.action in ENDING_ACTIONS:
        return end_job(flow, key, decision.action, f"{decision.action} on {cause}")
    if decision.phase:
        return terminate(flow, key, decision.phase, f"{decision.action} on {cause}")
    return []


def queue_events(flow: Flow) -> list[Event]:
    """Closing queues without live PodGroups become Closed; the tree follows its closed or
    reopened queues (`lifecycle.queue_tree`: a queue made under a closed parent closes too)."""
    queues = flow.projection.queues
    if all(q.state == "Open" for q in queues.values()):
        return []  # the common case, checked after every event: no walk over the jobs
    if not any(q.state == "Closing" for q in queues.values()) and not any(map(partial(_off_tree, flow), queues)):
        return []  # a closed queue stays so: no walk over the jobs after every event either
    live = podgroups(flow)
    out: list[Event] = tree_events(flow, {}, live)
    return out + [
        QueueStateChanged(queue=name, state="Closed", reason="no PodGroups left")
        for name, q in sorted(flow.projection.queues.items())
        if lifecycle.sync_queue(q.state, live.get(name, 0)) != q.state
    ]


def _off_tree(flow: Flow, name: str) -> bool:
    """Whether a queue is not as its parent has it: Open under a closed parent, or closed with
    its parent while the parent is Open."""
    queues = flow.projection.queues
    q = queues[name]
    up = queues.get(lifecycle.parent_of(name, q.spec.parent))
    if up is None:
        return False
    if q.state == "Open":
        return up.state != "Open"
    return name in flow.closed_by_parent and up.state == "Open"


def podgroups(flow: Flow) -> dict[str, int]:
    """Queue → its live jobs (PodGroups)."""
    live: dict[str, int] = {}
    for job in flow.projection.jobs.values():
        live[job.spec.queue] = live.get(job.spec.queue, 0) + 1
    return live


def tree_events(flow: Flow, changed: dict[str, str], live: dict[str, int]) -> list[Event]:
    """The queue tree's answer to `changed` (queue → the state a command gives it)."""
    queues = flow.projection.queues
    states = {name: q.state for name, q in queues.items()} | changed
    parents = {name: q.spec.parent for name, q in queues.items()}
    marked = flow.closed_by_parent - set(changed)  # a queue a user closes or opens is theirs
    return [QueueStateChanged(queue=q, state=state, reason=why)
            for q, state, why in lifecycle.queue_tree(states, parents, marked, live)]  # fmt: skip


# --- commands (vcctl queue open/close; job suspend/resume/restart/terminate/complete/delete) ---

UNDELETABLE_QUEUES = lifecycle.UNDELETABLE_QUEUES


class Refused(Exception):
    """A command that does not apply to the object's current state; the message says why."""


def command(flow: Flow, action: str, namespace: str, name: str, kind: str = "", uid: str = "") -> list[Event]:
    """A command judged on the log's state. `uid` (the job controller's object-deleted): the
    Job object it saw gone — a live job admitted from another object under the name (deleted
    and made again, the log read ahead of the controller's own) is not the one to end."""
    proj = flow.projection
    if kind == "queue" and action == "delete":
        return delete_queue(flow, name)
    if action in ("open", "close"):
        q = proj.queues.get(name)
        if q is None:
            raise Refused(f"queue {name!r} does not exist")
        counts = podgroups(flow)
        if action == "open":
            if q.state == "Open":
                raise Refused(f"queue {name} is already Open")
            parent = lifecycle.parent_of(name, q.spec.parent)
            up = proj.queues.get(parent)
            if parent != "root" and up is not None and up.state != "Open":
                # Volcano's openHierarchicalQueue: a child opened under a closed parent took
                # jobs the parent was closed to keep out
                raise Refused(f"queue {name} can not be opened: its parent queue {parent} is {up.state}; "
                              "open the parent queue first")  # fmt: skip
            opened: list[Event] = [QueueStateChanged(queue=name, state="Open", reason="opened by user")]
            return opened + tree_events(flow, {name: "Open"}, counts)
        if name == "root":
            raise Refused("the root queue cannot be closed")
        live = counts.get(name, 0)
        state = lifecycle.close_queue(q.state, live)
        if state == q.state:
            raise Refused(f"queue {name} is already {q.state}")
        why = f"closed by user; {live} PodGroup(s) still in it" if live else "closed by user"
        # its open descendants close with it, as Volcano's closeHierarchicalQueue closes every
        # open child: left Open, they went on taking jobs under a closed parent
        closed: list[Event] = [QueueStateChanged(queue=name, state=state, reason=why)]
        return closed + tree_events(flow, {name: state}, counts)
    key = f"{namespace}/{name}"
    if action == "suspend":
        if key not in proj.jobs:
            raise Refused(f"job {key} is not live (nothing to suspend)")
        if key in flow.ending:  # (Volcano's completing/terminating states take no other action)
            raise Refused(f"job {key} is {flow.ending[key][0]} already: AbortJob does not apply")
        # Aborting while its pods are stopped (they hold their nodes until they are gone), then
        # Aborted, as Volcano's `state/aborting.go`; Aborted at once, its nodes looked free
        # to the scheduler while its pods still ran
        return end_job(flow, key, "AbortJob", SUSPENDED)
    if action == "resume":
        ending = flow.ending.get(key)
        if ending is not None and ending[0] == "Aborting" and ending[1].startswith(SUSPENDED):
            # resumed while its pods are being stopped (`vcctl job suspend; vcctl job resume`;
            # Volcano's aborting state takes ResumeJob): said in the log, it runs again once
            # they are gone — submitted at once, its stopping pods' nodes looked free
            if RESUME_ASKED in ending[1]:
                raise Refused(f"job {key} is resumed already: it runs again once its pods stopped")
            ns, name = key.split("/", 1)
            return [JobPhaseChanged(namespace=ns, name=name, phase="Aborting", reason=f"{ending[1]}; {RESUME_ASKED}")]
        spec = flow.suspended.get(key)
        if spec is None:
            raise Refused(f"job {key} is not suspended")
        return resumed(flow, key, spec)
    if action == "delete":
        # a pod's name is a job's only for a plain pod: `delete pod` of a name that is a Volcano
        # Job's deleted the whole Job (a mistyped or tab-completed pod name ended a training)
        live = proj.jobs.get(key)
        spec = live.spec if live is not None else flow.suspended.get(key)
        if key in flow.submitted and (kind != "pod" or spec is None or spec.kind == "Pod"):
            return [JobDeleted(namespace=namespace, name=name)]
        if kind == "pod" and (owner := pod_owner(flow, namespace, name)) is not None:
            return delete_job_pod(flow, owner, name)
        raise Refused(f"job {key} not found")
    if action in JOB_ACTIONS:
        return job_action(flow, key, JOB_ACTIONS[action])
    if action == OBJECT_DELETED:
        if key not in proj.jobs or key in flow.ending:
            raise Refused(f"job {key} is not live, or ends already")
        now = proj.jobs[key].spec.annotations.get(OBJECT_UID, "")
        if uid and now and now != uid:
            raise Refused(f"job {key} is another Job object now (uid {now}, not {uid})")
        return end_job(flow, key, "TerminateJob", "its Volcano Job object was deleted")
    raise Refused(f"unknown action {action!r}")


def pod_owner(flow: Flow, namespace: str, pod: str) -> str | None:
    """The live Volcano Job ("ns/job") whose pod `pod` is, by Volcano's pod name
    `<job>-<task>-<index>`: each prefix of the name ending before a dash is tried as the job
    (names hold dashes), so the lookup costs the dashes, not the jobs."""
    cut = pod.find("-")
    while cut > 0:
        key = f"{namespace}/{pod[:cut]}"
        job = flow.projection.jobs.get(key)
        if job is not None and job.spec.kind == "Job" and pod in flow.projection.tasks.get(key, {}):
            return key
        cut = pod.find("-", cut + 1)
    return None


def delete_job_pod(flow: Flow, key: str, pod: str) -> list[Event]:
    """`tessera delete pod` of a Volcano Job's pod, as `kubectl delete pod` does it there: the
    pod is stopped and gone, and Volcano's job controller answers PodEvicted — the Job's
    PodEvicted policy if it has one, else SyncJob makes the pod again (`pod_failed`, once the
    node reports it stopped as a deleted pod). A pod not placed yet is made again at once:
    nothing changes. A finished pod, or one being stopped already, is refused saying why."""
    ns, name = key.split("/", 1)
    if key in flow.ending:
        raise Refused(f"pod {ns}/{pod} is being stopped already: its Volcano Job {key} is "
                      f"{flow.ending[key][0]}")  # fmt: skip
    task = flow.projection.tasks[key][pod]
    if task.status in LIVE_TASK:
        return [EvictionRequested(namespace=ns, name=name, task=pod, reason=st.POD_DELETED)]
    if task.status == st.RELEASING or pod in flow.stopping.get(key, set()):
        raise Refused(f"pod {ns}/{pod} is being stopped already (its Volcano Job {key} "
                      f"{'restarts' if key in flow.restarting else 'evicted it'})")  # fmt: skip
    if task.status in (st.SUCCEEDED, st.FAILED):
        raise Refused(f"pod {ns}/{pod} has finished ({task.status}): Tessera keeps a finished pod "
                      f"as its Volcano Job's record while the Job lives (`tessera delete job {name}` "
                      f"deletes both; `tessera job restart {name}` runs its pods again)")  # fmt: skip
    return []  # not placed: Volcano's controller makes it again at once, as it is


def pod_deleted(namespace: str, pod: str, events: list[Event]) -> str:
    """The answer to `tessera delete pod`, in kubectl's words for the deletion and, for a
    Volcano Job's pod, what its job controller does next (a user who saw it listed Running
    must not think it is gone for good, nor wonder why it is back)."""
    done = f"pod {namespace}/{pod} deleted"
    if any(isinstance(e, JobDeleted) for e in events):
        return done  # a plain pod: its job is the pod
    job = next((e.name for e in events if isinstance(e, EvictionRequested)), "")
    if job:
        return (f"{done}; its Volcano Job {namespace}/{job} answers PodEvicted once it has stopped "
                "(the Job's PodEvicted policy, else the pod is made again)")  # fmt: skip
    return f"{done}; it was not placed yet: its Volcano Job makes it again at once (Pending)"


#: the job controller's: the job's Volcano Job is gone from the API server while its pods run
#: on until their kubelets confirm. The job ends (Terminating, then Terminated once no pod is
#: left) so nothing is placed for it meanwhile; its `JobDeleted` follows the last pod.
OBJECT_DELETED = "object-deleted"


#: `tessera job restart|terminate|complete` → Volcano's action (what a bus Command names)
JOB_ACTIONS = {"restart": "RestartJob", "terminate": "TerminateJob", "complete": "CompleteJob"}


def job_action(flow: Flow, key: str, action: str) -> list[Event]:
    """RestartJob, TerminateJob or CompleteJob asked for by a user (vcctl's Command): the very
    events the lifecycle policies append, refused with why when the job's state has no such
    transition (Volcano's terminal states take no action; Restarting and the ending phases
    are on their way already)."""
    if key not in flow.projection.jobs:
        shown = flow.shown.get(key)
        if shown:
            raise Refused(f"job {key} is {shown}: {action} does not apply to a job that ended")
        raise Refused(f"job {key} not found")
    if key in flow.ending:
        raise Refused(f"job {key} is {flow.ending[key][0]} already: {action} does not apply")
    if key in flow.restarting and flow.stopping.get(key):
        raise Refused(f"job {key} is Restarting already: {action} waits until its pods stopped")
    if action == "RestartJob":
        return restart_job(flow, key, list(flow.projection.tasks.get(key, {})), action, 0, "requested by user")
    return end_job(flow, key, action, f"{action} requested by user")


def delete_queue(flow: Flow, name: str) -> list[Event]:
    """Volcano's queue webhook: not `default`/`root`, not while it holds jobs (PodGroups) or
    has child queues."""
    proj = flow.projection
    if name not in proj.queues:
        raise Refused(f"queue {name!r} does not exist")
    if name in UNDELETABLE_QUEUES:
        raise Refused(f"queue `{name}` can not be deleted: {UNDELETABLE_QUEUES[name]}")
    jobs = sorted(k for k, j in proj.jobs.items() if j.spec.queue == name)
    if jobs:
        shown = ", ".join(jobs[:3]) + (", …" if len(jobs) > 3 else "")
        raise Refused(f"queue {name} can not be deleted: it has {len(jobs)} job(s) ({shown}); "
                      "delete them first")  # fmt: skip
    children = sorted(q for q, s in proj.queues.items() if s.spec.parent == name)
    if children:
        raise Refused(f"queue {name} can not be deleted: it has child queues ({', '.join(children)})")
    return [QueueDeleted(queue=name, reason="deleted by user")]
