"""Admission on a cluster: Pods whose `schedulerName` is Tessera's (and PriorityClasses) are
read from the API server and judged by the very rules `tessera apply` uses.

An accepted pod becomes its job's `JobSubmitted` (a pod already Running on a node also gets an
`existing` proposal, so its cards are booked before anything else is placed there); a refused
pod gets a Warning Event and `PodScheduled=False` naming every rule, and nothing else changes;
a pod deleted from the API server ends its implied job (`JobDeleted`), and so does one whose
binding met no pod (read again: `_pod_gone`). Changes are taken in batches (one plan, one
pipelined append for everything that arrived together; an object created and deleted within one
is not judged), and Running pods of a batch go first.

Volcano's objects go through the same rules (volcano.md §1): Queues (a changed spec is
`configured`), Jobs, and PodGroups created by kubectl, each judged once per object (its uid is
kept with the admitted spec, so status writes and relists are not new submissions). A PodGroup
is submitted with the pods that name it once it has `minMember` of them; pods naming an unknown
PodGroup wait, as Volcano's scheduler ignores them. A live object edited on the cluster is
judged again (`kubectl edit vcjob`: replicas, minAvailable, priorityClassName; a PodGroup's
minMember, and pods naming it after it was admitted, or deleted from it): an allowed change is
its job's `JobUpdated`, any other gets a Warning Event naming the rule (the job runs on as
admitted); each version once. HyperNodes (`topology.volcano.sh`) are judged as `tessera apply`
judges them: each change is their `HyperNodeChanged`, a deletion `HyperNodeDeleted`, a refusal
a Warning Event on the object. Namespaces likewise: their labels are each one's
`NamespaceChanged` (what a pod affinity term's namespaceSelector selects), with their
`scheduling.volcano.sh/queue-name` annotation (the queue of a PodGroup made there without one),
a deletion `NamespaceDeleted`. A PodGroup admitted after a refusal has the refusal's
`Admitted=False` condition taken off by the job controller's first status write
(`volcano.podgroup_status`, its one remover). Pods and PodGroups the job controller made
for a Job belong to that Job and are not admitted again. A PodGroup is one object by its uid:
one made again under the name of a live job admitted from another ends that job first, and one
deleted while admission was away ends its job at the first listing. Beside a Volcano that stays
(no `volcano` among the scheduler names) a PodGroup is Tessera's only once Tessera's pods are
in it (`_group_ours`), and Volcano Jobs are not admitted at all: Volcano's job controller
reconciles every Job whatever its schedulerName (its informers filter nothing), so there the
Job is Volcano's and only what its controller makes for it is Tessera's to schedule — the
PodGroup `<job>-<uid>` of a Job whose pods take Tessera's name (admitted on its minResources,
as an operator's; Volcano's controller makes the pods once it is Inqueue) and those pods, its
members (`_side_job`). A refused object gets a Warning Event
naming every rule and its status says so (`status.refusal_status`); a deleted Job or PodGroup
ends its job — a Job once its pods are gone from the API server (they hold their cards while
they terminate).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from contracts.api import REJECTED
from contracts.events import BindingFailed, NamespaceChanged
from contracts.workloads import JobSpec
from services.admission.plan import PlacedPod
from services.admission.service import CONCURRENT, AdmissionService
from services.core.workload.admission import GROUP_NAME, GROUP_NAME_VOLCANO, QUEUE_NAME, group_queue
from services.kube import pods, status, volcano
from services.kube.client import (
    PRIORITY_CLASSES,
    REFUSALS,
    Kube,
    KubeError,
    batchjobs_path,
    daemonsets_path,
    namespaces_path,
    next_retry,
    pods_path,
    replicasets_path,
    retry_cap,
    statefulsets_path,
)
from services.kube.listwatch import Change, Merged, Reflector, scheduler_pods
from services.kube.volcano import hypernodes_path, jobs_path, podgroups_path, queues_path
from services.runtime.tasks import cancel_all
from services.runtime.waits import within

log = logging.getLogger(__name__)

MAX_BATCH = 500
#: the owner annotation that makes its pods one gang (Volcano's PodGroup controller reads it
#: from the pods' controller: ReplicaSet — a Deployment's annotations reach it —, StatefulSet,
#: DaemonSet, Kubernetes Job)
GROUP_MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
OWNER_KINDS = {("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("batch", "Job")}
OWNERS_REMEMBERED = 10_000  # owners whose annotation is kept (read again when forgotten)
QUEUE_PATIENCE = 5.0  # seconds an object waits for its queue's watch event, at most
JUDGE_AGAIN_AFTER = 0.1  # seconds before an object whose write lost a race is judged again
#: a live group's Succeeded pods deleted that stay its tasks (`_member`), the newest, at least
#: (its minMember, if more): enough for the node agent's reports still on their way (an agent
#: down while a burst of pods finish and are cleaned up), and the gang still counted whole
ENDED_GONE_KEPT = 64


class PodSource:
    def __init__(self, admission: AdmissionService, kube: Kube, *,
                 scheduler_names: Iterable[str] = ("volcano", "tessera"),
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.admission = admission
        self.kube = kube
        self.scheduler_names = frozenset(scheduler_names)
        self.clock = clock
        self.changes: asyncio.Queue[tuple[str, Change]] = asyncio.Queue()
        self.admitted = 0
        self.refused = 0
        self.batches = 0
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}  # PodGroups made by kubectl
        self.members: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}  # their pods
        #: a live group's pods deleted after they Succeeded, as last seen (`_member`)
        self.ended_gone: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        #: live objects' last version judged (manifest; a group's with its members' names), so
        #: status writes and member pods' own changes are not judged again
        self.judged: dict[tuple[str, str], object] = {}
        #: the job controller's pods present on the API server, terminating ones too, by their
        #: Job (namespace, name, uid); and deleted Jobs whose `JobDeleted` waits for them
        self.owned: dict[tuple[str, str, str], set[str]] = {}
        self.deleting: set[tuple[str, str, str]] = set()
        self.jobs_present: set[tuple[str, str, str]] = set()  # Job objects listed, by uid
        #: the pods naming each PodGroup (namespace, group) that are bound to a node and not
        #: finished, terminating ones too: what holds its cards and CPUs on the nodes; and the
        #: deleted PodGroups (→ their uid) whose `JobDeleted` waits for the last of them
        self.placed: dict[tuple[str, str], set[str]] = {}
        self.group_deleting: dict[tuple[str, str], str] = {}
        self.group_waits_said: set[str] = set()  # PodGroups made again told why they wait, by uid
        self.waits_to_say: list[tuple[dict[str, Any], str]] = []  # (the PodGroup, the Event's words)
        self.pods_present: set[str] = set()  # standalone pods of ours listed or seen since, by uid
        self.listed: set[str] = set()  # the reflectors that have listed once
        #: owner uid → its `group-min-member` (0: none, or its pods are not a gang), read once
        self.owner_min: dict[str, int] = {}
        self.owner_groups: set[tuple[str, str]] = set()  # PodGroups made for owners, by this process
        #: owner PodGroups whose create failed: (namespace, name) → the retry's delay, when it
        #: is due, and the refusal last said on a member pod (`_group_failed`)
        self.group_failing: dict[tuple[str, str], tuple[float, float, str]] = {}
        #: changes to look at again later ("<what>/<ns>/<name>" → their latest version): a pod
        #: whose owner could not be read, objects waiting for their Queue; dropped when deleted
        self.later: dict[str, tuple[str, Change]] = {}
        #: queue → the changes waiting for its watch event (objects naming a queue the server has)
        self.queue_waiters: dict[str, set[str]] = {}
        self.queues_waited: set[str] = set()  # queues waited for in vain: what names them is judged at once
        #: beside a Volcano that stays: the uids of the Volcano Jobs whose pods take Tessera's
        #: name (Volcano's controller makes them), and their PodGroups by the owner's uid
        self.side_jobs: set[str] = set()
        self.side_groups: dict[str, tuple[str, str]] = {}
        #: the bound pods of Volcano Jobs not in the log, by Job (namespace, name, uid): what a
        #: Job's first admission books as placed already (`_bound_before`); and the Jobs whose
        #: first admission waits for the pods' listing (`_pods_first`)
        self.bound_before: dict[tuple[str, str, str], dict[str, PlacedPod]] = {}
        self.jobs_waiting: set[str] = set()
        admission.binding_refused = self.binding_refused

    def _ours(self, obj: dict[str, Any]) -> bool:
        return pods.scheduler_name(obj) in self.scheduler_names

    async def _feed(self, what: str, reflector: Reflector | Merged, synced: asyncio.Event) -> None:
        async for ch in reflector.changes():
            await self.changes.put((what, ch))
            if ch.kind == "synced":
                synced.set()

    async def _feed_all(self) -> None:
        """PriorityClasses, Queues, HyperNodes and Namespaces are listed before the first pod or
        job, so an object naming one is judged with it, and a gang asking for a network
        topology is in the log after the HyperNodes there were when Tessera started (a session
        seeing the job without them placed a hard gang across super-pods) — and a pod whose
        anti-affinity selects namespaces by label after those labels (a session without them
        placed it beside the pod it must avoid). A resource the server does not serve (a CRD
        not installed) is not waited for."""
        ready = pcs, queues, hypernodes, namespaces = (asyncio.Event(), asyncio.Event(), asyncio.Event(),
                                                       asyncio.Event())  # fmt: skip
        first = [  # each path literal: tests/test_chart.py reads the RBAC the code needs from them
            asyncio.create_task(self._feed("priorityclass", Reflector(self.kube, PRIORITY_CLASSES, missing=pcs), pcs)),
            asyncio.create_task(self._feed("queue", Reflector(self.kube, queues_path(), missing=queues), queues)),
            asyncio.create_task(self._feed("hypernode", Reflector(self.kube, hypernodes_path(), missing=hypernodes),
                                           hypernodes)),
            asyncio.create_task(self._feed("namespace", Reflector(self.kube, namespaces_path(), missing=namespaces),
                                           namespaces))]  # fmt: skip
        later: list[asyncio.Task[None]] = []
        try:
            with contextlib.suppress(TimeoutError):  # one the server refuses must not stall pods
                await within(asyncio.gather(*(ev.wait() for ev in ready)), 10.0)
            groups = Reflector(self.kube, podgroups_path(), keep=self._group_kept)
            jobs = Reflector(self.kube, jobs_path(), keep=self._our_job)
            later = [asyncio.create_task(self._feed("podgroup", groups, asyncio.Event())),
                     asyncio.create_task(self._feed("job", jobs, asyncio.Event()))]  # fmt: skip
            await self._feed("pod", scheduler_pods(self.kube, self.scheduler_names, keep=self._ours), asyncio.Event())
        finally:
            await cancel_all(first + later)

    def _our_job(self, obj: dict[str, Any]) -> bool:
        """A Volcano Job whose pods take one of Tessera's names (the Job's schedulerName, or a
        task template's own, which Volcano's controller keeps on that task's pods)."""
        spec = obj.get("spec") or {}
        names = {str(spec.get("schedulerName") or "volcano")}
        for task in spec.get("tasks") or []:
            if isinstance(task, dict) and (own := ((task.get("template") or {}).get("spec") or {}).get("schedulerName")):
                names.add(str(own))
        return bool(names & self.scheduler_names)

    def _group_kept(self, obj: dict[str, Any]) -> bool:
        """As Volcano's replacement a Job's PodGroup is the job controller's own, not admitted;
        beside a Volcano that stays, its controller's PodGroups are judged as any other."""
        return volcano.owner_job(obj) is None or not volcano.replaces_volcano(self.scheduler_names)

    def _ref(self, obj: dict[str, Any]) -> pods.PodRef:
        return pods.ref(obj, volcano.replaces_volcano(self.scheduler_names))

    def _side_job(self, obj: dict[str, Any]) -> bool:
        """Beside a Volcano that stays: a pod or PodGroup Volcano's job controller made, which
        Tessera schedules (a pod of Tessera's name, the PodGroup of a Job whose pods take it) as
        it schedules an operator's, its Job left to that controller."""
        return not volcano.replaces_volcano(self.scheduler_names) and volcano.owner_job(obj) is not None

    def _admitted(self, obj: dict[str, Any], job: str = "") -> bool:
        """This very object (by uid) is in the log already, live or finished."""
        m = volcano.meta(obj)
        known = self.admission.known.jobs.get((str(m.get("namespace") or "default"), job or str(m.get("name"))))
        return known is not None and known.spec.annotations.get(volcano.OBJECT_UID) == volcano.uid(obj)

    def _ended_here(self, obj: dict[str, Any]) -> bool:
        """This very object ran as a job the log ended and admission has since forgotten."""
        m = volcano.meta(obj)
        ended = self.admission.known.ended_uids.get((str(m.get("namespace") or "default"), str(m.get("name"))))
        return ended is not None and ended == volcano.uid(obj)

    def _live(self, key: tuple[str, str]) -> bool:
        known = self.admission.known.jobs.get(key)
        return known is not None and known.live

    def _edited(self, key: tuple[str, str], version: object) -> bool:
        """A live admitted object at a version not judged yet (after a restart: once again)."""
        if not self._live(key) or self.judged.get(key) == version:
            return False
        self.judged[key] = version
        return True

    def _group_docs(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        """A PodGroup and its pods, at once when it is not admitted yet; an admitted live one
        again when it or its set of pods changed (`JobUpdated`)."""
        pg = self.groups.get(key)
        if pg is None or "pod" not in self.listed:
            # a group is judged with its pods: before the pods' listing (admission's start,
            # its watches listing side by side) a live group's members were the few listed so
            # far — none, after a restart — and the judgment a scale-down, every pod evicted
            return []
        if not self._group_ours(key, pg):
            return []
        if (old := self.group_deleting.get(key)) is not None and old != volcano.uid(pg):
            self._say_waiting(key, pg, old)
            return []
        if (volcano.group_ended(pg) or self._ended_here(pg)) and not self._live(key):
            # a PodGroup stays as it ended: one the log forgot (`--keep-finished`, compaction)
            # is not new, however many jobs ended since
            return []
        members = self.members.get(key, {})
        if (gone := self.ended_gone.get(key)) and self._live(key):
            members = {**gone, **members}  # their tasks stay the job's: see `_member`
        elif gone:
            del self.ended_gone[key]  # (the job ended: nothing more is judged of it)
        if self._admitted(pg) and not self._edited(key, (_version(pg), tuple(sorted(members)))):
            return []
        # judged with whatever pods name it, none at all included: Volcano's enqueue admits a
        # PodGroup on its minResources alone, and the operators that make their pods only once
        # their group is Inqueue (Kubeflow's training-operator, MindCluster's ascend-operator)
        # waited for good while it waited for minMember pods; the gang rule still places
        # nothing before minMember pods are there (their arrival is a `JobUpdated`)
        return [volcano.manifest(pg), *(pods.manifest(o) for o in members.values())]

    def _say_waiting(self, key: tuple[str, str], pg: dict[str, Any], old: str) -> None:
        """A PodGroup made again under the name of a deleted one whose pods are still on their
        nodes is a new job, judged once they are gone (the log knows a job by its name, and the
        old job holds their resources until then): said once on it, as an Event, so a group
        that shows no phase meanwhile is not a mystery."""
        uid = volcano.uid(pg)
        if uid in self.group_waits_said:
            return
        self.group_waits_said.add(uid)
        n = len(self.placed.get(key, ()))
        message = (f"waits for the {n} pod(s) of the deleted PodGroup {key[1]} (uid {old}) still on their "
                   "nodes: it is judged as a new job once they are gone")  # fmt: skip
        log.info("PodGroup %s/%s: %s", key[0], key[1], message)
        self.waits_to_say.append((pg, message))

    def _group_ours(self, key: tuple[str, str], pg: dict[str, Any]) -> bool:
        """Whether a PodGroup (not a Volcano Job's) is Tessera's to admit. As Volcano's
        replacement, every one is (an operator's is made before its pods, which wait for it to
        be Inqueue). Beside a Volcano that stays, only one Tessera's pods name (the pods'
        `scheduling.k8s.io/group-name`, as Volcano's controller links them; only pods with
        Tessera's scheduler names are read), one Tessera made for its pods' owner, or one
        already admitted: Volcano's PodGroup controller makes `podgroup-<owner uid>` for its
        own pods (`schedulerName: volcano`), and Tessera took it on its minResources and wrote
        its status and its queue's over Volcano's (a Running gang shown Inqueue, 0 running)."""
        if volcano.replaces_volcano(self.scheduler_names):
            return True
        owner = volcano.owner_job(pg)
        if owner is not None and owner[1] in self.side_jobs:
            return True  # Volcano's controller makes the pods only once it is Inqueue
        return bool(self.members.get(key)) or key in self.owner_groups or self._admitted(pg)

    async def _volcano(self, what: str, ch: Change, docs: list[dict[str, Any]],
                       objs: dict[tuple[str, str, str], dict[str, Any]],
                       touched: set[tuple[str, str]]) -> None:  # fmt: skip
        kind = {"queue": "Queue", "job": "Job", "podgroup": "PodGroup"}[what]
        ch = Change(ch.kind, ch.key, volcano.typed(ch.obj, kind))
        m = volcano.meta(ch.obj)
        ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
        job = (ns, name, volcano.uid(ch.obj))
        if what == "job":
            (self.jobs_present.discard if ch.kind == "delete" else self.jobs_present.add)(job)
            if not volcano.replaces_volcano(self.scheduler_names):
                # Volcano's controller reconciles it: admitted here too, two controllers made
                # its pods and wrote its status over each other. Its PodGroup is what is judged
                (self.side_jobs.discard if ch.kind == "delete" else self.side_jobs.add)(job[2])
                if (group := self.side_groups.get(job[2])) is not None:
                    touched.add(group)
                if ch.kind != "delete":
                    return  # (deleted, one an earlier version admitted here ends below)
        if ch.kind == "delete":
            if what == "job" and self.owned.get(job) and self._admitted(ch.obj):
                self.deleting.add(job)  # its pods still hold their cards: see `_owned_pod`
            elif what == "podgroup" and self._admitted(ch.obj) and self._pods_hold((ns, name)):
                await self._wait_for_pods((ns, name), volcano.uid(ch.obj))
            elif what != "queue" and self._admitted(ch.obj):
                await self.admission.delete_job(ns, name, volcano.uid(ch.obj) or "object")
            if what == "podgroup":
                self.groups.pop((ns, name), None)
                self.ended_gone.pop((ns, name), None)
                self.group_waits_said.discard(volcano.uid(ch.obj))
                self._members_gone((ns, name))
                if (owner := volcano.owner_job(ch.obj)) is not None:
                    self.side_groups.pop(owner[1], None)
            if what != "queue":
                self.judged.pop((ns, name), None)  # (held for as long as the object exists)
            return
        if what == "queue":
            docs.append(volcano.manifest(ch.obj))
            objs[(kind, "", name)] = ch.obj
            self.queues_waited.discard(name)
            if name in self.queue_waiters:  # judged after this batch has admitted the queue
                asyncio.get_running_loop().call_soon(self._queue_came, name)
        elif what == "job":
            for old in [d for d in self.deleting if d[:2] == (ns, name) and d[2] != volcano.uid(ch.obj)]:
                # made again under its name while the old one's pods terminate: the old job ends
                # now, before the new one is judged (its pods, named alike, wait for the old ones)
                await self.admission.delete_job(ns, name, old[2] or "object")
                self.deleting.discard(old)  # (once written: a failed batch is taken again)
            if (volcano.job_ended(ch.obj) or self._ended_here(ch.obj)) and not self._live((ns, name)):
                pass  # a Job stays as it ended: one the log forgot (`--keep-finished`, compaction) is not new
            elif m.get("deletionTimestamp") and not self._admitted(ch.obj):
                pass  # being deleted (a finalizer holds it): never admitted, as Volcano's controller skips it
            elif not self._admitted(ch.obj) and self._pods_first(ch):
                pass  # judged once the pods are listed, with those bound already
            elif not self._admitted(ch.obj) or self._edited((ns, name), _version(ch.obj)):
                docs.append(volcano.manifest(ch.obj))
                objs[(kind, ns, name)] = ch.obj
        else:
            await self._replaced(ns, name, volcano.uid(ch.obj))
            self.groups[(ns, name)] = ch.obj
            if (owner := volcano.owner_job(ch.obj)) is not None:
                self.side_groups[owner[1]] = (ns, name)
            objs[(kind, ns, name)] = ch.obj
            touched.add((ns, name))

    async def _replaced(self, ns: str, name: str, uid: str) -> None:
        """A PodGroup whose name a live job holds that was admitted from another PodGroup object
        (uid): one name holds one object at a time, so that object is gone — deleted and made
        again while admission was away (an upgrade; an operator resubmitting its job), no watch
        event said so — and its job ends before this one is judged, as a new job. Judged
        beside the old job, it was refused for good ("a live job of this name exists … (delete it
        first)"), and deleting it again did not help: its uid was never the admitted one."""
        known = self.admission.known.jobs.get((ns, name))
        if known is None or not known.live or known.spec.kind != "PodGroup":
            return
        old = known.spec.annotations.get(volcano.OBJECT_UID, "")
        if old and uid and old != uid and self._pods_hold((ns, name)):
            await self._wait_for_pods((ns, name), old)  # the new one is judged once they are gone
        elif old and uid and old != uid:
            log.info("PodGroup %s/%s made again (uid %s, was %s): the old one's job ends", ns, name, uid, old)
            await self.admission.delete_job(ns, name, old, _from_object(old))

    async def _refuse(self, obj: dict[str, Any], reasons: tuple[str, ...]) -> None:
        """A refused object; an edit of a live one only gets the Warning Event: its job runs on
        as admitted, and its status (a Job's Failed for a refusal) must not say otherwise."""
        m = volcano.meta(obj)
        if self._admitted(obj) and self._live((str(m.get("namespace") or "default"), str(m.get("name")))):
            await status.write_event(self.kube, obj, "Warning", "FailedUpdate", "; ".join(reasons), self.clock())
        else:
            await status.refuse_object(self.kube, obj, reasons, self.clock())

    def _member(self, ch: Change, touched: set[tuple[str, str]],
                held: dict[tuple[str, str], dict[str, Any]]) -> bool:  # fmt: skip
        """Keep a pod naming a PodGroup with its group; True if it is one. A gated pod is not a
        member yet (Volcano's gang counts only pods it may schedule): its group waits for
        minMember ungated pods, or takes it in later as a `JobUpdated` once its gates are gone."""
        annotations = volcano.meta(ch.obj).get("annotations") or {}
        group = annotations.get(GROUP_NAME) or annotations.get(GROUP_NAME_VOLCANO)
        if not group:
            return False
        r = self._ref(ch.obj)
        key = (r.namespace, str(group))
        # a live group's pods stay its members until deleted (finished ones too: their tasks)
        keep = not pods.terminating(ch.obj) if self._live(key) else self._wanted(ch.obj)
        if ch.kind != "delete" and keep and pods.gated(ch.obj):
            held[(r.namespace, r.name)] = ch.obj
            keep = False
        else:
            held.pop((r.namespace, r.name), None)  # ungated later in the same batch
        if ch.kind == "delete" or not keep:
            was = self.members.get(key, {}).pop(r.name, None)
            if was is not None and self._live(key) and pods.phase(ch.obj) == "Succeeded":
                # deleted once it Succeeded (an operator's or a TTL's cleanup): no member
                # removed, as Volcano's session counted it Succeeded before it went. Judged a
                # removal, a node agent that reported its end only after that (down, behind)
                # found it already gone from the job, and the group, emptied, stayed Running
                gone = self.ended_gone.setdefault(key, {})
                gone[r.name] = ch.obj
                # bounded: a long-lived group whose pods finish and are cleaned up under fresh
                # names (batch executors, Ray workers scaled down) grew its task list and this
                # for as long as it lived. The oldest go (a `JobUpdated`: a finished task
                # removed leaves at once), as Volcano's cache drops a deleted pod's task;
                # minMember of them stay, so a group whose pods all ended still ends Completed
                kept = max(ENDED_GONE_KEPT, self.admission.known.jobs[key].spec.min_available)
                while len(gone) > kept:
                    del gone[next(iter(gone))]
            self._members_gone(key)
        else:
            if (gone := self.ended_gone.get(key)) is not None and gone.pop(r.name, None) is not None and not gone:
                del self.ended_gone[key]  # a pod made again under its name is the member now
            self.members.setdefault(key, {})[r.name] = ch.obj
        touched.add(key)
        return True

    def _pods_hold(self, key: tuple[str, str]) -> bool:
        """Whether pods naming the PodGroup still hold resources on their nodes (bound, not
        finished, terminating ones included) — or may: before the pods' first listing nobody
        knows, and the listing's sweep (`_groups_gone`) ends what turns out to hold nothing."""
        return "pod" not in self.listed or bool(self.placed.get(key))

    async def _wait_for_pods(self, key: tuple[str, str], uid: str) -> None:
        """A deleted PodGroup's job stays in the log, as it is, while its pods are on their
        nodes: Volcano's cache only unsets a deleted PodGroup's scheduling spec (`deletePodGroup`:
        `UnsetPodGroup`, then the job is dropped once `JobTerminated` — no PodGroup and no task
        left), and a node's usage comes from the pods on it, so pods that run on (the
        training-operator's `cleanPodPolicy: None`, the MPIJob default) or terminate (a
        `kubectl delete raycluster`) keep their node's CPUs and their cards until gone. Ended at
        once, the job's slices were released and a second gang was bound onto the same cards.
        Meanwhile the job keeps only its placed pods' tasks (`_keep_placed`)."""
        if key not in self.group_deleting:
            log.info("PodGroup %s/%s deleted: its job ends once its %d placed pod(s) are gone", key[0], key[1],
                     len(self.placed.get(key, ())))  # fmt: skip
        self.group_deleting[key] = uid
        await self._keep_placed(key)

    async def _keep_placed(self, key: tuple[str, str]) -> None:
        """A deleted PodGroup's job, waiting for its placed pods, drops its other tasks: left,
        the scheduler kept placing them (each binding 404, backing off, a warning each time) and
        could preempt other jobs for a group that no longer exists — Volcano schedules no job
        without its PodGroup (`UnsetPodGroup`). Known only once the pods are listed (a wait begun
        before is begun again by the listing's sweep, `_groups_gone`)."""
        uid = self.group_deleting.get(key)
        placed = self.placed.get(key)
        if uid is None or "pod" not in self.listed or not placed:
            return
        reason = (f"its PodGroup (uid {uid}) was deleted: only its {len(placed)} placed pod(s) stay "
                  "its tasks, until they are gone")  # fmt: skip
        await self.admission.keep_placed(key[0], key[1], placed, reason, _from_object(uid) if uid else None)

    async def _group_pod(self, ch: Change, touched: set[tuple[str, str]]) -> None:
        """Keep count of a PodGroup's pods that hold node resources (`placed`); once the last
        pod of a deleted PodGroup is gone (deleted, or finished: its task's slices are released
        as it ends), the job ends (`JobDeleted`), and a PodGroup made again under the name,
        which waited, is judged as a new job."""
        annotations = volcano.meta(ch.obj).get("annotations") or {}
        r = self._ref(ch.obj)
        key = (r.namespace, str(annotations.get(GROUP_NAME) or annotations.get(GROUP_NAME_VOLCANO)))
        names = self.placed.setdefault(key, set())
        if ch.kind == "delete" or not pods.node_name(ch.obj) or pods.phase(ch.obj) in ("Succeeded", "Failed"):
            names.discard(r.name)
        else:
            names.add(r.name)
        if names:
            return
        del self.placed[key]
        if "pod" in self.listed:
            await self._pods_went(key, touched)

    async def _pods_went(self, key: tuple[str, str], touched: set[tuple[str, str]]) -> None:
        """A deleted PodGroup's last placed pod is gone: its job ends now. The wait is forgotten
        only once `JobDeleted` is written: a batch whose write failed (the log out of reach, the
        job changing under it) is taken again (`run`), and taken off first, the retry found no
        pod placed and nothing waiting — the job and its cards held until the next relist."""
        uid = self.group_deleting.get(key)
        if uid is None:
            return
        self.group_waits_said.discard(volcano.uid(self.groups.get(key) or {}))
        log.info("PodGroup %s/%s: its last placed pod is gone; its job ends", *key)
        await self.admission.delete_job(key[0], key[1], uid or "object", _from_object(uid) if uid else None)
        if self.group_deleting.get(key) == uid:
            del self.group_deleting[key]
        touched.add(key)  # one made again under the name waited for this: judged now

    def _members_gone(self, key: tuple[str, str]) -> None:
        """Forget a group's pods entry once neither the group nor any pod of it is left."""
        if key not in self.groups and not self.members.get(key):
            self.members.pop(key, None)

    async def _owned_pod(self, ch: Change, owner: tuple[str, str]) -> None:
        """A deleted Volcano Job's pods run on until their kubelets confirm (a grace period, the
        garbage collector's or the job controller's deletion): its `JobDeleted` — which frees
        its cards in the ledger — waits until the last of them is gone, as a deleted pod holds
        its node until then. Written at once, a new pod could be placed on cards the old ones
        were still using. The deletion waiting is forgotten only once written (see `_pods_went`)."""
        r = self._ref(ch.obj)
        job = (r.namespace, owner[0], owner[1])
        names = self.owned.setdefault(job, set())
        if ch.kind == "delete" or pods.phase(ch.obj) in ("Succeeded", "Failed"):  # (ended: holds nothing)
            names.discard(r.name)
        else:
            names.add(r.name)
        if names:
            return
        del self.owned[job]
        if job in self.deleting:
            await self.admission.delete_job(job[0], job[1], job[2] or "object")
            self.deleting.discard(job)

    def _pods_first(self, ch: Change) -> bool:
        """A Job not in the log met before the pods' first listing (admission's start, its
        watches listing side by side) waits for it: its pods that another log placed (`tessera
        up --fresh`, a migration from Volcano) are then known, and booked where they are with
        its submission (`_placed`). True when it waits."""
        if "pod" in self.listed:
            return False
        self.jobs_waiting.add(self._keep("job", ch))
        return True

    def _bound_before(self, ch: Change, owner: tuple[str, str]) -> None:
        """Keep a Job's pod that is bound to a node while the Job is not in the log (another
        log placed it), for the Job's first admission; forgotten once the Job is admitted."""
        r = self._ref(ch.obj)
        job = (r.namespace, owner[0], owner[1])
        held = self.bound_before.get(job)
        if ch.kind == "delete" or not pods.node_name(ch.obj) or self._admitted_job(job):
            if held is not None:
                held.pop(r.name, None)
                if not held:
                    del self.bound_before[job]
            return
        annotations = volcano.meta(ch.obj).get("annotations") or {}
        self.bound_before.setdefault(job, {})[r.name] = PlacedPod(
            pod=r.name, node=pods.node_name(ch.obj), annotations=dict(annotations),
            ended=pods.phase(ch.obj) in ("Succeeded", "Failed"))  # fmt: skip

    def _admitted_job(self, job: tuple[str, str, str]) -> bool:
        known = self.admission.known.jobs.get(job[:2])
        return known is not None and known.spec.annotations.get(volcano.OBJECT_UID) == job[2]

    def _placed(self, others: dict[tuple[str, str, str], dict[str, Any]]) -> dict[tuple[str, str], list[PlacedPod]]:
        """The bound pods of the Jobs judged in this batch, by job; those of a Job the log
        has by now are forgotten (its pods are the log's from its admission on)."""
        for job in [j for j in self.bound_before if self._admitted_job(j)]:
            del self.bound_before[job]
        out: dict[tuple[str, str], list[PlacedPod]] = {}
        for (kind, ns, name), obj in others.items():
            if kind == "Job" and (held := self.bound_before.get((ns, name, volcano.uid(obj)))):
                out[(ns, name)] = sorted(held.values(), key=lambda p: p.pod)
        return out

    async def _deleted_while_away(self) -> None:
        """Once Jobs and pods are listed (at start, after a relist): a Job the log admitted and has
        not deleted, whose object is not there, was deleted while this process was away (or its
        deletion was waiting for its pods when it stopped) — no watch event will say so."""
        for (ns, name), known in list(self.admission.known.jobs.items()):
            uid = known.spec.annotations.get(volcano.OBJECT_UID, "")
            job = (ns, name, uid)
            # (an ended one too: its pods may have gone, and it ended, before this process listed)
            if known.deleted or known.spec.kind != "Job" or not uid or job in self.jobs_present or job in self.deleting:
                continue
            log.info("job %s/%s: its Job object is gone (deleted while admission was away); %d of its "
                     "pods left", ns, name, len(self.owned.get(job, ())))  # fmt: skip
            if self.owned.get(job):
                self.deleting.add(job)
            else:
                await self.admission.delete_job(ns, name, uid)

    async def _pods_gone(self) -> None:
        """Once pods are listed (at start, after a relist): a standalone pod's job whose pod is
        not there was deleted while this process was away (the log placed it, its binding
        refused 404, placed again, for good). Done on the pods' listing alone: waiting for the
        Volcano Jobs' too, a cluster without Volcano's CRDs (that list never answers) kept such
        a job for ever."""
        for (ns, name), known in list(self.admission.known.jobs.items()):
            if known.deleted or known.spec.kind != "Pod" or known.spec.annotations.get(volcano.OBJECT_UID):
                continue
            uids = _pod_uids(known.spec)
            if uids and not uids & self.pods_present:
                gone = min(uids)
                log.info("job %s/%s: its pod (uid %s) is gone (deleted while admission was away)", ns, name, gone)
                await self.admission.delete_job(ns, name, gone, _from_pod(gone))

    def binding_refused(self, event: BindingFailed) -> None:
        """The allocator's binding of a pod met no pod (404), or another pod under its name (409,
        the binding's uid precondition failed): looked at in turn with the watch's changes
        (`_pod_gone`). kube-scheduler's failure handler likewise reads the pod again and drops it
        when it no longer exists, whatever event was missed."""
        if event.reason in (pods.POD_NOT_FOUND, pods.POD_REPLACED):
            self.changes.put_nowait(("gone", Change("upsert", f"{event.namespace}/{event.task}", {"job": event.name})))

    async def _pod_gone(self, ch: Change) -> None:
        """A standalone pod's job whose binding met no pod: the API server is asked for the pod,
        and one not there, or another pod under its name (another uid), ends the job — no watch
        event will (it was missed, or came before the job was in the log). Only a job admitted
        from that very pod is ended (`_from_pod`): a pod of the name made again is a job of its
        own. A group's pod gone is its group's `JobUpdated`; any other refusal backs off."""
        ns, pod = ch.key.split("/", 1)
        job = str(ch.obj.get("job") or "")
        known = self.admission.known.jobs.get((ns, job))
        if known is None or not known.live or known.spec.kind != "Pod" or known.spec.annotations.get(volcano.OBJECT_UID):
            return
        uid = next((t.annotations.get(pods.POD_UID, "") for t in known.spec.tasks if pod in t.pod_names), "")
        if not uid:
            return  # admitted before tasks named their pod: which pod it was is not known
        try:
            obj = await self.kube.get(pods_path(ns, pod))
        except KubeError as exc:
            if exc.status != 404:
                log.warning("pod %s/%s: not read after its binding met no pod (%s)", ns, pod, exc)
                return
            obj = None
        if obj is not None and volcano.uid(obj) == uid:
            return  # there (the binding's 404 raced its create or the watch): placed again, backing off
        log.info("job %s/%s: its pod (uid %s) is gone (its binding met no pod)", ns, job, uid)
        self.pods_present.discard(uid)
        await self.admission.delete_job(ns, job, uid, _from_pod(uid))
        if obj is not None and self._ours(obj):
            # another pod under its name (made again; its watch event missed, or not here yet):
            # judged as a new job, as its own event would have it (once: then the job is live)
            self.changes.put_nowait(("pod", Change("upsert", f"{ns}/{pod}", obj)))

    async def _groups_gone(self, touched: set[tuple[str, str]]) -> None:
        """Once PodGroups and pods are listed (at start, after a relist): a job the log admitted
        from a PodGroup object that the listing does not have (by uid) was deleted while this
        process was away — no watch event will say so, and its name stayed held for good. Its
        job ends once its placed pods are gone (`_wait_for_pods`), at once when none is left;
        so does one whose deletion came before the pods' listing."""
        for (ns, name), known in list(self.admission.known.jobs.items()):
            uid = known.spec.annotations.get(volcano.OBJECT_UID, "")
            if known.deleted or known.spec.kind != "PodGroup" or not uid:
                continue
            if volcano.uid(self.groups.get((ns, name)) or {}) != uid:
                log.info("job %s/%s: its PodGroup (uid %s) is gone (deleted while admission was away)", ns, name, uid)
                await self._wait_for_pods((ns, name), uid)
        for key in [k for k in self.group_deleting if not self.placed.get(k)]:
            await self._pods_went(key, touched)

    async def _owner_gang(self, obj: dict[str, Any]) -> bool:
        """Volcano's PodGroup controller, for the pods it makes a gang of: a pod naming no
        PodGroup whose controller (a StatefulSet, ReplicaSet, DaemonSet or Job) carries
        `scheduling.volcano.sh/group-min-member` ≥ 2 gets the PodGroup `podgroup-<owner uid>`
        with that minMember (its queue and priority class from the pod), and is named in it; until
        then it is no job of its own (Volcano's scheduler ignores it as well). True when so."""
        if pods.node_name(obj) or not self._wanted(obj):
            return False
        m = volcano.meta(obj)
        owner = next((r for r in m.get("ownerReferences") or [] if r.get("controller")), None)
        group = str((owner or {}).get("apiVersion") or "").split("/")[0]
        if owner is None or (group, owner.get("kind")) not in OWNER_KINDS:
            return False
        ns, uid = str(m.get("namespace") or "default"), str(owner.get("uid") or "")
        if uid not in self.owner_min:
            while len(self.owner_min) >= OWNERS_REMEMBERED:  # the oldest first (CronJobs' Jobs pile up)
                del self.owner_min[next(iter(self.owner_min))]
            try:
                self.owner_min[uid] = await self._min_member(ns, owner)
            except KubeError as exc:  # the API server did not answer: held, and looked at again
                log.warning("pod %s/%s: its owner %s not read (%s); again shortly", ns, m.get("name"),
                            owner.get("name"), exc)  # fmt: skip
                self._again(obj)
                return True
        wanted = self.owner_min[uid]
        if wanted < 2:
            return False
        name = f"podgroup-{uid}"
        failing = self.group_failing.get((ns, name))
        if failing is not None and failing[1] > self.clock():  # backing off: asked at its time
            self._again(obj, failing[1] - self.clock())
            return True
        try:
            if (ns, name) not in self.groups and (ns, name) not in self.owner_groups:
                spec: dict[str, Any] = {"minMember": wanted}
                # the pod's queue; else its namespace's, as Volcano's PodGroup webhook writes
                # into the group its controller makes without one
                if queue := (m.get("annotations") or {}).get(QUEUE_NAME) or self._namespace_queue(ns):
                    spec["queue"] = queue
                if pc := (obj.get("spec") or {}).get("priorityClassName"):
                    spec["priorityClassName"] = pc
                body = {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": ns, "ownerReferences": [
                            {k: owner[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in owner}]},
                        "spec": spec}  # fmt: skip
                try:
                    await self.kube.create(podgroups_path(ns), body)
                except KubeError as exc:
                    if exc.status != 409:
                        await self._group_failed(obj, ns, name, exc)
                        return True
                self.owner_groups.add((ns, name))
                self.group_failing.pop((ns, name), None)
            await self.kube.patch(pods_path(ns, str(m.get("name") or "")),
                                  {"metadata": {"annotations": {GROUP_NAME: name}}})  # fmt: skip
        except KubeError as exc:
            if exc.status == 404:
                return True  # the pod went meanwhile
            log.warning("pod %s/%s: not named in its owner's PodGroup %s (%s); again shortly", ns,
                        m.get("name"), name, exc)  # fmt: skip
            self._again(obj)
        return True

    async def _group_failed(self, obj: dict[str, Any], ns: str, name: str, exc: KubeError) -> None:
        """An owner's PodGroup not made: its pods are looked at again after a delay that doubles
        while it keeps failing (`next_retry`: to minutes when the server refused it, to seconds
        when it did not answer), one create per delay for all of them, and a refusal (an object-count
        ResourceQuota, a webhook) is said on the pod at hand, once per refusal. Asked again every
        second by every pod of the owner, and said nowhere, the owner's pods sat Pending with no
        word while each of them asked the API server once a second."""
        before = self.group_failing.get((ns, name))
        delay = next_retry(before[0] if before is not None else None, retry_cap(exc.status))
        said = before[2] if before is not None else ""
        message = f"Failed to create PodGroup {name}, err: {exc.message}"
        log.warning("pod %s/%s: %s; again in %.0f s", ns, volcano.meta(obj).get("name"), message, delay)
        if exc.status in REFUSALS and message != said:
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, obj, "Warning", "PodGroupError", message, self.clock())
                said = message
        self.group_failing.pop((ns, name), None)  # (re-inserted last: the oldest go first)
        while len(self.group_failing) >= OWNERS_REMEMBERED:  # owners gone and never made (CronJobs')
            del self.group_failing[next(iter(self.group_failing))]
        self.group_failing[(ns, name)] = (delay, self.clock() + delay, said)
        self._again(obj, delay)

    async def _queues_first(self, docs: list[dict[str, Any]], objs: dict[tuple[str, str], dict[str, Any]],
                            others: dict[tuple[str, str, str], dict[str, Any]]) -> list[dict[str, Any]]:  # fmt: skip
        """The documents to judge now: one naming a Queue this process has not heard of yet,
        which the API server has (created just before it — `kubectl apply` of a Queue and a
        Job — and its watch event not here yet: watches of two resources keep no order between
        them), waits for that Queue instead of being refused "queue does not exist" with a
        Warning the user would see for nothing. A queue the server does not have either is
        judged at once (and refused)."""
        known = set(self.admission.known.queues) | {
            str((d.get("metadata") or {}).get("name") or "") for d in docs if d.get("kind") == "Queue"}
        kept: list[dict[str, Any]] = []
        waiting: dict[str, bool] = {}  # queue → on the server
        groups: set[tuple[str, str]] = set()  # PodGroups held
        for d in docs:
            queue = _queue_of(d, self._namespace_queue)
            if queue is None or queue in known or queue in ("default", "root") or queue in self.queues_waited:
                kept.append(d)
                continue
            if queue not in waiting:
                waiting[queue] = await self._queue_served(queue)
            if not waiting[queue]:
                kept.append(d)
                continue
            m = d.get("metadata") or {}
            ns, name = str(m.get("namespace") or "default"), str(m.get("name") or "")
            if d.get("kind") == "PodGroup":
                groups.add((ns, name))
            change = self._change_of(d, ns, name, objs, others)
            if change is not None:
                self.queue_waiters.setdefault(queue, set()).add(self._keep(*change))
        for queue in [q for q, served in waiting.items() if served]:
            asyncio.get_running_loop().call_later(QUEUE_PATIENCE, self._queue_waited, queue)
        # a held PodGroup's pods wait with it (judged without it, they would be refused)
        if groups:
            kept = [d for d in kept if d.get("kind") != "Pod" or _group_of(d) not in groups]
        return kept

    def _namespace_queue(self, namespace: str) -> str:
        """The queue a PodGroup made in `namespace` without one lands in, as admission has the
        namespace's `scheduling.volcano.sh/queue-name` annotation."""
        last = self.admission.known.namespaces.get(namespace)
        return (last[0].queue if last is not None and isinstance(last[0], NamespaceChanged) else "") or "default"

    def _change_of(self, doc: dict[str, Any], ns: str, name: str, objs: dict[tuple[str, str], dict[str, Any]],
                   others: dict[tuple[str, str, str], dict[str, Any]]) -> tuple[str, Change] | None:  # fmt: skip
        """The change that brings a held document back (a pod, a Job, a PodGroup with its pods)."""
        kind = doc.get("kind")
        if kind == "Pod":
            obj = objs.get((ns, name))
            if obj is None:  # a member of a PodGroup: the group brings it back
                return None
            return "pod", Change("upsert", f"{ns}/{name}", obj)
        if kind == "Job" and (obj := others.get(("Job", ns, name))) is not None:
            return "job", Change("upsert", f"{ns}/{name}", obj)
        if kind == "PodGroup" and (obj := self.groups.get((ns, name))) is not None:
            return "podgroup", Change("upsert", f"{ns}/{name}", obj)
        return None

    async def _queue_served(self, queue: str) -> bool:
        try:
            await self.kube.get(queues_path(queue))
        except KubeError as exc:
            if exc.status in (403, 404):
                return False
            log.warning("queue %s not looked up (%s): what names it is judged now", queue, exc)
            return False
        return True

    def _queue_waited(self, queue: str) -> None:
        """Patience out: what names the queue is judged as it is from now on (a Queue admission
        refused is on the server and never in the log: it must not hold them for ever)."""
        if queue not in self.admission.known.queues:
            self.queues_waited.add(queue)
        self._queue_came(queue)

    def _queue_came(self, queue: str) -> None:
        """The objects that waited for the queue, judged again (its watch event is here, or
        the patience ran out: then they are judged as they are)."""
        for key in sorted(self.queue_waiters.pop(queue, None) or ()):
            self._release(key)

    def _keep(self, what: str, change: Change) -> str:
        """Hold a change to look at again (`_release`), kept at its object's latest version."""
        key = f"{what}/{change.key}"
        self.later[key] = (what, change)
        return key

    def _release(self, key: str) -> None:
        """A held change back into the stream, as its object is now (not if it was deleted)."""
        if (held := self.later.pop(key, None)) is not None:
            self.changes.put_nowait(held)

    def _again(self, obj: dict[str, Any], delay: float = 1.0) -> None:
        """The pod looked at again after `delay` s (a pod waiting to be placed changes no more)."""
        r = self._ref(obj)
        key = self._keep("pod", Change("upsert", f"{r.namespace}/{r.name}", obj))
        asyncio.get_running_loop().call_later(delay, self._release, key)

    async def _min_member(self, ns: str, owner: dict[str, Any]) -> int:
        """The owner's `group-min-member` (0 when it has none, is gone, or may not be read)."""
        kind, name = owner.get("kind"), str(owner.get("name") or "")
        try:  # each path literal: tests/test_chart.py reads the RBAC the code needs from them
            if kind == "StatefulSet":
                got = await self.kube.get(statefulsets_path(ns, name))
            elif kind == "ReplicaSet":
                got = await self.kube.get(replicasets_path(ns, name))
            elif kind == "DaemonSet":
                got = await self.kube.get(daemonsets_path(ns, name))
            else:
                got = await self.kube.get(batchjobs_path(ns, name))
        except KubeError as exc:
            if exc.status not in (403, 404):
                raise
            return 0
        if not isinstance(got, dict) or volcano.uid(got) != owner.get("uid"):
            return 0
        raw = str((volcano.meta(got).get("annotations") or {}).get(GROUP_MIN_MEMBER) or "")
        return int(raw) if raw.isdigit() else 0

    async def _pod_made_again(self, obj: dict[str, Any]) -> None:
        """A pod whose name a live job holds that was admitted from another pod (uid): one name
        holds one pod at a time, so that pod is gone — deleted and made again while admission
        was away, or while its watch relisted (the relist's difference, by name, says one
        change and no deletion), as a StatefulSet makes its replica again — and its job ends
        before this pod is judged, as a new job (kube-scheduler keys its pods by uid too).
        Judged by name alone, the new pod was "in the log already" for good (Pending, no event
        would ever judge it again), and the old job was placed and its binding refused (the
        uid precondition) every 10 s for ever, its resources booked."""
        r = self._ref(obj)
        known = self.admission.known.jobs.get((r.namespace, r.name))
        if known is None or not known.live or known.spec.kind != "Pod" or known.spec.annotations.get(volcano.OBJECT_UID):
            return
        uids = _pod_uids(known.spec)
        if not uids or not r.uid or r.uid in uids:
            return  # this very pod (or admitted before tasks named their pod's uid: not known)
        old = min(uids)
        log.info("pod %s/%s made again (uid %s, was %s): the old pod's job ends", r.namespace, r.name, r.uid, old)
        self.pods_present.difference_update(uids)
        await self.admission.delete_job(r.namespace, r.name, old, _from_pod(old))

    def _wanted(self, obj: dict[str, Any]) -> bool:
        """Whether a pod is to be judged now: not when a live job of its name is in the log (by
        name: a group's pods are its members; a standalone pod's job of another uid was ended
        first, `_pod_made_again`), nor when it ended before Tessera saw it."""
        r = self._ref(obj)
        job = self.admission.known.jobs.get((r.namespace, r.job))
        if job is not None and job.live:
            return False  # in the log already (submitted by us before a restart, or a member)
        if pods.terminating(obj) or pods.phase(obj) in ("Succeeded", "Failed"):
            return False  # ended before Tessera saw it
        return True

    async def process(self, batch: list[tuple[str, Change]]) -> None:
        self.batches += 1
        docs: list[dict[str, Any]] = []
        objs: dict[tuple[str, str], dict[str, Any]] = {}
        others: dict[tuple[str, str, str], dict[str, Any]] = {}  # Volcano's objects, by kind
        touched: set[tuple[str, str]] = set()  # PodGroups whose pods or object changed
        held: dict[tuple[str, str], dict[str, Any]] = {}  # gated pods: not submitted yet
        for what, ch in batch:
            if ch.kind == "synced":
                self.listed.add(what)
                if what == "pod":
                    await self._pods_gone()
                if what in ("job", "pod") and {"job", "pod"} <= self.listed:
                    await self._deleted_while_away()
                if what in ("podgroup", "pod") and {"podgroup", "pod"} <= self.listed:
                    await self._groups_gone(touched)
                if what == "pod":
                    touched.update(self.groups)  # each group, now with all its pods
                    for key in sorted(self.jobs_waiting):  # each Job, with its pods bound already
                        if (waited := self.later.pop(key, None)) is not None:
                            await self._volcano(*waited, docs, others, touched)
                    self.jobs_waiting.clear()
                continue
            if what == "gone":  # a binding refused 404: is the job's pod still there?
                await self._pod_gone(ch)
                continue
            if (key := f"{what}/{ch.key}") in self.later:  # held: a newer version, or gone
                if ch.kind == "delete":
                    del self.later[key]
                else:
                    self.later[key] = (what, ch)
            if ch.kind == "delete" and what in _DOC_KINDS:
                _unsaid(docs, others, _DOC_KINDS[what], ch.obj)  # created and deleted in this batch
            if what in ("queue", "job", "podgroup"):
                await self._volcano(what, ch, docs, others, touched)
                continue
            if what == "hypernode":
                name = str(volcano.meta(ch.obj).get("name") or "")
                if ch.kind == "delete":
                    await self.admission.delete_cluster_object("HyperNode", name)
                else:
                    obj = volcano.typed(ch.obj, "HyperNode")
                    docs.append({"apiVersion": volcano.TOPOLOGY, "kind": "HyperNode",
                                 "metadata": {"name": name}, "spec": obj.get("spec") or {}})  # fmt: skip
                    others[("HyperNode", "", name)] = obj
                continue
            if what == "namespace":
                meta = volcano.meta(ch.obj)
                name = str(meta.get("name") or "")
                if ch.kind == "delete":
                    await self.admission.delete_cluster_object("Namespace", name)
                else:  # its labels and queue annotation only: the rest is the API server's
                    queue = (meta.get("annotations") or {}).get(QUEUE_NAME)
                    docs.append({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name, "labels": dict(meta.get("labels") or {}),
                                              **({"annotations": {QUEUE_NAME: queue}} if queue else {})}})  # fmt: skip
                continue
            if what == "pod" and (owner := volcano.owner_job(ch.obj)) is not None and not self._side_job(ch.obj):
                self._bound_before(ch, owner)
                await self._owned_pod(ch, owner)  # the job controller's: its Job is the object admitted
                continue
            if what == "pod" and ch.kind != "delete":
                await self._pod_made_again(ch.obj)  # before it is judged: see `_wanted`
            if what == "pod" and self._member(ch, touched, held):
                await self._group_pod(ch, touched)
                continue
            if what == "pod" and ch.kind != "delete" and await self._owner_gang(ch.obj):
                continue  # its PodGroup made and the pod named in it: it comes back a member
            if what == "priorityclass":
                if ch.kind == "upsert":
                    docs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 **{k: v for k, v in ch.obj.items() if k in (
                                     "value", "globalDefault", "preemptionPolicy", "description")},
                                 "metadata": {"name": (ch.obj.get("metadata") or {}).get("name")}})  # fmt: skip
                continue
            r = self._ref(ch.obj)
            if not r.grouped:
                (self.pods_present.discard if ch.kind == "delete" else self.pods_present.add)(r.uid)
            if ch.kind == "delete":
                # created earlier in this very batch (a pod deleted at once: an HPA flapping, a
                # surge pod scaled away, `kubectl delete` of a Pending pod): not submitted. It
                # was, after its deletion — a job whose pod no event would ever end, placed,
                # its binding refused 404 and placed again, for good (and preempting for it)
                objs.pop((r.namespace, r.name), None)
                held.pop((r.namespace, r.name), None)
                if not r.grouped:
                    await self.admission.delete_job(r.namespace, r.job, r.uid or "pod", _from_pod(r.uid))
                continue
            if self._wanted(ch.obj):
                if pods.gated(ch.obj):  # kube-scheduler's rule: not a job until ungated
                    held[(r.namespace, r.name)] = ch.obj
                    objs.pop((r.namespace, r.name), None)
                else:
                    objs[(r.namespace, r.name)] = ch.obj
                    held.pop((r.namespace, r.name), None)
        await self._hold(held.values())
        for key in sorted(touched):
            docs.extend(self._group_docs(key))
        while self.waits_to_say:
            pg, message = self.waits_to_say.pop()
            with contextlib.suppress(KubeError):
                await status.write_event(self.kube, pg, "Normal", "Waiting", message, self.clock())
        running = [o for o in objs.values() if pods.node_name(o)]
        docs.extend(pods.manifest(o) for o in running)
        docs.extend(pods.manifest(o) for o in objs.values() if not pods.node_name(o))
        docs = await self._queues_first(docs, objs, others)
        if not docs:
            return
        results = await self.admission.admit_documents(_latest(docs), self._placed(others))
        for res in results:
            if res.outcome == REJECTED and any(CONCURRENT in r for r in res.reasons) \
                    and self._judge_again(res.kind, res.namespace, res.name, objs, others):  # fmt: skip
                continue
            if res.kind == "Namespace":
                if res.outcome == REJECTED:  # labels the API server took: nothing to say on it
                    log.warning("Namespace %s not read: %s", res.name, "; ".join(res.reasons))
                continue
            if res.kind == "HyperNode":
                if res.outcome == REJECTED and (obj := others.get(("HyperNode", "", res.name))) is not None:
                    self.refused += 1
                    with contextlib.suppress(KubeError):
                        await status.write_event(self.kube, obj, "Warning", "FailedAdmission",
                                                 "; ".join(res.reasons), self.clock())  # fmt: skip
                continue
            if res.kind in ("Queue", "Job", "PodGroup"):
                other = others.get((res.kind, res.namespace, res.name))
                if other is not None and res.outcome == REJECTED:
                    self.refused += 1
                    with contextlib.suppress(KubeError):
                        await self._refuse(other, res.reasons)
                elif other is not None:
                    self.admitted += 1  # (a PodGroup's `Admitted=False`: the job controller's status takes it off)
                if res.kind != "PodGroup" or res.outcome != REJECTED:
                    continue
            obj = objs.get((res.namespace, res.name)) if res.kind == "Pod" else None
            if res.outcome == REJECTED and res.kind == "Pod" and obj is None \
                    and (member := self._member_named(res.namespace, res.name)) is not None:  # fmt: skip
                self.refused += 1
                with contextlib.suppress(KubeError):
                    await self._refuse_member(*member, res.reasons)
                continue
            if res.outcome == REJECTED:
                if obj is None:
                    obj = next((o for o in objs.values() if self._ref(o).job == res.name
                                and self._ref(o).namespace == res.namespace), None)  # fmt: skip
                if obj is None:
                    log.warning("%s %s refused: %s", res.kind, res.name, "; ".join(res.reasons))
                    continue
                self.refused += 1
                with contextlib.suppress(KubeError):
                    await status.refuse(self.kube, obj, res.reasons, self.clock())
            else:
                self.admitted += 1

    def _judge_again(self, kind: str, ns: str, name: str, objs: dict[tuple[str, str], dict[str, Any]],
                     others: dict[tuple[str, str, str], dict[str, Any]]) -> bool:  # fmt: skip
        """An object whose write another service's append beat (the scheduler's verdict on the
        job landing between admission's read of the job's last sequence and its own append):
        nothing was judged wrong, so it is judged again shortly — and said nowhere. Refused
        "apply again", a watched object was never applied again: a PodGroup's pod that joined
        it then (a `JobUpdated`) was not a member for good, its gang never placed (seen under
        load as operators' late pods never running), and its user got a Warning meant for
        `tessera apply`. True when it will be."""
        if kind == "PodGroup" and (pg := self.groups.get((ns, name))) is not None:
            self.judged.pop((ns, name), None)
            what, obj = "podgroup", pg
        elif kind == "Job" and (job := others.get(("Job", ns, name))) is not None:
            self.judged.pop((ns, name), None)
            what, obj = "job", job
        elif kind == "Queue" and (q := others.get(("Queue", "", name))) is not None:
            what, obj, ns = "queue", q, ""  # (a Queue edit beaten by the queue flow's state change)
        elif kind == "Pod" and (pod := objs.get((ns, name))) is not None:
            what, obj = "pod", pod
        else:
            return False
        log.info("%s %s/%s: written concurrently with another service's event; judged again", kind, ns, name)
        key = self._keep(what, Change("upsert", f"{ns}/{name}" if ns else name, obj))
        asyncio.get_running_loop().call_later(JUDGE_AGAIN_AFTER, self._release, key)
        return True

    def _member_named(self, namespace: str, name: str) -> tuple[tuple[str, str], dict[str, Any]] | None:
        """(its PodGroup, the pod) for a pod kept as a group's member."""
        for key, pods_of in self.members.items():
            if key[0] == namespace and name in pods_of:
                return key, pods_of[name]
        return None

    async def _refuse_member(self, group: tuple[str, str], obj: dict[str, Any], reasons: tuple[str, ...]) -> None:
        """A PodGroup's refused pod is told so, as a pod of its own is: one the running group
        has among its tasks runs on as admitted (its edit is what was refused: a Warning
        Event), any other waits unbound for ever (the Rejected condition and the Event)."""
        job = self.admission.known.jobs.get(group)
        if job is not None and job.live and any(self._ref(obj).name in t.pod_names for t in job.spec.tasks):
            await status.write_event(self.kube, obj, "Warning", "FailedUpdate", "; ".join(reasons), self.clock())
        else:
            await status.refuse(self.kube, obj, reasons, self.clock())

    async def _hold(self, gated: Iterable[dict[str, Any]]) -> None:
        """Say why a gated pod waits, in kube-scheduler's words, as it would: the pod is not in
        the log until its gates are removed (the watch then brings it as any new pod), so no
        session proposes it and nothing tries its binding, which the API server would refuse.
        Written only when the pod does not say so already (its own update comes back here)."""
        for obj in gated:
            try:
                await status.write_condition(self.kube, obj, pods.GATED_REASON, pods.GATED_MESSAGE, self.clock())
            except KubeError as exc:
                if exc.status != 404:
                    log.warning("%s/%s: SchedulingGated not written: %s", self._ref(obj).namespace,
                                self._ref(obj).name, exc)  # fmt: skip

    async def recover(self) -> None:
        pass  # what admission knows comes from the log; the pods from the first list

    async def run(self, stopping: asyncio.Event) -> None:
        async def stop() -> None:  # wakes the wait below (a timed wait per batch was 3 % of
            await stopping.wait()  # admission's CPU in issue 29's profile)
            self.changes.put_nowait(_STOP)

        feeders = [asyncio.create_task(self._feed_all()), asyncio.create_task(stop())]
        try:
            while not stopping.is_set():
                first = await self.changes.get()
                batch = [first]
                while len(batch) < MAX_BATCH and not self.changes.empty():
                    batch.append(self.changes.get_nowait())
                if any(item is _STOP for item in batch):
                    break
                try:
                    await self.process(batch)
                except Exception:
                    log.exception("a batch of %d changes was not admitted; retrying", len(batch))
                    await asyncio.sleep(1.0)
                    # ahead of what came since: put behind it, a pod's create came back after its
                    # deletion (that arrived meanwhile) and was admitted for a pod gone for good
                    since = [self.changes.get_nowait() for _ in range(self.changes.qsize())]
                    for item in batch + since:
                        self.changes.put_nowait(item)
        finally:
            await cancel_all(feeders)


_STOP: tuple[str, Change] = ("stop", Change("synced", "", {}))  # the end of `run`'s wait


def _queue_of(doc: dict[str, Any], namespace_queue: Callable[[str], str] = lambda _ns: "default") -> str | None:
    """The queue a Job, PodGroup or pod document names (None for other kinds); a PodGroup or a
    plain pod naming none, or `default` (the CRD's default): its namespace's (`namespace_queue`,
    admission's defaulting, `group_queue`)."""
    kind = doc.get("kind")
    ns = str((doc.get("metadata") or {}).get("namespace") or "default")
    if kind == "Job":
        return str((doc.get("spec") or {}).get("queue") or "default")
    if kind == "PodGroup":
        return group_queue(str((doc.get("spec") or {}).get("queue") or ""), namespace_queue(ns))[0]
    if kind == "Pod":
        annotations = (doc.get("metadata") or {}).get("annotations") or {}
        if _group_of(doc):
            return str(annotations.get(QUEUE_NAME) or "default")
        return group_queue(str(annotations.get(QUEUE_NAME) or ""), namespace_queue(ns))[0]
    return None


def _group_of(doc: dict[str, Any]) -> tuple[str, str] | None:
    """(namespace, PodGroup) a pod document names, if it names one."""
    m = doc.get("metadata") or {}
    annotations = m.get("annotations") or {}
    group = annotations.get(GROUP_NAME) or annotations.get(GROUP_NAME_VOLCANO)
    return (str(m.get("namespace") or "default"), str(group)) if group else None


#: the kind of the document each watched resource deleted in a batch may have added earlier in it
_DOC_KINDS = {"queue": "Queue", "job": "Job", "hypernode": "HyperNode", "namespace": "Namespace"}


def _unsaid(docs: list[dict[str, Any]], others: dict[tuple[str, str, str], dict[str, Any]], kind: str,
            obj: dict[str, Any]) -> None:  # fmt: skip
    """Drop what an object deleted in the batch added earlier in it (created and deleted within
    one batch): judged after the loop, it was written after its own deletion — a Job, HyperNode
    or Namespace the API server no longer had, that no later event would ever end."""
    m = volcano.meta(obj)
    name = str(m.get("name") or "")
    ns = "" if kind in ("Queue", "HyperNode", "Namespace") else str(m.get("namespace") or "default")

    def same(d: dict[str, Any]) -> bool:
        dm = d.get("metadata") or {}
        return d.get("kind") == kind and str(dm.get("name") or "") == name \
            and (not ns or str(dm.get("namespace") or "default") == ns)  # fmt: skip

    docs[:] = [d for d in docs if not same(d)]
    others.pop((kind, ns, name), None)


def _latest(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each object once, as its last change in the batch shows it: a Queue created and then
    given its status within one batch came twice, and admission refused the pair as a
    "duplicate queue" (a Warning on the Queue, and its change not taken)."""
    def key(d: dict[str, Any]) -> tuple[str, str, str]:
        m = d.get("metadata") or {}
        return str(d.get("kind") or ""), str(m.get("namespace") or ""), str(m.get("name") or "")

    last = {key(d): i for i, d in enumerate(docs)}
    return [d for i, d in enumerate(docs) if last[key(d)] == i]


def _version(obj: dict[str, Any]) -> bytes:
    """What admission judges of a Volcano object (no status, no server fields), as a digest:
    one is held per live object, and a Job's manifest runs to kilobytes."""
    return hashlib.blake2b(msgspec.json.encode(volcano.manifest(obj)), digest_size=16).digest()


def _from_object(uid: str) -> Callable[[JobSpec], bool]:
    """Whether a live job was admitted from the Volcano object (Job, PodGroup) with this uid."""

    def check(spec: JobSpec) -> bool:
        return spec.annotations.get(volcano.OBJECT_UID) == uid

    return check


def _from_pod(uid: str) -> Callable[[JobSpec], bool]:
    """Whether a live job was admitted from the pod with this uid: its task names the pod's uid
    (a job admitted before tasks carried it names none: taken as the pod's, as it was); a job
    admitted from an object (a Volcano Job, a PodGroup) is never a pod's."""

    def check(spec: JobSpec) -> bool:
        if spec.annotations.get(volcano.OBJECT_UID):
            return False
        uids = _pod_uids(spec)
        return not uids or not uid or uid in uids

    return check


def _pod_uids(spec: JobSpec) -> set[str]:
    """The uids of the pods a job's tasks were admitted from (none before tasks carried them)."""
    return {t.annotations.get(pods.POD_UID, "") for t in spec.tasks} - {""}
