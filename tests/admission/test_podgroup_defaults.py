"""What Volcano's PodGroup webhooks leave to a PodGroup that `tessera apply` (and the pod
source) admits: a `priorityClassName` naming no PriorityClass is no refusal (the job runs at
the default priority and takes the class's value once it is created), a PodGroup made without
`spec.queue` lands in its namespace's `scheduling.volcano.sh/queue-name` queue, and an edit of
a live PodGroup's queue moves the job (Volcano's scheduler cache re-reads `spec.queue`)."""

from __future__ import annotations

from contracts.api import ACCEPTED, CONFIGURED, REJECTED, UNCHANGED
from contracts.events import JobSubmitted, JobUpdated
from services.runtime.eventlog import EventLog
from tests.admission.test_admission import QUEUE, events_of, started

GROUP = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pl, namespace: ml}
spec: {minMember: 2, minResources: {cpu: "4"}, priorityClassName: later}
"""

CLASS = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: later}
value: 1000
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: lone, namespace: ml}
spec:
  priorityClassName: later
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


async def test_a_podgroup_naming_a_missing_priority_class_runs_at_the_default_and_takes_it_later(
    event_log: EventLog,
) -> None:
    svc = await started(event_log)
    reply = await svc.apply(GROUP)
    [result] = reply.results
    assert result.outcome == ACCEPTED
    assert result.warnings == ("spec.priorityClassName: no PriorityClass with this name: the PodGroup is "
                               "admitted at the default priority (0), as Volcano's scheduler takes it, and "
                               "takes the class's value once the class is created (value: later)",)  # fmt: skip
    [submitted] = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert (submitted.spec.priority, submitted.spec.priority_class) == (0, "later")
    # a pod naming it is still refused: the API server's Priority admission refuses it
    pod = await svc.apply(POD)
    assert pod.results[0].outcome == REJECTED
    assert pod.results[0].reasons == ("spec.priorityClassName: no PriorityClass with this name (value: later)",)
    # the class appears: the group takes its value (nothing else touches an operator's group)
    created = await svc.apply(CLASS)
    assert [(r.kind, r.name, r.outcome) for r in created.results] == [
        ("PriorityClass", "later", ACCEPTED), ("PodGroup", "pl", CONFIGURED)]  # fmt: skip
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and (update.namespace, update.name) == ("ml", "pl")
    assert (update.spec.priority, update.spec.priority_class) == (1000, "later")
    assert update.reason.startswith("priority 0 → 1000: its PriorityClass later was created")
    assert created.results[1].warnings == (update.reason,)
    restarted = await started(event_log)  # the same group judged again: as the log has it now
    again = await restarted.apply(GROUP)
    assert [(r.outcome, r.warnings) for r in again.results] == [(UNCHANGED, ())]
    assert (await restarted.apply(CLASS)).results[0].outcome == UNCHANGED


NAMESPACE = """
apiVersion: v1
kind: Namespace
metadata: {name: ml, annotations: {scheduling.volcano.sh/queue-name: team-a}}
"""

NO_QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: ray, namespace: ml}
spec: {minMember: 2, minResources: {cpu: "4"}}
"""

PLAIN = """
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: ml}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""

VCJOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vj, namespace: ml}
spec:
  minAvailable: 1
  tasks:
    - name: w
      replicas: 1
      template:
        spec:
          containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


async def test_a_podgroup_without_a_queue_lands_in_its_namespaces_queue(event_log: EventLog) -> None:
    """Volcano's PodGroup mutating webhook (`createPodGroupPatch`) writes the namespace's
    annotation into an empty `spec.queue`; a plain pod's implied group is made by Volcano's
    podgroup controller without a queue, so goes there too; a Volcano Job's own webhook writes
    `default` (no lookup), which its PodGroup then carries."""
    svc = await started(event_log)
    reply = await svc.apply(QUEUE + "---" + NAMESPACE + "---" + NO_QUEUE + "---" + PLAIN + "---" + VCJOB)
    assert [r.outcome for r in reply.results] == [ACCEPTED] * 5, reply.results
    queues = {e.spec.name: e.spec.queue for e in await events_of(event_log) if isinstance(e, JobSubmitted)}
    assert queues == {"ray": "team-a", "solo": "team-a", "vj": "default"}
    # the annotation changes later: the live group stays where the webhook put it at create,
    # and an edit of it (minMember) is taken without moving it
    await svc.apply(NAMESPACE.replace("team-a", "team-b"))
    edited = await svc.apply(NO_QUEUE.replace("minMember: 2", "minMember: 3"))
    assert [(r.outcome, r.reasons) for r in edited.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and update.spec.queue == "team-a" and update.spec.min_available == 3
    # a new group made there now goes to team-b, which does not exist: refused, naming the queue
    other = await svc.apply(NO_QUEUE.replace("name: ray", "name: ray2"))
    assert other.results[0].outcome == REJECTED
    assert other.results[0].reasons[0].startswith("spec.queue (unset: namespace ml's annotation "
                                                  "scheduling.volcano.sh/queue-name): queue does not exist")


async def test_a_namespace_without_the_annotation_leaves_default(event_log: EventLog) -> None:
    svc = await started(event_log)
    reply = await svc.apply(NAMESPACE.replace("annotations", "labels").replace(
        "scheduling.volcano.sh/queue-name", "team") + "---" + NO_QUEUE)  # fmt: skip
    assert [r.outcome for r in reply.results] == [ACCEPTED, ACCEPTED]
    [submitted] = [e for e in await events_of(event_log) if isinstance(e, JobSubmitted)]
    assert submitted.spec.queue == "default"


SMALL_BIG = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: small}
spec: {capability: {cpu: "2"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: big}
spec: {weight: 1}
"""

IN_SMALL = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pj, namespace: ml}
spec: {minMember: 2, queue: small, minResources: {cpu: "4"}}
"""


async def test_editing_a_podgroups_queue_moves_it(event_log: EventLog) -> None:
    """No Volcano webhook judges a PodGroup update and its scheduler cache re-reads
    `spec.queue`: the edit moves the job. One to a queue it cannot be in is not taken, the
    rest of the same edit is, and the warning says both."""
    svc = await started(event_log)
    await svc.apply(SMALL_BIG + "---" + IN_SMALL)
    moved = await svc.apply(IN_SMALL.replace("queue: small", "queue: big"))
    assert [(r.outcome, r.reasons) for r in moved.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and update.spec.queue == "big"
    assert update.reason == "queue small → big"
    nowhere = await svc.apply(IN_SMALL.replace("queue: small", "queue: nowhere").replace("minMember: 2", "minMember: 3"))
    [result] = nowhere.results
    assert result.outcome == CONFIGURED
    assert result.warnings[0].startswith("spec.queue: queue does not exist")
    assert result.warnings[0].endswith("this change of the queue is not taken (the PodGroup stays in the "
                                       "queue it is in); the rest of the edit is (value: nowhere)")  # fmt: skip
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and (update.spec.queue, update.spec.min_available) == ("big", 3)


async def test_a_podgroup_whose_queue_is_default_lands_in_its_namespaces_queue(event_log: EventLog) -> None:
    """On a cluster the PodGroup CRD's default writes `queue: default` into a group made without
    one before anything reads it, and Volcano's PodGroup webhook (`createQueuePatch`) replaces
    `default` with the namespace's annotation: such a group (and a plain pod's implied group
    whose pod names `default`) goes to team-a, and an edit of it keeps it there. Before, only an
    absent queue took the namespace's, which on a cluster never happens."""
    svc = await started(event_log)
    defaulted = NO_QUEUE.replace("minMember: 2,", "minMember: 2, queue: default,")
    plain = PLAIN.replace("name: solo,", "name: solo, annotations: {scheduling.volcano.sh/queue-name: default},")
    reply = await svc.apply(QUEUE + "---" + NAMESPACE + "---" + defaulted + "---" + plain)
    assert [r.outcome for r in reply.results] == [ACCEPTED] * 4, reply.results
    queues = {e.spec.name: e.spec.queue for e in await events_of(event_log) if isinstance(e, JobSubmitted)}
    assert queues == {"ray": "team-a", "solo": "team-a"}
    edited = await svc.apply(defaulted.replace("minMember: 2", "minMember: 3"))
    assert [(r.outcome, r.reasons) for r in edited.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and (update.spec.queue, update.spec.min_available) == ("team-a", 3)


async def test_without_the_annotation_an_edit_to_default_moves_the_group(event_log: EventLog) -> None:
    """`default` is the namespace's queue only where the namespace names one: elsewhere it is the
    group's own, and an edit to it moves the group as any queue edit does."""
    svc = await started(event_log)
    await svc.apply(SMALL_BIG + "---" + IN_SMALL)
    moved = await svc.apply(IN_SMALL.replace("queue: small", "queue: default"))
    assert [(r.outcome, r.reasons) for r in moved.results] == [(CONFIGURED, ())]
    update = (await events_of(event_log))[-1]
    assert isinstance(update, JobUpdated) and update.spec.queue == "default"
