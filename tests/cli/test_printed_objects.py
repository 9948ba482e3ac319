"""`tessera get -o yaml|json` prints each object with its whole admitted spec — a Pod's
containers with their resources and the schedulerName it names, a Volcano Job's task templates,
policies, plugins and schedulerName, a PodGroup's own spec — and that output applied again is
the same object (`unchanged`), as `kubectl get -o yaml | kubectl apply -f -` is.

Before: a Pod's spec was `{schedulerName: volcano, nodeName}` whatever it said (no containers),
and a Job's had no templates, so applying the printed Job was refused."""

from __future__ import annotations

import json

import msgspec
import yaml

from contracts.api import ACCEPTED, UNCHANGED
from contracts.events import JobSubmitted, PlacementCommitted, TaskPlacement, TaskStarted
from services.admission.service import AdmissionService
from services.cli.get import listing_of
from services.runtime.eventlog import EventLog, StoredMessage
from tests.allocator.scenario import decoded, put

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: printed}
spec: {weight: 1}
"""
POD = """
apiVersion: v1
kind: Pod
metadata:
  name: server
  labels: {app: infer}
  annotations: {scheduling.volcano.sh/queue-name: printed}
spec:
  schedulerName: hami-scheduler
  nodeSelector: {zone: a}
  containers:
    - name: c
      image: ascend-vllm:0.9
      env: [{name: MODE, value: serve}]
      resources:
        limits: {cpu: "2", memory: 4Gi, huawei.com/Ascend910B3: "1", huawei.com/Ascend910B3-memory: "16384"}
---
apiVersion: v1
kind: Pod
metadata: {name: unnamed-sched}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""
JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, labels: {team: a}}
spec:
  queue: printed
  minAvailable: 2
  policies: [{event: PodEvicted, action: RestartJob}]
  plugins: {env: [], svc: []}
  tasks:
    - name: worker
      replicas: 2
      policies: [{event: TaskCompleted, action: CompleteJob}]
      template:
        metadata: {labels: {role: worker}}
        spec:
          restartPolicy: OnFailure
          containers:
            - name: c
              image: mindspore:2.3
              command: [python, train.py]
              resources: {limits: {cpu: "4", huawei.com/Ascend910B3: "1"}}
"""
GROUP = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pair}
spec: {minMember: 2, queue: printed, minTaskMember: {w: 2}}
---
apiVersion: v1
kind: Pod
metadata:
  name: pair-0
  labels: {volcano.sh/task-spec: w}
  annotations: {scheduling.k8s.io/group-name: pair}
spec:
  schedulerName: volcano
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: pair-1
  labels: {volcano.sh/task-spec: w}
  annotations: {scheduling.k8s.io/group-name: pair}
spec:
  schedulerName: volcano
  containers: [{name: c, image: busybox, resources: {limits: {cpu: "1"}}}]
"""


async def _applied(log: EventLog, text: str) -> AdmissionService:
    svc = AdmissionService(log)
    await svc.recover()
    reply = await svc.apply(QUEUE + "---" + text)
    assert not reply.error and {r.outcome for r in reply.results} == {ACCEPTED}, reply
    return svc


async def _messages(log: EventLog) -> list[StoredMessage]:
    return [m async for m in log.replay()]


def _objects(messages: list[StoredMessage], what: str) -> dict[str, dict]:
    got, _ = listing_of(messages, what, None)
    return {o["metadata"]["name"]: json.loads(json.dumps(o)) for o in got.objects}


async def test_a_printed_pod_has_its_whole_spec_and_applies_again_unchanged(event_log: EventLog) -> None:
    svc = await _applied(event_log, POD)
    # one runs (bound, with its cards): the printed Running pod with its nodeName is the same pod
    subject = event_log.subjects.job("default", "server")
    await put(event_log, subject, PlacementCommitted(namespace="default", name="server",
                                                     placements=(TaskPlacement(task="server", node="node-a"),)))  # fmt: skip
    await put(event_log, subject, TaskStarted(namespace="default", name="server", task="server", node="node-a"))
    pods = _objects(await _messages(event_log), "pods")
    server, unnamed = pods["server"], pods["unnamed-sched"]
    (container,) = server["spec"]["containers"]
    assert container["resources"]["limits"]["huawei.com/Ascend910B3-memory"] == "16384"
    assert container["env"] == [{"name": "MODE", "value": "serve"}]
    assert server["spec"]["nodeSelector"] == {"zone": "a"}
    # the name each pod's object holds: its own, or the API server's default — not `volcano`
    assert server["spec"]["schedulerName"] == "hami-scheduler"
    assert unnamed["spec"]["schedulerName"] == "default-scheduler"
    assert server["spec"]["nodeName"] == "node-a" and server["status"]["phase"] == "Running"
    assert server["metadata"]["annotations"]["scheduling.k8s.io/group-name"].startswith("podgroup-")
    # `-o wide`'s QUEUE: the annotation a pod gives, else its job's queue (no annotation printed)
    got, _ = listing_of(await _messages(event_log), "pods", None)
    assert {r["name"]: r["queue"] for r in got.rows} == {"server": "printed", "unnamed-sched": "default"}
    printed = yaml.safe_dump_all([server, unnamed], sort_keys=False)
    again = await svc.apply(printed)
    assert [(r.name, r.outcome, r.reasons) for r in again.results] == [
        ("server", UNCHANGED, ()), ("unnamed-sched", UNCHANGED, ())]  # fmt: skip


async def test_a_printed_job_has_its_templates_and_applies_again_unchanged(event_log: EventLog) -> None:
    svc = await _applied(event_log, JOB)
    job = _objects(await _messages(event_log), "jobs")["train"]
    spec = job["spec"]
    (task,) = spec["tasks"]
    assert task["template"]["spec"]["containers"][0]["command"] == ["python", "train.py"]
    assert task["template"]["metadata"]["labels"] == {"role": "worker"}
    assert task["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert spec["policies"] == [{"event": "PodEvicted", "action": "RestartJob"}]
    assert spec["plugins"] == {"env": [], "svc": []}
    # what Volcano's webhook writes into the stored Job: its scheduler, maxRetry, task minAvailable
    assert (spec["schedulerName"], spec["maxRetry"], task["minAvailable"]) == ("volcano", 3, 2)
    assert job["metadata"]["labels"] == {"team": "a"}
    pods = _objects(await _messages(event_log), "pods")
    worker = pods["train-worker-0"]
    assert worker["spec"]["containers"][0]["image"] == "mindspore:2.3"
    assert worker["spec"]["schedulerName"] == "volcano" and worker["spec"]["restartPolicy"] == "OnFailure"
    again = await svc.apply(yaml.safe_dump(job, sort_keys=False))
    assert [(r.name, r.outcome, r.reasons) for r in again.results] == [("train", UNCHANGED, ())]


async def test_a_printed_podgroup_and_its_pods_apply_again_unchanged(event_log: EventLog) -> None:
    svc = await _applied(event_log, GROUP)
    messages = await _messages(event_log)
    (group,) = _objects(messages, "podgroups").values()
    assert group["spec"]["minTaskMember"] == {"w": 2} and group["spec"]["minMember"] == 2
    pods = _objects(messages, "pods")
    assert pods["pair-1"]["spec"]["containers"][0]["image"] == "busybox"
    # the PodGroup as a cluster names it is the applied one (`pair`): applied with its pods
    group["metadata"]["name"] = "pair"
    printed = yaml.safe_dump_all([group, pods["pair-0"], pods["pair-1"]], sort_keys=False)
    again = await svc.apply(printed)
    assert [(r.kind, r.name, r.outcome, r.reasons) for r in again.results] == [("PodGroup", "pair", UNCHANGED, ())]


def test_a_log_without_object_text_still_prints_what_it_knows() -> None:
    """A log written before the object text was kept: the admitted spec's fields, no guess at
    a pod's schedulerName (it used to say `volcano` whatever the pod said)."""
    from contracts.envelope import TYPE
    from contracts.subjects import Subjects
    from services.core.workload import admit, load_documents

    (spec,) = admit(load_documents(POD.split("---")[1])).jobs
    event = JobSubmitted(spec=spec)
    msg = StoredMessage(1, Subjects().job("default", spec.name), msgspec.json.encode(event), {TYPE: "JobSubmitted"})
    (pod,) = _objects([msg], "pods").values()
    assert "schedulerName" not in pod["spec"] and "containers" not in pod["spec"]


async def test_objects_read_from_an_api_server_carry_no_object_text(event_log: EventLog) -> None:
    """Pods the cluster's pod source admits: `tessera get` prints the API server's objects
    there, so their text is not kept in the log (~1 KB more per pod, read by every service)."""
    svc = await _applied(event_log, POD)
    docs = [yaml.safe_load(text) for text in GROUP.split("---")]
    results = await svc.admit_documents(docs)
    assert {r.outcome for r in results} == {ACCEPTED}
    submitted = {e.spec.name: e for e in decoded(await _messages(event_log)) if isinstance(e, JobSubmitted)}
    assert submitted["server"].manifest  # applied: kept for `get -o yaml`
    assert submitted["pair"].manifest == ""
