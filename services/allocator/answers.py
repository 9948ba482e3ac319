"""Which proposals the log has already answered, and which releases are stale — from the log.

JetStream forgets message ids after its duplicate window (two minutes), so a proposal
redelivered later (an allocator killed between its durable commit and its ack, a new durable
consumer replaying an old system) would be committed a second time once the pod had finished
and its slices were free: the pod runs twice (issue 12 item 1). This projection of the job
subjects is what recognises such a proposal instead (DESIGN §4 "idempotency comes from the
log"). A proposal at sequence `p` of a job is

* **answered** when a `PlacementCommitted` / `PlacementRejected` with `proposal_seq == p` exists;
* **stale** when a later proposal of the job was answered, or the job was deleted, ended or
  updated (`JobUpdated`: the pods it names may be gone) after it: it must not be committed, and is answered with a rejection (the scheduler re-plans);
* **open** otherwise: the ledgers decide.

A cardless proposal (cpu, memory, other extended resources only) books no slice, so the ledgers
cannot tell that its tasks are placed already: the log can. Each task's last commit (and node)
and its last end (`TaskFinished`, `BindingFailed`) say whether it holds a node now
(`placed_on`); a proposal of a task placed there already is a duplicate, one placed elsewhere a
conflict — never the vacuous "every slice booked" of a proposal with no slices (issue 27).
A restarted allocator folds the job subjects only from above its ack floor (`since`), but a
proposal's own snapshot (`based_on`) already showed every commit before it — the scheduler
proposes only tasks its view has waiting — so what it may not have seen lies after `based_on`:
`history_needed` names the part of one job's subject to read first, once.

Releases have the same hazard the other way round: a `TaskFinished` or `JobDeleted` delivered
again after the task was placed anew would free the new run's slices. A release at sequence `s`
applies only to a task whose last commit is older than `s`.

Pure: `apply(seq, event)` folds, the queries read; the allocator's shell feeds it from a bounded
scan at start (the job subjects above its consumer's ack floor) and from its consumer.

Bounded like every service's memory of finished jobs (`services/core/retention.py`): a job is
forgotten once `keep` other jobs ended after it. Forgetting is safe because every answer is
appended with the job subject's expected last sequence: a proposal of a forgotten job redelivered
later looks open, its commit meets a subject that moved on (the answer or the ending came after
it), and the allocator reads the subject from the proposal on (`_catch_up`), learning again that
it is answered or stale. A release of a forgotten job applies, which frees nothing its own run
still holds (a newer run of the name records its commit anew, and older releases stay stale).
A forgotten job that shows up again without a commit (a late `TaskFinished` of the ended run) is
presumed ended straight away, so it is not kept for ever; a commit makes it live again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.base import Event
from contracts.events import (
    BindingFailed,
    JobDeleted,
    JobPhaseChanged,
    JobUpdated,
    PlacementCommitted,
    PlacementRejected,
    TaskFinished,
)
from services.core.retention import DEFAULT_KEEP_FINISHED, FinishedOrder, ended

#: Event types this projection folds (the shell decodes only these while scanning).
FOLDED = frozenset(
    cls.type_name()
    for cls in (PlacementCommitted, PlacementRejected, JobDeleted, JobPhaseChanged, JobUpdated,
                TaskFinished, BindingFailed)
)

#: at least this many forgotten job names are remembered (`Answers.forgotten`)
TOMBSTONES = 1000

OPEN = "open"
ANSWERED = "answered"


@dataclass(slots=True)
class JobAnswers:
    last_seq: int = 0  # last sequence seen on the job subject (the expectation for an answer)
    floor: int = 0  # proposals below this are stale
    why: str = ""  # what set the floor
    answered: set[int] = field(default_factory=set)
    placed: dict[str, int] = field(default_factory=dict)  # task -> sequence of its last commit
    nodes: dict[str, str] = field(default_factory=dict)  # task -> node of its last commit
    finished: dict[str, int] = field(default_factory=dict)  # task -> sequence of its last end
    ended_at: int = 0  # sequence of its latest ending
    known_from: int = 1  # its subject is folded from here on (a restart scans from the ack floor)


Key = tuple[str, str]


class Answers:
    def __init__(self, keep: int = DEFAULT_KEEP_FINISHED) -> None:
        self.jobs: dict[Key, JobAnswers] = {}
        self.order: FinishedOrder[Key] = FinishedOrder(keep)
        #: jobs forgotten lately (names only, so many more of them): seen again, they are
        #: presumed ended — late messages of an ended run come within a few other endings
        self.forgotten: FinishedOrder[Key] = FinishedOrder(max(10 * keep, TOMBSTONES))
        #: the job subjects are folded from this sequence on (the recovery scan's start)
        self.since = 1

    def _job(self, namespace: str, name: str) -> JobAnswers:
        key = (namespace, name)
        job = self.jobs.get(key)
        if job is None:
            job = self.jobs[key] = JobAnswers(known_from=self.since)
            if key in self.forgotten.order:
                self._ended(key)
        return job

    def _ended(self, key: Key) -> None:
        for old in self.order.finished(key):
            self.jobs.pop(old, None)
            self.forgotten.finished(old)

    def _live(self, key: Key) -> None:
        self.order.revived(key)
        self.forgotten.revived(key)

    def seen(self, namespace: str, name: str, seq: int) -> None:
        """A message of any type on the job's subject."""
        job = self._job(namespace, name)
        job.last_seq = max(job.last_seq, seq)

    def apply(self, seq: int, event: Event) -> None:
        """Fold one job-subject event (any type; only answers and endings change anything)."""
        ns, name = getattr(event, "namespace", None), getattr(event, "name", None)
        if not isinstance(ns, str) or not isinstance(name, str):
            return
        job = self._job(ns, name)
        job.last_seq = max(job.last_seq, seq)
        if isinstance(event, PlacementCommitted) and seq > job.ended_at:  # a late fold revives nothing
            self._live((ns, name))
        match event:
            case PlacementCommitted() | PlacementRejected():
                job.answered.add(event.proposal_seq)
                if event.proposal_seq > job.floor:
                    job.floor = event.proposal_seq
                    job.why = f"proposal #{event.proposal_seq} of the job was answered after it"
                if isinstance(event, PlacementCommitted):
                    for p in event.placements:
                        if seq >= job.placed.get(p.task, 0):
                            job.placed[p.task] = seq
                            job.nodes[p.task] = p.node
            case TaskFinished() | BindingFailed():
                job.finished[event.task] = max(job.finished.get(event.task, 0), seq)
            case JobUpdated() if seq > job.floor:
                # its pods changed (a removed one must not be bound): the scheduler re-plans
                job.floor, job.why = seq, f"the job was updated (#{seq}): {event.reason}"
            case _:
                why = ended(event)
                if why and seq > job.floor:
                    job.floor, job.why = seq, f"{why} (#{seq})"
                if why and seq > job.ended_at:
                    job.ended_at = seq
                    self._ended((ns, name))

    # --- queries -------------------------------------------------------------------------------

    def verdict(self, namespace: str, name: str, proposal_seq: int) -> str:
        """OPEN, ANSWERED, or the reason the proposal is stale."""
        job = self.jobs.get((namespace, name))
        if job is None:
            return OPEN
        if proposal_seq in job.answered:
            return ANSWERED
        if proposal_seq < job.floor:
            return f"stale proposal #{proposal_seq}: {job.why}"
        return OPEN

    def expected_seq(self, namespace: str, name: str, proposal_seq: int) -> int:
        """The job subject's last sequence as far as we know, for the answer's OCC check: if
        anything landed on the job since (an answer by another allocator, a deletion), the
        commit fails and the allocator reads what it missed."""
        job = self.jobs.get((namespace, name))
        return max(job.last_seq if job else 0, proposal_seq)

    def history_needed(self, namespace: str, name: str, based_on: int) -> int:
        """Where to read the job's subject from before judging a proposal made on the snapshot
        at `based_on`, or 0 when everything after it is folded already."""
        job = self._job(namespace, name)
        start = based_on + 1
        return start if start < job.known_from else 0

    def known(self, namespace: str, name: str, start: int) -> None:
        """The job's subject was read from `start`."""
        job = self._job(namespace, name)
        job.known_from = min(job.known_from, start)

    def placed_on(self, namespace: str, name: str, task: str) -> str | None:
        """The node the log has the task committed to and not ended since, else None."""
        job = self.jobs.get((namespace, name))
        at = job.placed.get(task, 0) if job is not None else 0
        if job is None or not at or job.ended_at > at or job.finished.get(task, 0) > at:
            return None
        return job.nodes.get(task)

    def release_applies(self, namespace: str, name: str, task: str, seq: int) -> bool:
        """Whether a release at `seq` is about the task's current run (not an older one)."""
        job = self.jobs.get((namespace, name))
        return job is None or job.placed.get(task, 0) < seq
