"""The API server's behaviours Tessera depends on, each shown on the harness's emulator and on
a real API server where one is given (issue 28): code written to kmock's leniency fails here.

Graceful deletion (a bound pod keeps a deletionTimestamp until the kubelet confirms), foreground
deletion (the owner kept, with its finalizer, until its blocking dependents are gone), a pod
PodSecurity admission refuses (403 Forbidden, naming the pod and the rules), 409 on a stale
resourceVersion and on failed delete preconditions, merge-patch `null` deleting a key, the
not-ready taint on a new Node (lifted once it is Ready), bindings refused for gated or deleting
pods, the field and label selectors Tessera's watches use (an object that comes to match or
stops matching one is ADDED or DELETED for that watch), and a custom object's CRD defaults (set
where it lacks them, on create and on every update's result)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest

from services.kube import volcano
from services.kube.client import KubeError, claims_path, nodes_path, pods_path
from services.runtime.waits import within
from tests.kube.cluster import (
    DEAD_WEBHOOK,
    FOREGROUND,
    NAMESPACES,
    NOT_READY_TAINT,
    Cluster,
    GarbageCollector,
)
from tests.kube.test_job_ttl import one_pod_job
from tests.processes import wait_until


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}  # fmt: skip


async def bind(cluster: Cluster, name: str, node: str) -> None:
    await cluster.kube.create(pods_path("default", name, "binding"), {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})  # fmt: skip


async def test_a_bound_pod_is_deleted_gracefully_and_gone_once_the_kubelet_confirms(cluster: Cluster) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod(pod("bound", terminationGracePeriodSeconds=30))
    await bind(cluster, "bound", "n1")
    await cluster.kube.delete(pods_path("default", "bound"))
    held = await cluster.pod("default", "bound")
    assert held is not None, "a bound pod went at once: no grace period"
    assert held["metadata"].get("deletionTimestamp") and held["metadata"].get("deletionGracePeriodSeconds") == 30
    await cluster.kube.delete(pods_path("default", "bound"), {
        "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"uid": held["metadata"]["uid"]}})  # fmt: skip  # the kubelet's confirmation
    assert await cluster.pod("default", "bound") is None
    await cluster.create_pod(pod("unbound"))
    await cluster.kube.delete(pods_path("default", "unbound"))
    assert await cluster.pod("default", "unbound") is None, "an unscheduled pod is deleted at once"


async def test_a_foreground_deletion_keeps_the_owner_until_its_blocking_dependents_are_gone(cluster: Cluster) -> None:
    """`propagationPolicy: Foreground` (kubectl delete --cascade=foreground, Argo CD's prune):
    the owner stays, with a deletionTimestamp and the `foregroundDeletion` finalizer — for good
    on an API server alone; the garbage collector deletes what names it in `ownerReferences`
    and removes the finalizer once none with `blockOwnerDeletion` is left (a bound pod blocks
    until its kubelet confirms), and the owner is gone. kmock deleted it at once."""
    await cluster.volcano_crds()
    await cluster.create_node("n1")
    ns = "default"
    job = await cluster.kube.create(volcano.jobs_path(ns), one_pod_job("owner", None))
    ref = {"apiVersion": volcano.BATCH, "kind": "Job", "name": "owner", "uid": job["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    await cluster.create_pod({**pod("owner-w-0", terminationGracePeriodSeconds=30), "metadata": {
        "name": "owner-w-0", "labels": {volcano.JOB_NAME: "owner"}, "ownerReferences": [ref]}})  # fmt: skip
    await bind(cluster, "owner-w-0", "n1")
    await cluster.create_pod(pod("bystander"))
    group = volcano.podgroups_path(ns, "owner-pg")
    await cluster.kube.create(volcano.podgroups_path(ns), {
        "apiVersion": volcano.SCHEDULING, "kind": "PodGroup",
        "metadata": {"name": "owner-pg", "ownerReferences": [ref]}, "spec": {"minMember": 1}})  # fmt: skip
    await cluster.kube.delete(volcano.jobs_path(ns, "owner"), {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"})  # fmt: skip
    held = await cluster.present(volcano.jobs_path(ns, "owner"))
    assert held is not None, "deleted at once: a foreground deletion waits for the dependents"
    assert held["metadata"].get("deletionTimestamp") and FOREGROUND in held["metadata"].get("finalizers", []), held

    async with GarbageCollector(str(cluster.kubeconfig)):
        async def dependents_deleted() -> bool:
            worker = await cluster.pod(ns, "owner-w-0")
            return await cluster.present(group) is None and worker is not None \
                and bool(worker["metadata"].get("deletionTimestamp"))  # fmt: skip

        await wait_until(dependents_deleted, 30, "the PodGroup deleted, the bound pod terminating")
        assert await cluster.present(volcano.jobs_path(ns, "owner")) is not None, "gone before its pod"
        worker = await cluster.pod(ns, "owner-w-0")
        assert worker is not None
        await cluster.kube.delete(pods_path(ns, "owner-w-0"), {  # its kubelet's confirmation
            "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": {"uid": worker["metadata"]["uid"]}})  # fmt: skip

        async def owner_gone() -> bool:
            return await cluster.present(volcano.jobs_path(ns, "owner")) is None

        await wait_until(owner_gone, 30, "the Job gone once its last blocking dependent went")
    assert await cluster.pod(ns, "bystander") is not None, "a pod the Job does not own was deleted"


async def test_a_pod_that_breaks_its_namespaces_pod_security_is_refused_with_403(cluster: Cluster) -> None:
    """PodSecurity admission (`pod-security.kubernetes.io/enforce: restricted` on the namespace):
    a pod that sets no securityContext is refused — 403, a Status with reason Forbidden whose
    message names the pod and each rule it breaks — and nothing is stored; a pod that follows
    the rules, pods in other namespaces, and any pod once the label is gone are made."""
    await cluster.enforce_pod_security("locked")
    with pytest.raises(KubeError) as exc:
        await cluster.kube.create(pods_path("locked"), pod("loose"))
    assert exc.value.status == 403
    body = json.loads(exc.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Forbidden", 403), body
    assert body["message"].startswith('pods "loose" is forbidden: violates PodSecurity "restricted:latest": '), body
    assert 'container "c" must set securityContext.allowPrivilegeEscalation=false' in body["message"], body
    assert exc.value.message == body["message"]
    assert await cluster.pod("locked", "loose") is None
    tight = pod("tight", securityContext={"runAsNonRoot": True, "runAsUser": 1000,
                                          "seccompProfile": {"type": "RuntimeDefault"}})  # fmt: skip
    tight["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    await cluster.kube.create(pods_path("locked"), tight)
    await cluster.create_pod(pod("elsewhere"))
    await cluster.enforce_pod_security("locked", None)
    await cluster.kube.create(pods_path("locked"), pod("loose"))
    assert await cluster.pod("locked", "loose") is not None


async def test_a_create_past_an_object_count_quota_is_refused_with_403(cluster: Cluster) -> None:
    """A ResourceQuota's object count (`count/podgroups.scheduling.volcano.sh`: 1): the first
    PodGroup of the namespace is made, the second refused — 403 Forbidden naming the object and
    the quota — and not stored; other namespaces and other kinds are not counted, and once the
    quota is gone the create goes through."""
    await cluster.volcano_crds()
    key = "count/podgroups.scheduling.volcano.sh"
    await cluster.limit_count("capped", key, 1)

    def group(name: str) -> dict[str, Any]:
        return {"apiVersion": volcano.SCHEDULING, "kind": "PodGroup", "metadata": {"name": name},
                "spec": {"minMember": 1}}  # fmt: skip

    await cluster.kube.create(volcano.podgroups_path("capped"), group("one"))
    with pytest.raises(KubeError) as exc:
        await cluster.kube.create(volcano.podgroups_path("capped"), group("two"))
    assert exc.value.status == 403
    body = json.loads(exc.value.body)
    assert (body["kind"], body["reason"]) == ("Status", "Forbidden"), body
    assert body["message"].startswith('podgroups.scheduling.volcano.sh "two" is forbidden: '), body
    if cluster.kind == "kmock":
        assert body["message"].endswith(f"exceeded quota: objects, requested: {key}=1, used: {key}=1, "
                                        f"limited: {key}=1"), body  # fmt: skip
    assert await cluster.present(volcano.podgroups_path("capped", "two")) is None
    await cluster.kube.create(volcano.podgroups_path("default"), group("two"))  # another namespace
    await cluster.kube.create(pods_path("capped"), pod("p"))  # another kind
    await cluster.limit_count("capped", key, None)
    await cluster.kube.create(volcano.podgroups_path("capped"), group("two"))
    assert await cluster.present(volcano.podgroups_path("capped", "two")) is not None


async def test_a_create_a_down_webhook_should_judge_is_answered_500_and_not_made(cluster: Cluster) -> None:
    """A failing-closed validating webhook nobody answers: the pod create is a 500
    InternalError naming the webhook (not a refusal of the pod) and nothing is stored; other
    namespaces and kinds pass, and once the webhook is gone the same create is made."""
    await cluster.webhook_down("walled", "", "pods")
    cluster.kube.retries, retries = 0, cluster.kube.retries  # (the client's own 5xx retries: seconds)
    try:
        with pytest.raises(KubeError) as exc:
            await cluster.kube.create(pods_path("walled"), pod("p"))
    finally:
        cluster.kube.retries = retries
    assert exc.value.status == 500
    body = json.loads(exc.value.body)
    assert (body["kind"], body["reason"]) == ("Status", "InternalError"), body
    assert body["message"].startswith(f'Internal error occurred: failed calling webhook "{DEAD_WEBHOOK}"'), body
    assert await cluster.pod("walled", "p") is None
    await cluster.kube.create(pods_path("default"), pod("p"))  # another namespace
    await cluster.kube.create(f"{NAMESPACES}/walled/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                                   "metadata": {"name": "c"}})  # another kind
    await cluster.webhook_down("walled", "", "pods", down=False)
    await cluster.kube.create(pods_path("walled"), pod("p"))
    assert await cluster.pod("walled", "p") is not None


async def test_a_new_pod_is_pending_whatever_status_it_was_created_with(cluster: Cluster) -> None:
    made = await cluster.kube.create(pods_path("default"), {**pod("p"), "status": {"phase": "Running"}})
    assert made["status"]["phase"] == "Pending"
    assert (await cluster.pod("default", "p"))["status"]["phase"] == "Pending"  # type: ignore[index]


async def test_a_delete_whose_uid_precondition_fails_is_409_and_deletes_nothing(cluster: Cluster) -> None:
    await cluster.create_pod(pod("p"))
    with pytest.raises(KubeError) as exc:
        await cluster.kube.delete(pods_path("default", "p"), {
            "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "not-its-uid"}})  # fmt: skip
    assert exc.value.status == 409
    assert await cluster.pod("default", "p") is not None
    assert await cluster.kube.delete_this(pods_path("default", "p"), "not-its-uid") is False


async def test_a_write_with_a_stale_resource_version_is_409(cluster: Cluster) -> None:
    await cluster.create_node("n1")
    first = await cluster.kube.get(nodes_path("n1"))
    rv = first["metadata"]["resourceVersion"]
    await cluster.kube.patch(nodes_path("n1"), {"metadata": {"annotations": {"a": "1"}, "resourceVersion": rv}})
    with pytest.raises(KubeError) as exc:
        await cluster.kube.patch(nodes_path("n1"), {"metadata": {"annotations": {"a": "2"}, "resourceVersion": rv}})
    assert exc.value.status == 409
    assert (await cluster.kube.get(nodes_path("n1")))["metadata"]["annotations"]["a"] == "1"


async def test_null_in_a_merge_patch_deletes_the_key(cluster: Cluster) -> None:
    await cluster.create_node("n1", annotations={"keep": "1", "drop": "2"})
    await cluster.kube.patch(nodes_path("n1"), {"metadata": {"annotations": {"drop": None}}})
    annotations = (await cluster.kube.get(nodes_path("n1")))["metadata"]["annotations"]
    assert "drop" not in annotations and annotations["keep"] == "1"


async def test_a_new_node_is_tainted_not_ready_until_its_kubelet_reports_ready(cluster: Cluster) -> None:
    await cluster.create_node("down", ready=False)
    taints = (await cluster.kube.get(nodes_path("down")))["spec"].get("taints") or []
    assert any(t["key"] == NOT_READY_TAINT["key"] and t["effect"] == "NoSchedule" for t in taints), taints
    await cluster.create_node("up")
    taints = (await cluster.kube.get(nodes_path("up")))["spec"].get("taints") or []
    assert not any(t["key"] == NOT_READY_TAINT["key"] for t in taints), taints


async def test_bindings_are_refused_for_gated_and_for_deleting_pods(cluster: Cluster) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod(pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
    with pytest.raises(KubeError) as exc:
        await bind(cluster, "gated", "n1")
    assert exc.value.status == 409 and "schedulingGates" in exc.value.body
    await cluster.create_pod(pod("leaving", nodeName="", finalizers=None))
    await cluster.kube.patch(pods_path("default", "leaving"), {"metadata": {"finalizers": ["example.com/hold"]}})
    await cluster.kube.delete(pods_path("default", "leaving"))  # held by its finalizer
    with pytest.raises(KubeError) as exc:
        await bind(cluster, "leaving", "n1")
    assert exc.value.status == 409 and "is being deleted" in exc.value.body
    await cluster.kube.patch(pods_path("default", "leaving"), {"metadata": {"finalizers": None}})


async def test_a_binding_for_another_uid_is_409_naming_the_uid_precondition_and_binds_nothing(cluster: Cluster) -> None:
    """The binding's uid is its update's precondition (BindingREST): a pod deleted and made
    again under its name is not bound for the old one — 409 Conflict, "Precondition failed: UID
    in precondition", checked before the pod's own state (here: being deleted)."""
    await cluster.create_node("n1")
    old = await cluster.create_pod(pod("again"))
    await cluster.kube.delete(pods_path("default", "again"))
    made = await cluster.create_pod(pod("again"))
    await cluster.kube.patch(pods_path("default", "again"), {"metadata": {"finalizers": ["example.com/hold"]}})
    await cluster.kube.delete(pods_path("default", "again"))  # held by its finalizer: being deleted
    with pytest.raises(KubeError) as exc:
        await cluster.kube.create(pods_path("default", "again", "binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "again", "uid": old["metadata"]["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})  # fmt: skip
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"
    assert (f"Precondition failed: UID in precondition: {old['metadata']['uid']}, "
            f"UID in object meta: {made['metadata']['uid']}") in exc.value.message
    assert not (await cluster.kube.get(pods_path("default", "again")))["spec"].get("nodeName")
    await cluster.kube.patch(pods_path("default", "again"), {"metadata": {"finalizers": None}})


async def test_a_binding_is_one_change_of_the_pod_with_its_node_annotations_and_condition(cluster: Cluster) -> None:
    """The API server binds by one update of the pod: `spec.nodeName`, the Binding's annotations
    and PodScheduled=True arrive together in one MODIFIED (every pod watcher decodes each
    change, so a harness writing them apart doubled what Tessera's watches cost per pod)."""
    await cluster.create_node("n1")
    made = await cluster.create_pod(pod("one"))
    query = {"resourceVersion": made["metadata"]["resourceVersion"], "timeoutSeconds": "5",
             "fieldSelector": "metadata.name=one"}  # fmt: skip
    await cluster.kube.create(pods_path("default", "one", "binding"), {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "one", "annotations": {"example.com/a": "b"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})  # fmt: skip
    await cluster.kube.patch(pods_path("default", "one"), {"metadata": {"labels": {"after": "binding"}}})
    seen: list[dict[str, Any]] = []
    async for ev in cluster.kube.watch(pods_path("default"), query, read_timeout=10):
        seen.append(ev)
        if (ev["object"]["metadata"].get("labels") or {}).get("after"):
            break
    assert [e["type"] for e in seen] == ["MODIFIED", "MODIFIED"], [e["type"] for e in seen]
    bound = seen[0]["object"]
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"]["example.com/a"] == "b"
    conditions = {c["type"]: c["status"] for c in bound["status"].get("conditions") or []}
    assert conditions.get("PodScheduled") == "True", conditions


async def test_a_field_selector_on_the_node_name_lists_bound_pods_only(cluster: Cluster) -> None:
    await cluster.create_node("n1")
    await cluster.create_pod(pod("free"))
    await cluster.create_pod(pod("placed"))
    await bind(cluster, "placed", "n1")
    listed = await cluster.kube.get(pods_path(), fieldSelector="spec.nodeName!=")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["placed"]
    listed = await cluster.kube.get(pods_path(), fieldSelector="spec.nodeName=n1,metadata.name=placed")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["placed"]


async def test_a_field_selector_on_the_scheduler_name_lists_and_watches_its_pods_only(cluster: Cluster) -> None:
    """Tessera's pod watches ask the server for their schedulers' pods only; a pod that names
    no scheduler is the default scheduler's (the server defaults the field)."""
    await cluster.create_pod(pod("ours", schedulerName="volcano"))
    await cluster.create_pod(pod("theirs"))
    await cluster.create_pod(pod("other", schedulerName="yunikorn"))
    listed = await cluster.kube.get(pods_path(), fieldSelector="spec.schedulerName=volcano")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["ours"]
    listed = await cluster.kube.get(pods_path(), fieldSelector="spec.schedulerName=default-scheduler")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["theirs"]
    query = {"resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "5",
             "fieldSelector": "spec.schedulerName=volcano"}  # fmt: skip
    await cluster.create_pod(pod("late-theirs"))
    await cluster.create_pod(pod("late-ours", schedulerName="volcano"))
    seen = []
    async for ev in cluster.kube.watch(pods_path(), query, read_timeout=10):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if ("ADDED", "late-ours") in seen:
            break
    assert seen == [("ADDED", "late-ours")], seen


async def test_a_claims_status_is_written_only_through_its_status_subresource(cluster: Cluster) -> None:
    """What the test provisioner relies on, and the binder reads (issue 22): `status.phase` of a
    PersistentVolumeClaim changes only through `…/status`; a merge patch's `null` removes an
    annotation; a write at a stale resourceVersion is 409."""
    ns = cluster.namespace
    made = await cluster.kube.create(claims_path(ns), {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip
    stale = made["metadata"]["resourceVersion"]
    await cluster.kube.patch(claims_path(ns, "data"), {"status": {"phase": "Bound"}})
    got = await cluster.kube.get(claims_path(ns, "data"))
    assert (got.get("status") or {}).get("phase") != "Bound", "a plain patch changed the claim's status"
    await cluster.kube.patch(claims_path(ns, "data", "status"), {"status": {"phase": "Bound"}})
    got = await cluster.kube.get(claims_path(ns, "data"))
    assert got["status"]["phase"] == "Bound"
    await cluster.kube.patch(claims_path(ns, "data"),
                             {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": None}}})  # fmt: skip
    got = await cluster.kube.get(claims_path(ns, "data"))
    assert "volume.kubernetes.io/selected-node" not in (got["metadata"].get("annotations") or {})
    with pytest.raises(KubeError) as exc:
        await cluster.kube.patch(claims_path(ns, "data"),
                                 {"metadata": {"resourceVersion": stale, "annotations": {"a": "b"}}})  # fmt: skip
    assert exc.value.status == 409
    await cluster.kube.delete(claims_path(ns, "data"))


async def test_a_watch_from_a_listed_version_sends_what_happened_after_it(cluster: Cluster) -> None:
    """A reflector lists, then watches from the list's resourceVersion: the server sends what
    changed after it — a pod deleted in between is a DELETED event — and not again the objects
    the list already held (kmock's own watch sent the current objects instead, so a pod deleted
    between a list and its watch stayed in a reflector's cache for good)."""
    await cluster.create_pod(pod("kept"))
    await cluster.create_pod(pod("gone"))
    listed = await cluster.kube.get(pods_path("default"))
    since = listed["metadata"]["resourceVersion"]
    await cluster.kube.delete(pods_path("default", "gone"))
    await cluster.create_pod(pod("new"))
    seen: list[tuple[str, str]] = []
    query = {"resourceVersion": since, "timeoutSeconds": "5"}
    async for ev in cluster.kube.watch(pods_path("default"), query, read_timeout=10):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if ("ADDED", "new") in seen:
            break
    assert seen[:2] == [("DELETED", "gone"), ("ADDED", "new")], seen


async def _watch_until(cluster: Cluster, query: dict[str, str], last: tuple[str, str]) -> list[tuple[str, str, str]]:
    """(type, pod, its `app` label) of each event of a pods watch, up to `last` (type, pod)."""
    seen: list[tuple[str, str, str]] = []
    async for ev in cluster.kube.watch(pods_path("default"), query, read_timeout=10):
        meta = ev["object"]["metadata"]
        seen.append((ev["type"], meta["name"], (meta.get("labels") or {}).get("app", "")))
        if seen[-1][:2] == last:
            break
    return seen


async def test_an_object_that_starts_or_stops_matching_a_watch_is_added_or_deleted(cluster: Cluster) -> None:
    """A watch with a selector sees an object that comes to match as ADDED and one that stops
    matching as DELETED (its last matching content), as the API server's watch cache sends
    them: a Volcano Job's pod whose job label is taken off is gone for the job controller's
    label-selected watch, and a pod bound to a node is new to a `spec.nodeName!=` watch."""
    await cluster.create_node("n1")
    made = await cluster.create_pod({**pod("p"), "metadata": {"name": "p", "labels": {"app": "a"}}})
    since = made["metadata"]["resourceVersion"]
    await cluster.kube.patch(pods_path("default", "p"), {"metadata": {"labels": {"app": "b"}}})
    await cluster.kube.patch(pods_path("default", "p"), {"metadata": {"labels": {"app": "a", "x": "1"}}})
    await cluster.kube.patch(pods_path("default", "p"), {"metadata": {"labels": {"x": "2"}}})
    await cluster.create_pod({**pod("end"), "metadata": {"name": "end", "labels": {"app": "a"}}})
    query = {"resourceVersion": since, "timeoutSeconds": "5", "labelSelector": "app=a"}
    seen = await _watch_until(cluster, query, ("ADDED", "end"))
    assert seen == [("DELETED", "p", "a"), ("ADDED", "p", "a"), ("MODIFIED", "p", "a"), ("ADDED", "end", "a")], seen

    await cluster.create_pod(pod("free"))
    listed = await cluster.kube.get(pods_path(), fieldSelector="spec.nodeName!=")
    assert [p["metadata"]["name"] for p in listed["items"]] == []
    await bind(cluster, "free", "n1")
    await cluster.create_pod({**pod("last", nodeName="n1")})
    query = {"resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "5",
             "fieldSelector": "spec.nodeName!="}  # fmt: skip
    seen = await _watch_until(cluster, query, ("ADDED", "last"))
    assert [s[:2] for s in seen] == [("ADDED", "free"), ("ADDED", "last")], seen


async def test_the_benchmark_leaves_a_server_as_it_found_it(cluster: Cluster) -> None:
    """`benchmarks.k8s --kubeconfig` runs shape after mode on one real server: its bound pods
    (no kubelet will confirm their end) and Nodes must be gone before the next run makes the
    same names again, or that run meets 409s and terminating pods."""
    from benchmarks import k8s

    kube = cluster.kube
    if cluster.kind != "kmock":  # (kmock keeps no Namespace objects: any namespace just works)
        await k8s._ensure_namespace(kube)
        await k8s._ensure_namespace(kube)  # a second run: already there is fine
    for _run in range(2):
        await k8s._nodes(kube, 3)
        watch = k8s.Watch(kube)
        await watch.create([k8s._pod(i, "whole") for i in range(4)])
        for i in range(2):  # half bound, as a run that timed out leaves them
            await kube.create(pods_path(k8s.NAMESPACE, f"b-{i}", "binding"), {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"b-{i}"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "bench-0"}})  # fmt: skip
        await k8s._cleanup(kube, 3, [f"b-{i}" for i in range(4)])
        left = (await kube.get(pods_path(k8s.NAMESPACE))).get("items", [])
        assert [p["metadata"]["name"] for p in left] == []
        nodes = [n["metadata"]["name"] for n in (await kube.get(nodes_path())).get("items", [])]
        assert not [n for n in nodes if n.startswith("bench-")]


async def test_a_list_is_a_snapshot_its_watch_continues_from(cluster: Cluster) -> None:
    """A list's resourceVersion and items are one snapshot: every change after it comes on a
    watch from that version. The emulator gave a write its version before storing it, and a
    list read the version after its items — a list served between the two said it was past a
    write it did not hold, and the watch from there never brought that object."""
    if cluster.kind != "kmock" or cluster.store_lock is None:
        pytest.skip("orders requests on the emulator's own lock")

    lock, gate = cluster.store_lock, asyncio.Event()

    async def queued(n: int) -> bool:
        return len(lock._waiters or ()) == n  # type: ignore[attr-defined]

    async def at_gate() -> bool:
        return len(gate._waiters) == 1  # type: ignore[attr-defined]

    cluster.rules.list_gate = gate
    listing = asyncio.create_task(cluster.kube.get(pods_path("default")))
    await wait_until(at_gate, 10, "the list held at the gate")
    await lock.acquire()
    try:
        gate.set()  # the list now waits for the store's lock ...
        await wait_until(lambda: queued(1), 10, "the list waiting for the store")
        making = asyncio.create_task(cluster.create_pod(pod("late")))  # ... and the create behind it
        await wait_until(lambda: queued(2), 10, "the create, given its version, waiting behind it")
    finally:
        lock.release()
    listed, _ = await asyncio.gather(listing, making)
    assert [p["metadata"]["name"] for p in listed["items"]] == []  # listed before the pod was stored
    version = listed["metadata"]["resourceVersion"]
    seen: list[str] = []

    async def watch() -> None:
        async for ev in cluster.kube.watch(pods_path("default"), {"resourceVersion": version, "timeoutSeconds": "30"}):
            seen.append(ev["object"]["metadata"]["name"])

    watching = asyncio.create_task(watch())
    try:
        async def brought() -> bool:
            return "late" in seen

        await wait_until(brought, 10, "the pod stored after the list, on the watch from its version")
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


async def test_a_watch_from_now_misses_nothing_written_while_it_sends_the_present(cluster: Cluster) -> None:
    """A watch from "0" (or no version) sends the objects there now, then every change after
    that snapshot, however long the first part takes to send. The emulator joined its event
    stream only after sending the present, so a write made meanwhile was never sent."""
    if cluster.kind != "kmock":
        pytest.skip("holds one client's watch: the emulator's doing")
    await cluster.create_pod(pod("there"))
    held = cluster.held[(cluster.kube.agent, "pods")] = asyncio.Event()
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for ev in cluster.kube.watch(pods_path("default"), {"resourceVersion": "0", "timeoutSeconds": "30"}):
            seen.append((ev["type"], ev["object"]["metadata"]["name"]))
            if ("ADDED", "late") in seen:
                return

    watching = asyncio.create_task(watch())
    try:
        async def waiting() -> bool:  # the present taken and held: the watch waits at the gate
            return len(held._waiters or ()) == 1  # type: ignore[attr-defined]

        await wait_until(waiting, 10, "the watch holding the present")
        await cluster.create_pod(pod("late"))
        held.set()
        await within(watching, 10)
    finally:
        watching.cancel()
    assert seen == [("ADDED", "there"), ("ADDED", "late")], seen


async def test_a_held_answer_says_what_was_true_when_the_server_made_it(cluster: Cluster) -> None:
    """The harness's `held_answers`: an answer kept on the wire after the server made it still
    shows the object as it was then, while the object changes and its watch tells the change —
    a real client may read a reply older than the watch event it already has."""
    if cluster.kind != "kmock":
        pytest.skip("holds the emulator's answers")
    from services.kube.client import Kube, Limits

    await cluster.create_node("slow")
    key = ("slow-reader", "fetch", "nodes")
    release = cluster.held_answers[key] = asyncio.Event()
    reader = await Kube.connect(str(cluster.kubeconfig), Limits(qps=0), agent="slow-reader")
    try:
        reading = asyncio.create_task(reader.get(nodes_path("slow")))

        async def made() -> bool:
            return cluster.rules.answers_held[key] == 1

        await wait_until(made, 10, "the answer made and held")
        await cluster.kube.patch(nodes_path("slow"), {"metadata": {"annotations": {"changed": "after"}}})
        release.set()
        got = await reading
        assert "changed" not in (got["metadata"].get("annotations") or {})
        now = await cluster.kube.get(nodes_path("slow"))
        assert now["metadata"]["annotations"]["changed"] == "after"
        assert int(now["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    finally:
        release.set()
        await reader.close()


async def test_a_lists_items_carry_no_kind_where_a_watch_events_object_does(cluster: Cluster) -> None:
    """A real server's list names the kind once (`PodList`); its items have neither `kind` nor
    `apiVersion`, which the same object in a watch event has: code comparing the two must not
    take that for a change (kmock's list kept each item's `kind`)."""
    await cluster.create_pod(pod("p"))
    listed = await cluster.kube.get(pods_path("default"))
    assert listed.get("kind") == "PodList" and listed.get("apiVersion") == "v1"
    item = next(o for o in listed["items"] if o["metadata"]["name"] == "p")
    assert "kind" not in item and "apiVersion" not in item
    query = {"resourceVersion": "0", "timeoutSeconds": "5"}
    async for ev in cluster.kube.watch(pods_path("default"), query, read_timeout=10):
        if ev["object"]["metadata"]["name"] == "p":
            assert (ev["object"]["kind"], ev["object"]["apiVersion"]) == ("Pod", "v1")
            break
    # a custom resource's items are stored as written: they keep both
    await cluster.volcano_crds()
    await cluster.kube.create(volcano.queues_path(), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                      "metadata": {"name": "typed"}, "spec": {"weight": 1}})  # fmt: skip
    queues = await cluster.kube.get(volcano.queues_path())
    q = next(o for o in queues["items"] if o["metadata"]["name"] == "typed")
    assert (q.get("kind"), q.get("apiVersion")) == ("Queue", "scheduling.volcano.sh/v1beta1")


async def test_a_pod_in_its_grace_period_stays_through_updates_until_the_kubelet_confirms(cluster: Cluster) -> None:
    """A write to a pod being deleted gracefully (its status, a label) changes it and nothing
    more: the API server removes it only at the kubelet's confirmation (grace period 0) — kmock
    removed it at any update, which made a stopping pod look gone (its cards free) at once."""
    await cluster.create_node("n1")
    await cluster.create_pod(pod("stopping", terminationGracePeriodSeconds=30))
    await bind(cluster, "stopping", "n1")
    await cluster.kube.delete(pods_path("default", "stopping"))
    await cluster.kube.patch(pods_path("default", "stopping", "status"),
                             {"status": {"phase": "Running"}})  # fmt: skip
    await cluster.kube.patch(pods_path("default", "stopping"), {"metadata": {"labels": {"seen": "yes"}}})
    held = await cluster.pod("default", "stopping")
    assert held is not None, "an update ended the grace period"
    assert held["metadata"]["labels"]["seen"] == "yes" and held["status"]["phase"] == "Running"
    assert held["metadata"].get("deletionTimestamp")
    await cluster.kube.delete(pods_path("default", "stopping"), {
        "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"uid": held["metadata"]["uid"]}})  # fmt: skip
    assert await cluster.pod("default", "stopping") is None


async def test_namespaces_are_listed_and_watched_with_their_name_label(cluster: Cluster) -> None:
    """A Namespace is a cluster-scoped object with labels; the API server gives each the label
    `kubernetes.io/metadata.name` = its name (over any other value), and a label change is a
    MODIFIED event on a watch of namespaces."""
    name = "ns-rules"
    await cluster.kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "labels": {"team": "db"}}})  # fmt: skip
    listed = await cluster.kube.get(NAMESPACES)
    ns = next(o for o in listed["items"] if o["metadata"]["name"] == name)
    assert ns["metadata"]["labels"] == {"team": "db", "kubernetes.io/metadata.name": name}
    version = listed["metadata"]["resourceVersion"]
    await cluster.kube.patch(f"{NAMESPACES}/{name}", {"metadata": {"labels": {
        "zone": "east", "kubernetes.io/metadata.name": "other"}}})  # fmt: skip
    got = await cluster.kube.get(f"{NAMESPACES}/{name}")
    assert got["metadata"]["labels"] == {"team": "db", "zone": "east", "kubernetes.io/metadata.name": name}
    seen: list[tuple[str, dict[str, str]]] = []
    async for ev in cluster.kube.watch(NAMESPACES, {"resourceVersion": version, "timeoutSeconds": "5"},
                                       read_timeout=10):  # fmt: skip
        if ev["object"]["metadata"]["name"] == name:
            seen.append((ev["type"], ev["object"]["metadata"]["labels"]))
            break
    assert seen == [("MODIFIED", got["metadata"]["labels"])]


async def test_a_custom_objects_crd_defaults_are_set_on_create_and_on_each_updates_result(cluster: Cluster) -> None:
    """The structural defaults of the chart's CRDs, as a real API server applies them when it
    decodes a write: a PodGroup made without `spec.queue` is stored, answered, listed and
    watched with `queue: default` (what Volcano's PodGroup webhook then reads) and a nested
    object's default (networkTopology's `mode: hard`) is set where the object is there; a patch
    leaves them, one deleting the queue (null) gets it back; a Volcano Job gets its
    `maxRetry: 3`. A reader that takes "no queue" for "not set" never sees that case."""
    await cluster.volcano_crds()
    path = volcano.podgroups_path("default")
    listed = await cluster.kube.get(path)
    made = await cluster.kube.create(path, {
        "apiVersion": volcano.SCHEDULING, "kind": "PodGroup", "metadata": {"name": "dflt"},
        "spec": {"minMember": 1, "networkTopology": {"highestTierAllowed": 1}}})  # fmt: skip
    want = {"minMember": 1, "queue": "default", "networkTopology": {"highestTierAllowed": 1, "mode": "hard"}}
    assert made["spec"] == want
    assert (await cluster.kube.get(f"{path}/dflt"))["spec"] == want
    assert next(o for o in (await cluster.kube.get(path))["items"] if o["metadata"]["name"] == "dflt")["spec"] == want
    async for ev in cluster.kube.watch(path, {"resourceVersion": listed["metadata"]["resourceVersion"],
                                              "timeoutSeconds": "5"}, read_timeout=10):  # fmt: skip
        if ev["object"]["metadata"]["name"] == "dflt":
            assert (ev["type"], ev["object"]["spec"]) == ("ADDED", want)
            break
    patched = await cluster.kube.patch(f"{path}/dflt", {"spec": {"minMember": 2}})
    assert patched["spec"] == {**want, "minMember": 2}
    cleared = await cluster.kube.patch(f"{path}/dflt", {"spec": {"queue": None, "networkTopology": {"mode": None}}})
    assert cleared["spec"] == {**want, "minMember": 2}
    moved = await cluster.kube.patch(f"{path}/dflt", {"spec": {"queue": "elsewhere"}})
    assert moved["spec"]["queue"] == "elsewhere"
    job = await cluster.kube.create(volcano.jobs_path("default"), {
        "apiVersion": volcano.BATCH, "kind": "Job", "metadata": {"name": "dflt"},
        "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}]}})  # fmt: skip
    assert (job["spec"]["queue"], job["spec"]["maxRetry"]) == ("default", 3)
