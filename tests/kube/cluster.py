"""The Kubernetes API the edge tests talk to, through kubernetes-asyncio as a cluster would be.

`kmock`'s Kubernetes emulator (a real HTTP API on a loopback port, in the test process) always;
a real kube-apiserver when `TESSERA_TEST_KUBECONFIG` names a cluster, or when
`KUBEBUILDER_ASSETS` holds `kube-apiserver` and `etcd` (started here, envtest style). Where the
emulator is more lenient than the real thing, the harness adds the real behaviour the tests rely
on and nothing else: a binding sets `spec.nodeName` and the binding's annotations (the API
server does; kmock has no binding endpoint), answers 409 for a pod already bound and 404 for a
missing one; the requests themselves are recorded so tests assert what Tessera sent.

`Kubelet` plays the two node-side parts a real cluster has and these servers lack: HAMi's
device plugin (a pod bound with `hami.io/bind-phase: allocating` is served only if the node's
`hami.io/mutex.lock` names it; it then sets `bind-phase: success` and releases the lock, as
HAMi's `PodAllocationTrySuccess` does) and the kubelet (phase Running, later Succeeded/Failed).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import aiohttp.web

from contracts import hami
from services.kube.client import Kube, KubeError, Limits, configuration, nodes_path, pods_path
from services.kube.listwatch import Reflector
from services.runtime.tasks import cancel_all
from tests.kube.pruning import additions, defaulted_object, pruned_object

try:
    import kmock
except ImportError:  # pragma: no cover - kmock is a test dependency
    kmock = None


#: Volcano's kinds as the chart's CRDs declare them (charts/tessera/files/crds): kmock serves
#: them once declared; a real API server once `volcano_crds` has installed the CRDs.
VOLCANO_KINDS: dict[str, dict[str, Any]] = {
    "scheduling.volcano.sh/v1beta1/queues": {"kind": "Queue", "namespaced": False, "subresources": {"status"}},
    "scheduling.volcano.sh/v1beta1/podgroups": {"kind": "PodGroup", "namespaced": True},  # status: no subresource
    "batch.volcano.sh/v1alpha1/jobs": {"kind": "Job", "namespaced": True, "subresources": {"status"}},
    "bus.volcano.sh/v1alpha1/commands": {"kind": "Command", "namespaced": True},
    "topology.volcano.sh/v1alpha1/hypernodes": {"kind": "HyperNode", "namespaced": False, "subresources": {"status"}},
    "flow.volcano.sh/v1alpha1/jobflows": {"kind": "JobFlow", "namespaced": True, "subresources": {"status"}},
    "flow.volcano.sh/v1alpha1/jobtemplates": {"kind": "JobTemplate", "namespaced": True, "subresources": {"status"}},
}
CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "tessera" / "files" / "crds"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES = "/api/v1/namespaces"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: the allocatable ephemeral-storage a harness node reports (a kubelet reports its root disk)
EPHEMERAL_STORAGE = "100Gi"


@dataclass
class Cluster:
    kind: str  # "kmock" | "real"
    kubeconfig: Path
    kube: Kube
    bindings: list[dict[str, Any]] = field(default_factory=list)  # kmock: every binding request
    bound: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # kmock: accepted ones
    refuse_once: set[str] = field(default_factory=set)  # kmock: pods whose next binding fails
    namespace: str = "default"
    #: kmock: requests served, by (User-Agent, verb, resource[/subresource]): what each client costs
    requests: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    #: kmock: watches whose events wait until the Event is set, by (User-Agent, resource): one
    #: client's watch lagging another's, as watches of a real API server may
    held: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    #: kmock: lists that wait until the Event is set, by (User-Agent, resource): a slow answer
    held_lists: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    #: kmock: requests that wait until the Event is set before the server looks at them, by
    #: (User-Agent, verb, resource) as `requests` counts them: a write slow on the wire, whose
    #: object changes meanwhile
    held_requests: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)
    #: kmock: answers that wait until the Event is set after the server made them, keyed as
    #: `held_requests`: a reply slow on the wire, the object changing (and its watch telling)
    #: before the client reads what was true when the server answered
    held_answers: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)
    #: kmock: the lock its emulator stores objects and lists under, and its rules (a test may
    #: hold the one and gate the other's lists)
    store_lock: asyncio.Lock | None = None
    rules: Any = None

    async def watching(self, agent: str, resource: str) -> None:
        """Until `agent` watches `resource` (kmock): its list is done, so what is made from now
        on reaches it by the watch — and waits there when the watch is `held`. Made before, it
        would be in the list, which nothing holds (a test of a lagging watch raced its client's
        start: under load the list came late and already held the object)."""
        from tests.processes import wait_until

        async def opened() -> bool:
            return self.requests[(agent, "watch", resource)] > 0

        await wait_until(opened, 60, f"{agent} watching {resource}")

    async def create_node(self, name: str, *, cpu: str = "192", memory: str = "1536Gi",
                          annotations: dict[str, str] | None = None,
                          labels: dict[str, str] | None = None,
                          allocatable: dict[str, str] | None = None,
                          ready: bool = True, unschedulable: bool = False) -> None:  # fmt: skip
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                             "annotations": annotations or {}},
                "spec": {"unschedulable": unschedulable}}  # fmt: skip
        await self.kube.create(nodes_path(), body)
        # what a kubelet reports besides cpu and memory: its root disk, no hugepages set aside
        base = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": EPHEMERAL_STORAGE,
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}  # fmt: skip
        status = {"allocatable": {**base, **(allocatable or {})},
                  "capacity": {**base, **(allocatable or {})},
                  "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                  "reason": "KubeletReady", "message": "ok"}]}  # fmt: skip
        await self.kube.patch(nodes_path(name) + "/status", {"status": status})

    async def enforce_pod_security(self, namespace: str, level: str | None = "restricted") -> None:
        """The namespace's PodSecurity admission enforces `level` from now on (None: nothing), as
        its `pod-security.kubernetes.io/enforce` label makes a real API server do: a pod it
        refuses is a 403 Forbidden whose message names the pod and every rule it breaks. The
        emulator (which reads no Namespace labels for it) knows `restricted` only, and of it the
        checks a pod without a securityContext fails (`pod_security_refusal`)."""
        if self.kind == "kmock":
            assert level in ("restricted", None), "the emulator models the restricted level only"
            if level:
                self.rules.pod_security[namespace] = level
            else:
                self.rules.pod_security.pop(namespace, None)
            return
        await self._namespace(namespace)
        labels = {"pod-security.kubernetes.io/enforce": level,
                  "pod-security.kubernetes.io/enforce-version": "latest" if level else None}  # fmt: skip
        await self.kube.patch(f"{NAMESPACES}/{namespace}", {"metadata": {"labels": labels}})

    async def _namespace(self, namespace: str) -> None:
        """The Namespace made on a real API server, which refuses objects in one that does not
        exist (the emulator needs none: it serves Namespaces but does not require them)."""
        if self.kind == "kmock":
            return
        try:
            await self.kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        except KubeError as exc:
            if exc.status != 409:
                raise

    async def limit_count(self, namespace: str, key: str, hard: int | None, name: str = "objects") -> None:
        """A ResourceQuota `name` in `namespace` limiting the count `key` (`count/pods`,
        `count/podgroups.scheduling.volcano.sh`) to `hard`, counted from 0 (the namespace must
        hold none yet); None deletes it. A real API server's quota admission refuses a create
        past it with a 403 and counts the ones it lets in; it refuses every create ("status
        unknown for quota") until a quota controller has counted, which a bare API server has
        not: its count is written here as that controller would. The emulator counts its store."""
        path = f"{NAMESPACES}/{namespace}/resourcequotas"
        if hard is None:
            await self.kube.delete(f"{path}/{name}")
            return
        await self._namespace(namespace)
        await self.kube.create(path, {"apiVersion": "v1", "kind": "ResourceQuota",
                                      "metadata": {"name": name, "namespace": namespace},
                                      "spec": {"hard": {key: str(hard)}}})  # fmt: skip
        if self.kind != "kmock":
            await self.kube.patch(f"{path}/{name}/status", {"status": {"hard": {key: str(hard)}, "used": {key: "0"}}})

    async def webhook_down(self, namespace: str, group: str, plural: str, down: bool = True) -> None:
        """A validating webhook for creates of `group`/`plural` in `namespace`, failurePolicy
        Fail, whose service does not answer (an admission controller being upgraded, its pods
        not ready): a real API server answers each such create 500 InternalError "failed
        calling webhook" and makes nothing — no refusal of the object, it may pass a moment
        later. `down=False` takes the webhook away."""
        if self.kind == "kmock":
            (self.rules.dead_webhooks.add if down else self.rules.dead_webhooks.discard)((namespace, group, plural))
            return
        name = f"down-{namespace}-{plural}"
        path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}"
        if not down:
            await self.kube.delete(path)
            return
        await self._namespace(namespace)
        await self.kube.create(path.rsplit("/", 1)[0], {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": DEAD_WEBHOOK, "clientConfig": {"url": DEAD_WEBHOOK_URL},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["*"],
                                     "resources": [plural]}],
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                          "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "timeoutSeconds": 1}]})  # fmt: skip

    async def create_pod(self, doc: dict[str, Any]) -> dict[str, Any]:
        ns = (doc.get("metadata") or {}).get("namespace") or self.namespace
        doc = json.loads(json.dumps(doc))
        doc["metadata"]["namespace"] = ns
        status = doc.pop("status", None)
        created = await self.kube.create(pods_path(ns), doc)
        if status:
            created = await self.kube.patch(pods_path(ns, doc["metadata"]["name"], "status"), {"status": status})
        return created

    async def pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return await self.present(pods_path(ns, name))

    async def present(self, path: str) -> dict[str, Any] | None:
        """The object at `path`, or None where the server answers 404."""
        try:
            return await self.kube.get(path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def pods(self) -> list[dict[str, Any]]:
        return list((await self.kube.get(pods_path())).get("items") or [])

    async def events(self, ns: str = "default") -> list[dict[str, Any]]:
        return list((await self.kube.get(f"/api/v1/namespaces/{ns}/events")).get("items") or [])

    async def volcano_crds(self) -> None:
        """Volcano's kinds served: kmock declares them already; a real API server gets the
        chart's CRDs (unless it has them, e.g. from Volcano), and this returns once each is
        Established — watched, not polled."""
        if self.kind == "kmock":
            return
        import yaml

        for path in sorted(CRD_DIR.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            name = crd["metadata"]["name"]
            try:
                await self.kube.create(CRDS, crd)
            except KubeError as exc:
                if exc.status != 409:
                    raise
            query = {"fieldSelector": f"metadata.name={name}"}
            listed = await self.kube.get(CRDS, **query)
            if any(_established(o) for o in listed.get("items") or []):
                continue
            query["resourceVersion"] = listed["metadata"]["resourceVersion"]
            async for ev in self.kube.watch(CRDS, query):
                if _established(ev.get("object") or {}):
                    break


def _established(crd: dict[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])  # fmt: skip


def _kubeconfig(path: Path, server: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": {"token": "test"}}],
    }))  # fmt: skip


def real_backends() -> list[str]:
    """Which real API servers this machine offers (the tests skip cleanly without them)."""
    out = []
    if os.environ.get("TESSERA_TEST_KUBECONFIG"):
        out.append("kubeconfig")
    assets = os.environ.get("KUBEBUILDER_ASSETS", "")
    if assets and all((Path(assets) / b).exists() for b in ("kube-apiserver", "etcd")):
        out.append("envtest")
    return out


def _fast_contains(original: Any) -> Any:
    """`request in view` without walking the request history: kmock decides which reaction
    serves a request by checking membership in each reaction's view, which filters the whole
    history (O(requests) per request, minutes for a few thousand pods). For the views the
    harness uses — the root, filters, priorities — membership of the request in hand is its
    criteria; anything else (slices count history) keeps kmock's own answer."""
    from kmock._internal import dsl, rendering

    def contains(self: Any, item: Any) -> bool:
        if isinstance(item, rendering.Request):
            if isinstance(self, dsl.Root):
                return True
            if type(self) is dsl.Filter:
                return bool(self.criteria(item)) and contains(self._source, item)
            if type(self) is dsl.Priority:
                return contains(self._source, item)
        return bool(original(self, item))

    return contains


def _namespace_paths(original: Any) -> Any:
    """`/api/v1/namespaces` and `/api/v1/namespaces/<name>` as the cluster-scoped resource they
    are: kmock reads every `namespaces/<x>` as the namespace of a resource to come, so it served
    no Namespace object (a list failed outright)."""
    from kmock._internal.parsing import ParsedPath

    def parse(path: str) -> Any:
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) in (3, 4):
            return ParsedPath("", "v1", "namespaces", None, parts[3] if len(parts) == 4 else None, None)
        return original(path)

    return parse


def _namespace_labels(request: Any) -> None:
    """What the API server does to every Namespace written: its `kubernetes.io/metadata.name`
    label is its name, whatever was sent."""
    meta = request.data.get("metadata") if isinstance(request.data, dict) else None
    if request.resource is None or (request.resource.group or "", request.resource.plural) != ("", "namespaces") \
            or request.action not in (kmock.action.CREATE, kmock.action.UPDATE) or not isinstance(meta, dict):  # fmt: skip
        return
    name = request.name or meta.get("name")
    if name and (request.action == kmock.action.CREATE or "labels" in meta):
        labels = meta.get("labels")
        meta["labels"] = {**(labels if isinstance(labels, dict) else {}), NAMESPACE_NAME_LABEL: name}


def _named_on_create(request: Any) -> None:
    """What the API server does on every create and kmock does not: a `generateName` gets a
    random suffix as the name (vcctl's Commands are created so), and the object a `uid`, a
    `creationTimestamp` and, created under a namespace's URL, that `metadata.namespace`."""

    meta = request.data.get("metadata") if isinstance(request.data, dict) else None
    if request.resource is not None and request.action == kmock.action.CREATE \
            and not request.subresource and isinstance(meta, dict):  # fmt: skip
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        meta.setdefault("uid", str(uuid.uuid4()))
        if request.namespace and not meta.get("namespace"):  # a namespaced URL names it
            meta["namespace"] = request.namespace
        # the job controller names a Job's PodGroup after the Job's uid; ages come from this
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


#: kinds whose `status` is a subresource on a real API server (core kinds and the chart's CRDs)
STATUS_SUBRESOURCE = frozenset({("", "pods"), ("", "nodes"), ("", "persistentvolumeclaims"),
                                ("", "persistentvolumes"), *(
    (res.split("/")[0], res.split("/")[2]) for res, info in VOLCANO_KINDS.items() if "status" in info.get("subresources", ()))})  # fmt: skip
WITHOUT_STATUS = frozenset((res.split("/")[0], res.split("/")[2]) for res, info in VOLCANO_KINDS.items()
                           if "status" not in info.get("subresources", ()))  # fmt: skip


#: the harness's own binding reaction writing the pod (it alone may set status with the spec)
BINDING_WRITE = "X-Tessera-Harness-Binding"


def _as_subresources_serve(request: Any) -> None:
    """What a real API server does and kmock does not: `…/status` of a kind without a status
    subresource (Volcano's PodGroup) is 404, a write to the main resource of a kind with one
    ignores the `status` it carries (only `…/status` changes it), and a custom object keeps only
    the fields its CRD declares."""
    from kmock._internal.k8s import KubernetesNotFoundError

    res = request.resource
    if res is None or request.action not in (kmock.action.CREATE, kmock.action.UPDATE, kmock.action.FETCH):
        return
    kind = (res.group or "", res.plural)
    if request.subresource == "status" and kind in WITHOUT_STATUS:
        raise KubernetesNotFoundError()
    if request.subresource is None and request.action == kmock.action.UPDATE and kind in STATUS_SUBRESOURCE \
            and isinstance(request.data, dict) and not (request.headers or {}).get(BINDING_WRITE):  # fmt: skip
        request.data.pop("status", None)
    if isinstance(request.data, dict) and request.subresource in (None, "status") \
            and request.action in (kmock.action.CREATE, kmock.action.UPDATE):  # fmt: skip
        kept = pruned_object(kind[0], kind[1], request.data)  # the CRD's schema (tests/kube/pruning.py)
        request.data.clear()
        request.data.update(kept)


def pod_security_refusal(pod: dict[str, Any], level: str) -> dict[str, Any] | None:
    """The API server's 403 for a pod PodSecurity admission's `restricted` level refuses, in
    its words — None if the pod passes. Of the level's checks, only the four a pod that sets no
    securityContext fails (what a test's pod is): allowPrivilegeEscalation, capabilities,
    runAsNonRoot, seccompProfile."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    pod_ctx = spec.get("securityContext") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]

    def named(cs: list[dict[str, Any]]) -> str:
        names = ", ".join(f'"{c.get("name", "")}"' for c in cs)
        return f"container {names}" if len(cs) == 1 else f"containers {names}"

    def ctx(c: dict[str, Any]) -> dict[str, Any]:
        return c.get("securityContext") or {}

    found = []
    if bad := [c for c in containers if ctx(c).get("allowPrivilegeEscalation") is not False]:
        found.append(f"allowPrivilegeEscalation != false ({named(bad)} must set securityContext.allowPrivilegeEscalation=false)")
    if bad := [c for c in containers if "ALL" not in ((ctx(c).get("capabilities") or {}).get("drop") or [])]:
        found.append(f'unrestricted capabilities ({named(bad)} must set securityContext.capabilities.drop=["ALL"])')
    if bad := [c for c in containers if not ctx(c).get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))]:
        found.append(f"runAsNonRoot != true (pod or {named(bad)} must set securityContext.runAsNonRoot=true)")
    if bad := [c for c in containers if not (ctx(c).get("seccompProfile") or pod_ctx.get("seccompProfile"))]:
        found.append(f'seccompProfile (pod or {named(bad)} must set securityContext.seccompProfile.type to '
                     '"RuntimeDefault" or "Localhost")')  # fmt: skip
    if not found:
        return None
    name = str(meta.get("name") or "")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "message": f'pods "{name}" is forbidden: violates PodSecurity "{level}:latest": ' + ", ".join(found),
            "details": {"name": name, "kind": "pods"}, "code": 403}  # fmt: skip


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
#: the finalizer a foreground deletion holds its object with until its dependents are gone
FOREGROUND = "foregroundDeletion"
#: the field selectors the harness evaluates for pods (the API server's pod field label set)
POD_FIELDS = {"spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName") or "",
              "spec.schedulerName": lambda o: (o.get("spec") or {}).get("schedulerName") or "default-scheduler",
              "status.phase": lambda o: (o.get("status") or {}).get("phase") or "",
              "metadata.name": lambda o: (o.get("metadata") or {}).get("name") or "",
              "metadata.namespace": lambda o: (o.get("metadata") or {}).get("namespace") or ""}  # fmt: skip


#: the webhook `Cluster.webhook_down` registers, and where (a port nothing listens on)
DEAD_WEBHOOK = "down.tessera.test"
DEAD_WEBHOOK_URL = "https://127.0.0.1:1/"


def webhook_unreachable(name: str) -> dict[str, Any]:
    """The API server's answer to a create a failing-closed webhook could not be asked about,
    in its words (apiserver's webhook dispatcher: an InternalError naming the webhook)."""
    message = (f'Internal error occurred: failed calling webhook "{DEAD_WEBHOOK}": failed to call webhook: '
               f'Post "{DEAD_WEBHOOK_URL}?timeout=1s": dial tcp 127.0.0.1:1: connect: connection refused')
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "InternalError", "details": {"name": name, "causes": [{"message": message}]}, "code": 500}


def field_selector_matches(selector: str, obj: dict[str, Any], fields: dict[str, Any]) -> bool:
    """`a=b,c!=d` (also `==`) on the fields the server knows for the kind; any other field is
    the API server's 400, here an AssertionError so a test names the selector it sent."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        key, _, want = term.partition("!=") if negate else term.replace("==", "=").partition("=")
        assert key in fields, f"field selector {key!r} is not one the API server supports for this kind"
        if (fields[key](obj) == want) == negate:
            return False
    return True


def label_selector_matches(selector: str, obj: dict[str, Any]) -> bool:
    """Equality-based label selectors (`a=b,c!=d`, `key`, `!key`), as Tessera sends them."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, _, v = term.partition("!=")
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, _, v = term.replace("==", "=").partition("=")
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass
class ServerRules:
    """What a real API server does that kmock does not, where Tessera depends on it (README
    "What the tests model"): resourceVersions and 409 on a stale one, delete preconditions,
    graceful deletion of bound pods (deletionTimestamp until the kubelet confirms), foreground
    deletion (deletionTimestamp and the `foregroundDeletion` finalizer until a garbage
    collector has taken the dependents and removed it), the
    not-ready taint on new Nodes (lifted once Ready), field and label selectors (an object
    that starts or stops matching a watch's is ADDED or DELETED for it)."""

    rv: int = 0
    graceful: bool = True
    deletes: list[tuple[str, str, int]] = field(default_factory=list)  # (ns, pod, grace) asked
    requests: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    held: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)  # see Cluster.held
    held_lists: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)  # Cluster.held_lists
    held_requests: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)  # Cluster.held_requests
    held_answers: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)  # Cluster.held_answers
    #: answers made and held so far, keyed as `held_answers` (a test waits for one to be made)
    answers_held: collections.Counter[tuple[str, str, str]] = field(default_factory=collections.Counter)
    #: namespace → the PodSecurity level it enforces (`Cluster.enforce_pod_security`)
    pod_security: dict[str, str] = field(default_factory=dict)
    #: namespaces a ResourceQuota was ever written in (only their creates are checked against
    #: object counts: a scan of the store per create elsewhere would cost the benchmarks)
    quota_namespaces: set[str] = field(default_factory=set)
    #: (namespace, group, plural) whose creates a validating webhook that cannot be reached
    #: answers (`Cluster.webhook_down`): the API server's 500, the object not made
    dead_webhooks: set[tuple[str, str, str]] = field(default_factory=set)

    #: resourceVersions given to writes whose events are not out yet, by resource: a list's
    #: version stays below them, so the watch from it brings them (see `_serve_list`)
    in_flight: dict[int, Any] = field(default_factory=dict)
    #: when set (and not yet released), lists wait for it before taking the store's lock
    list_gate: asyncio.Event | None = None

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)


def _client_resource(request: Any) -> tuple[str, str]:
    """(User-Agent, resource[/subresource]) of a request, as `Cluster.requests` counts them."""
    res = request.resource
    kind = (res.group or "", res.plural) if res is not None else ("", "")
    what = "/".join(p for p in (kind[0], kind[1], request.subresource or "") if p)
    return str((request.headers or {}).get("User-Agent", "")), what


def _strategic_conditions(stored: Any, patch: dict[str, Any]) -> None:
    """A strategic merge patch merges a pod's `status.conditions` by `type` (its patchMergeKey):
    the conditions the patch does not name stay. kmock replaces lists, so the harness merges."""
    sent = (patch.get("status") or {}).get("conditions")
    if stored is None or not isinstance(sent, list):
        return
    have = list(((stored.raw.get("status") or {}).get("conditions")) or [])
    by_type = {c.get("type"): c for c in sent}
    merged = [{**c, **by_type.pop(c.get("type"))} if c.get("type") in by_type else c for c in have]
    patch["status"]["conditions"] = [*merged, *by_type.values()]


def _merge_into(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """`patch` merged into `target` in place, maps key by key (a list or a value replaces)."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = value


def _conflict(message: str) -> Exception:
    """The API server's 409 Conflict, rendered by kmock as a `Status` with this message."""
    from kmock._internal.k8s import KubernetesObjectConflictError

    return KubernetesObjectConflictError(reason="Conflict", message=message, details={})  # type: ignore[call-arg]


HISTORY = 200_000  # events a watch from a resourceVersion can be replayed from, per resource
#: the object as it was before an event (the bus's own copy): what a selector matched before
PREV = "_tessera_prev"


def _prev_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """What a selector reads of an object, copied as it is now (stored objects change in
    place): the top level, metadata with its labels and annotations, spec and status one level
    deep. A deep copy of every object at every change cost the emulator ~10 % more CPU."""
    meta = dict(obj.get("metadata") or {})
    for k in ("labels", "annotations"):
        if isinstance(meta.get(k), dict):
            meta[k] = dict(meta[k])
    out = {**obj, "metadata": meta}
    for k in ("spec", "status"):
        if isinstance(obj.get(k), dict):
            out[k] = dict(obj[k])
    return out


def _key_of(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _recording_bus() -> type:
    """kmock's event bus, keeping what went through it with each event's resourceVersion."""
    import attrs
    from kmock._internal import aiobus

    @attrs.define
    class RecordingBus(aiobus.Bus):  # type: ignore[type-arg, misc]
        history: collections.deque[tuple[int, Any]] = attrs.field(factory=lambda: collections.deque(maxlen=HISTORY))
        forgotten: int = 0  # the newest resourceVersion no longer in `history`
        #: each object as the last event left it, copied (stored objects change in place)
        last: dict[tuple[str, str], Any] = attrs.field(factory=dict)

        async def put(self, *items: Any) -> None:
            for item in items:
                obj = item.get("object") if isinstance(item, dict) else None
                if isinstance(obj, dict) and item.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    key = _key_of(obj)
                    item[PREV] = self.last.get(key)
                    if item["type"] == "DELETED":
                        self.last.pop(key, None)
                    else:
                        self.last[key] = _prev_copy(obj)
                if len(self.history) == self.history.maxlen:
                    self.forgotten = self.history[0][0]
                rv = str(((item.get("object") or {}).get("metadata") or {}).get("resourceVersion") or "0")
                self.history.append((int(rv) if rv.isdigit() else 0, item))
            await super().put(*items)

    return RecordingBus


def emulator() -> Any:
    """kmock's emulator, fast for thousands of objects (see `_fast_contains`); its request
    history is bounded (the reactions here only look at the request in hand)."""
    from kmock._internal import dsl

    if not getattr(dsl.View, "_tessera_fast", False):
        from kmock._internal import parsing

        parsing.parse_path = _namespace_paths(parsing.parse_path)
        dsl.View.__contains__ = _fast_contains(dsl.View.__contains__)  # type: ignore[method-assign]
        dsl.View._tessera_fast = True  # type: ignore[attr-defined]
        emu = kmock.KubernetesEmulator
        scan = emu._KubernetesEmulator__get_objs  # type: ignore[attr-defined]

        def get_objs(self: Any, request: Any, strict: bool) -> list[Any]:
            """One object by name is a dict lookup, not a scan of every object."""
            if strict and request.name is not None and request.resource is not None:
                obj = self._objects._objects.get((request.resource, request.namespace, request.name))
                return [obj] if obj is not None else []
            return scan(self, request, strict)

        emu._KubernetesEmulator__get_objs = get_objs  # type: ignore[attr-defined]

    class Emulator(kmock.KubernetesEmulator):  # type: ignore[misc]
        """This harness's emulator only: tests/kube/test_listwatch.py uses kmock's own."""

        def _stored(self, request: Any) -> Any:
            key = (request.resource, request.namespace, request.name)
            obj = self._objects._objects.get(key)
            return None if obj is None or obj.deleted else obj

        async def _handle(self, request: Any) -> Any:
            _named_on_create(request)
            _namespace_labels(request)
            _as_subresources_serve(request)
            self._defaulted(request)
            rules: ServerRules = self._tessera_rules
            res = request.resource
            stamped = 0  # the resourceVersion this write is given, until its event is out
            kind = (res.group or "", res.plural) if res is not None else ("", "")
            agent, what = _client_resource(request)
            verb = (request.action or request.method).value.lower()  # a subresource POST has no action
            rules.requests[(agent, verb, what)] += 1
            if (held := rules.held_requests.get((agent, verb, what))) is not None:
                await held.wait()
            if request.action == kmock.action.CREATE and kind == ("", "pods") and not request.subresource \
                    and (level := rules.pod_security.get(request.namespace or "")) \
                    and (refusal := pod_security_refusal(request.data, level)) is not None:  # fmt: skip
                return aiohttp.web.json_response(refusal, status=403)
            if request.action == kmock.action.CREATE and not request.subresource \
                    and (request.namespace or "", *kind) in rules.dead_webhooks:  # fmt: skip
                return aiohttp.web.json_response(webhook_unreachable(str(((request.data or {}).get("metadata") or {}).get("name", ""))),
                                                 status=500)
            if kind == ("", "resourcequotas") and request.namespace:
                rules.quota_namespaces.add(request.namespace)
            if request.action == kmock.action.CREATE and res is not None and not request.subresource \
                    and request.namespace in rules.quota_namespaces \
                    and (refusal := self._over_count_quota(request, kind)) is not None:  # fmt: skip
                return aiohttp.web.json_response(refusal, status=403)
            if res is not None and request.action == kmock.action.DELETE and request.name:
                early = await self._delete(request, kind, rules)
                if early is not None:
                    return early
                stored = self._stored(request)
                if stored is not None:  # a deletion is a change with a resourceVersion of its own
                    async with self._lock:
                        stored.patch({"metadata": {"resourceVersion": rules.next_rv()}})
                        stamped = rules.rv
                        rules.in_flight[stamped] = res
            if res is not None and isinstance(request.data, dict) and \
                    request.action in (kmock.action.CREATE, kmock.action.UPDATE):  # fmt: skip
                meta = request.data.setdefault("metadata", {})
                if request.action == kmock.action.UPDATE and request.name:
                    stored = self._stored(request)
                    have = str(((stored.raw if stored is not None else {}).get("metadata") or {}).get("resourceVersion") or "")
                    sent = str(meta.get("resourceVersion") or "")
                    if sent and have and sent != have:
                        raise _conflict(f'Operation cannot be fulfilled on {res.plural} "{request.name}": the object '
                                        "has been modified; please apply your changes to the latest version and try again")  # fmt: skip
                if request.action == kmock.action.UPDATE and kind == ("", "pods") and "strategic" in \
                        str((request.headers or {}).get("Content-Type", "")):  # fmt: skip
                    _strategic_conditions(self._stored(request), request.data)
                if request.action == kmock.action.CREATE and kind == ("", "pods") and not request.subresource:
                    request.data["status"] = {"phase": "Pending"}  # the pod strategy: a new pod's status
                if request.action == kmock.action.CREATE and kind == ("", "nodes"):
                    taints = (request.data.setdefault("spec", {}).get("taints")) or []
                    if not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
                        request.data["spec"]["taints"] = [*taints, dict(NOT_READY_TAINT)]
                meta["resourceVersion"] = rules.next_rv()
                stamped = rules.rv
                rules.in_flight[stamped] = res
            try:
                if (terminating := self._terminating(request)) is not None:
                    response = await self._update_terminating(request, terminating)
                else:
                    response = await super()._handle(request)
            finally:
                if stamped:
                    rules.in_flight.pop(stamped, None)
            if kind == ("", "nodes") and request.subresource == "status" and request.action == kmock.action.UPDATE:
                await self._node_lifecycle(request, rules)
            if (late := rules.held_answers.get((agent, verb, what))) is not None:
                rules.answers_held[(agent, verb, what)] += 1
                await late.wait()
            return response

        def _defaulted(self, request: Any) -> None:
            """A custom object's CRD defaults (tests/kube/pruning.py), where the API server
            applies them: in a create's body, and in an update's or a merge patch's result (the
            stored object merged with what was sent — a key patched to null comes back as its
            default), added to what is sent so that the stored object, its event and the answer
            hold them. Every stored object is written through here, so every read holds them
            too, as a real server's (which defaults what it reads from etcd as well)."""
            res = request.resource
            if res is None or not isinstance(request.data, dict) or request.subresource not in (None, "status"):
                return
            group, plural = res.group or "", res.plural
            if request.action == kmock.action.CREATE and request.subresource is None:
                kept = defaulted_object(group, plural, request.data)
                request.data.clear()
                request.data.update(kept)
            elif request.action == kmock.action.UPDATE and request.name \
                    and (stored := self._stored(request)) is not None:  # fmt: skip
                from kmock._internal.dicts import patch_dict

                merged = dict(patch_dict(stored.raw, request.data))
                _merge_into(request.data, additions(merged, defaulted_object(group, plural, merged)) or {})

        def _over_count_quota(self, request: Any, kind: tuple[str, str]) -> dict[str, Any] | None:
            """The API server's 403 for a create a ResourceQuota's object count (`count/<plural>`
            for a core kind, `count/<plural>.<group>` otherwise) has no room for, in its words;
            None if every quota of the namespace has room. Only object counts are modelled."""
            key = f"count/{kind[1]}" + (f".{kind[0]}" if kind[0] else "")
            ns = request.namespace
            quotas: list[dict[str, Any]] = []
            used = 0
            for (r, n, _name), o in self._objects._objects.items():
                if n != ns or o.deleted or r is None:
                    continue
                if (r.group or "", r.plural) == ("", "resourcequotas"):
                    quotas.append(o.raw)
                elif (r.group or "", r.plural) == kind:
                    used += 1
            for quota in quotas:
                hard = ((quota.get("spec") or {}).get("hard") or {}).get(key)
                if hard is not None and used + 1 > int(str(hard)):
                    name = str((request.data or {}).get("metadata", {}).get("name") or "")
                    what = f"{kind[1]}.{kind[0]}" if kind[0] else kind[1]
                    qname = (quota.get("metadata") or {}).get("name", "")
                    message = (f'{what} "{name}" is forbidden: exceeded quota: {qname}, requested: {key}=1, '
                               f"used: {key}={used}, limited: {key}={hard}")
                    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "reason": "Forbidden", "message": message,
                            "details": {"name": name, "kind": kind[1]}, "code": 403}  # fmt: skip
            return None

        def _terminating(self, request: Any) -> Any:
            """The stored object an update is for, when it is in its grace period: deleted
            gracefully (deletionTimestamp, a grace period above 0) with no finalizer left."""
            if request.action != kmock.action.UPDATE or not request.name or request.resource is None:
                return None
            stored = self._stored(request)
            meta = (stored.raw.get("metadata") or {}) if stored is not None else {}
            if not meta.get("deletionTimestamp") or meta.get("finalizers"):
                return None
            return stored if int(meta.get("deletionGracePeriodSeconds") or 0) > 0 else None

        async def _update_terminating(self, request: Any, stored: Any) -> Any:
            """An update of an object in its grace period changes it and nothing more: a real
            API server removes it when the grace period is 0 (the kubelet's confirmation) and
            no finalizer is left — kmock removed it at any update, so a status patch to a pod
            still stopping made it gone at once (its cards seemingly free while it ran)."""
            async with self._lock:
                stored.patch(request.data)
                raw = stored.raw
                await self._buses[request.resource].put({"type": "MODIFIED", "object": raw})
            return aiohttp.web.json_response(raw)

        async def _delete(self, request: Any, kind: tuple[str, str], rules: ServerRules) -> Any:
            """Preconditions, and a bound pod's graceful deletion; None: delete at once."""
            stored = self._stored(request)
            if stored is None:
                return None  # kmock's 404
            raw = stored.raw
            meta = raw.get("metadata") or {}
            options = request.data if isinstance(request.data, dict) else {}
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise _conflict(f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise _conflict(f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                f"ResourceVersion in object meta: {meta.get('resourceVersion')}")  # fmt: skip
            if options.get("propagationPolicy") == "Foreground":
                return await self._foreground(request, stored, rules)
            if kind != ("", "pods") or not rules.graceful:
                return None
            spec, phase = raw.get("spec") or {}, (raw.get("status") or {}).get("phase")
            grace = options.get("gracePeriodSeconds")
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            rules.deletes.append((request.namespace, request.name, int(grace)))
            if not spec.get("nodeName") or phase in ("Succeeded", "Failed") or int(grace) <= 0:
                return None  # unscheduled or finished pods, and the kubelet's own confirmation, go at once
            if not meta.get("deletionTimestamp"):
                async with self._lock:
                    now = time.time()
                    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + int(grace)))
                    stored.patch({"metadata": {"deletionTimestamp": stamp, "deletionGracePeriodSeconds": int(grace),
                                               "resourceVersion": rules.next_rv()}})  # fmt: skip
                    await self._buses[request.resource].put({"type": "MODIFIED", "object": stored.raw})
            return aiohttp.web.json_response(stored.raw)

        async def _foreground(self, request: Any, stored: Any, rules: ServerRules) -> Any:
            """`propagationPolicy: Foreground` (kubectl delete --cascade=foreground, Argo CD's
            prune): the object stays, with a deletionTimestamp and the `foregroundDeletion`
            finalizer, until the garbage collector has deleted its dependents and removes that
            finalizer once none with `blockOwnerDeletion` is left (`GarbageCollector`); on an API
            server alone it stays for good. kmock would delete it at once."""
            meta = stored.raw.get("metadata") or {}
            finalizers = list(meta.get("finalizers") or [])
            if FOREGROUND in finalizers and meta.get("deletionTimestamp"):
                return aiohttp.web.json_response(stored.raw)  # asked already
            change: dict[str, Any] = {"finalizers": [*finalizers, FOREGROUND] if FOREGROUND not in finalizers
                                      else finalizers}  # fmt: skip
            if not meta.get("deletionTimestamp"):
                change["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                change["deletionGracePeriodSeconds"] = 0
            async with self._lock:
                change["resourceVersion"] = rules.next_rv()
                stored.patch({"metadata": change})
                await self._buses[request.resource].put({"type": "MODIFIED", "object": stored.raw})
            return aiohttp.web.json_response(stored.raw)

        async def _node_lifecycle(self, request: Any, rules: ServerRules) -> None:
            """The node lifecycle controller: a Node whose kubelet reports Ready loses the
            not-ready taint (and gets it back when it stops being Ready)."""
            stored = self._stored(request)
            if stored is None:
                return
            raw = stored.raw
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (raw.get("status") or {}).get("conditions") or [])  # fmt: skip
            taints = list((raw.get("spec") or {}).get("taints") or [])
            has = any(t.get("key") == NOT_READY_TAINT["key"] for t in taints)
            if ready == (not has):
                return
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT["key"]]
            new = kept if ready else [*kept, dict(NOT_READY_TAINT)]
            async with self._lock:
                stored.patch({"spec": {"taints": new or None}, "metadata": {"resourceVersion": rules.next_rv()}})
                await self._buses[request.resource].put({"type": "MODIFIED", "object": stored.raw})

        def _selected(self, request: Any, obj: dict[str, Any]) -> bool:
            params = request.params or {}
            fs, ls = params.get("fieldSelector", ""), params.get("labelSelector", "")
            res = request.resource
            if fs:
                fields = POD_FIELDS if res is not None and (res.group or "", res.plural) == ("", "pods") else {
                    "metadata.name": POD_FIELDS["metadata.name"], "metadata.namespace": POD_FIELDS["metadata.namespace"]}
                if not field_selector_matches(fs, obj, fields):
                    return False
            return not ls or label_selector_matches(ls, obj)

        async def _serve_list(self, request: Any) -> Any:
            """The items and their resourceVersion as one snapshot, as a real API server's list
            is: a write is given its version before kmock takes its lock to store it, so a list
            that read the version after its items could be past a write it did not hold — and
            the watch from there never brought it (a Queue admission never heard of, under
            load). The version is read under the lock the items are, and below every write of
            this resource still waiting for it."""
            if request.resource not in self._get_resources():
                return await super()._serve_list(request)  # kmock's 404
            rules: ServerRules = self._tessera_rules
            if rules.list_gate is not None:
                await rules.list_gate.wait()
            if (held := rules.held_lists.get(_client_resource(request))) is not None:
                await held.wait()
            async with self._lock:
                objs = self._KubernetesEmulator__get_objs(request, strict=False)
                items = [o.raw for o in objs if not o.deleted and self._selected(request, o.raw)]
                out = {rv for rv, _ in self._buses[request.resource].history if rv in rules.in_flight}
                waiting = [rv for rv, r in rules.in_flight.items() if r == request.resource and rv not in out]
                version = min(waiting) - 1 if waiting else rules.rv
            # a real server's list names its kind once ("PodList", "v1"); a built-in kind's items
            # carry no kind or apiVersion, where the same object in a watch event carries both
            # (a custom resource's items, stored as they were written, keep theirs)
            typed = next((o for o in items if o.get("kind")), None)
            head = {"apiVersion": typed.get("apiVersion", ""), "kind": f"{typed['kind']}List"} if typed else {}
            res = request.resource
            if f"{res.group}/{res.version}/{res.plural}" not in VOLCANO_KINDS:
                items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
            return {**head, "metadata": {"resourceVersion": str(version)}, "items": items}

        async def _serve_watch(self, request: Any) -> Any:
            """kmock starts every watch with the objects there now, then what happens next; a
            real API server given `resourceVersion` (what a reflector's list returned) sends
            what happened after it instead — a pod deleted between the list and the watch is
            a DELETED event, where kmock's way left the reflector holding it for good (a Volcano
            Job's pod never made again after a restart of the queue service). Too old a
            version is the server's 410 Gone, as an ERROR event. From "0" (or none) the objects
            there now come first, and the stream starts where that snapshot was taken: kmock's
            joined the stream only once those were sent, and lost what was written meanwhile
            (a list answering "0" while the first write was in flight, then a held watch: a
            Queue admission never heard of)."""
            since = int(str((request.params or {}).get("resourceVersion") or "0") or 0)
            yield b""  # the headers go out now (kmock's own first chunk)
            bus = self._buses[request.resource]
            async with self._lock:  # events are put under the lock: the start and stream line up
                marker = await bus.mark()
                if since <= 0:  # "0" or none: the objects there now, then what follows them
                    objs = self._KubernetesEmulator__get_objs(request, strict=False)
                    past: list[dict[str, Any]] | None = [
                        {"type": "ADDED", "object": _prev_copy(o.raw)} for o in objs if not o.deleted]
                elif since < bus.forgotten:
                    past = None
                else:
                    past = [ev for rv, ev in bus.history if rv > since]
            try:
                if past is None:
                    yield {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                       "reason": "Expired", "code": 410,
                                                       "message": f"too old resource version: {since}"}}  # fmt: skip
                    return
                gate = self._tessera_rules.held.get(_client_resource(request))
                for ev in past:
                    if (seen := self._as_seen(request, ev)) is not None:
                        if gate is not None:
                            await gate.wait()
                        yield seen
                async for ev in bus.stream(since=marker):
                    if (seen := self._as_seen(request, ev)) is not None:
                        if gate is not None:
                            await gate.wait()
                        yield seen
            finally:
                await bus.unmark(marker)

        def _watched(self, request: Any, obj: dict[str, Any] | None) -> bool:
            if not obj:
                return False
            meta = obj.get("metadata") or {}
            check = self._KubernetesEmulator__check  # kmock's own namespace/name match
            return bool(check(request, request.resource, meta.get("namespace"), meta.get("name"), strict=False)) \
                and self._selected(request, obj)  # fmt: skip

        def _as_seen(self, request: Any, ev: dict[str, Any]) -> dict[str, Any] | None:
            """The event as this watch's selectors see it (the API server's watch cache): an
            object that starts to match is ADDED, one that stops matching is DELETED with its
            previous content at the event's resourceVersion, one that matched neither before
            nor after is not sent."""
            kind, obj, prev = ev.get("type"), ev.get("object") or {}, ev.get(PREV)
            public = {k: v for k, v in ev.items() if k != PREV}
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                return public
            if kind == "DELETED":
                return public if self._watched(request, obj) else None
            now, before = self._watched(request, obj), kind == "MODIFIED" and self._watched(request, prev)
            if now:
                return {**public, "type": "MODIFIED" if before else "ADDED"}
            if before:
                gone = _prev_copy(prev)
                gone.setdefault("metadata", {})["resourceVersion"] = (obj.get("metadata") or {}).get("resourceVersion")
                return {**public, "type": "DELETED", "object": gone}
            return None

    km = Emulator()
    object.__setattr__(km, "_requests", collections.deque(maxlen=256))
    object.__setattr__(km, "_buses", collections.defaultdict(_recording_bus()))
    object.__setattr__(km, "_tessera_rules", ServerRules())
    return km


@contextlib.asynccontextmanager
async def kmock_cluster(tmp: Path) -> AsyncIterator[Cluster]:
    assert kmock is not None
    async with emulator() as km, kmock.Server(km) as srv:
        base = str(srv.url).rstrip("/")
        session = aiohttp.ClientSession()
        bound: dict[tuple[str, str, str], str] = {}
        lock = asyncio.Lock()
        cluster_box: list[Cluster] = []

        async def binding(req: Any) -> Any:
            parts = req.url.path.split("/")
            ns, pod = parts[4], parts[6]
            data = req.data or {}
            cluster_box[0].bindings.append({"namespace": ns, "pod": pod, **data})
            async with lock:  # the API server binds atomically: one winner per pod
                async with session.get(f"{base}/api/v1/namespaces/{ns}/pods/{pod}") as r:
                    if r.status == 404:
                        return kmock_status(404, "NotFound", f'pods "{pod}" not found')
                    current = await r.json()
                uid, there = (data.get("metadata") or {}).get("uid"), current["metadata"].get("uid")
                if uid and there and uid != there:  # the storage's precondition, checked before the update
                    return kmock_status(409, "Conflict", f'Operation cannot be fulfilled on pods "{pod}": '
                                        f"StorageError: invalid object, Code: 4, Key: /registry/pods/{ns}/{pod}, "
                                        f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
                                        f"precondition: {uid}, UID in object meta: {there}")  # fmt: skip
                if (current.get("metadata") or {}).get("deletionTimestamp"):  # the API server's words
                    return kmock_status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{pod}": '
                                        f"pod {pod} is being deleted, cannot be assigned to a host")  # fmt: skip
                if (current.get("spec") or {}).get("schedulingGates"):
                    return kmock_status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{pod}": '
                                        f"pod {pod} has non-empty .spec.schedulingGates")  # fmt: skip
                if pod in cluster_box[0].refuse_once:  # as for a pod recreated under its name
                    cluster_box[0].refuse_once.discard(pod)
                    return kmock_status(409, "Conflict", "Precondition failed: UID in precondition")
                incarnation = (ns, pod, current["metadata"].get("uid", ""))  # a pod re-created
                if (current.get("spec") or {}).get("nodeName") or incarnation in bound:  # under its
                    return kmock_status(409, "Conflict",  # name is another pod: bound afresh
                                        f'pod {pod} is already assigned to node "{bound.get(incarnation)}"')  # fmt: skip
                node = data["target"]["name"]
                bound[incarnation] = node
                cluster_box[0].bound.setdefault((ns, pod), []).append(node)
                # one write, as the API server's binding is one update of the pod (nodeName, the
                # binding's annotations and PodScheduled=True): its watchers see one MODIFIED
                patch = {"spec": {"nodeName": node},
                         "metadata": {"annotations": (data.get("metadata") or {}).get("annotations") or {}},
                         "status": {"conditions": [
                             *[c for c in (current.get("status") or {}).get("conditions") or []
                               if c.get("type") != "PodScheduled"],
                             {"type": "PodScheduled", "status": "True"}]}}  # fmt: skip
                async with session.patch(f"{base}/api/v1/namespaces/{ns}/pods/{pod}", json=patch,
                                         headers={BINDING_WRITE: "1"}) as r:
                    assert r.status == 200, await r.text()
            return kmock.Response(status=201, payload={"apiVersion": "v1", "kind": "Status", "status": "Success",
                                                      "code": 201})  # a fresh response: kmock keeps the last one it served

        km["post", kmock.subresource("binding")] << binding
        km.resources["v1/namespaces"] = {"kind": "Namespace", "namespaced": False}
        for res in ("v1/pods", "v1/nodes", "v1/events",
                    "scheduling.k8s.io/v1/priorityclasses", "v1/persistentvolumeclaims",
                    "v1/persistentvolumes", "storage.k8s.io/v1/storageclasses", "v1/resourcequotas",
                    "policy/v1/poddisruptionbudgets", "apps/v1/statefulsets", "apps/v1/replicasets",
                    "apps/v1/daemonsets", "apps/v1/deployments", "batch/v1/jobs"):
            km.resources[res] = {}  # what a real API server serves (kmock needs them declared)
        for res, info in VOLCANO_KINDS.items():  # what the chart's CRDs serve (volcano_crds)
            km.resources[res] = info
        path = tmp / "kubeconfig"
        _kubeconfig(path, base)
        kube = Kube(await configuration(str(path)), Limits(qps=0))
        cluster = Cluster("kmock", path, kube, requests=km._tessera_rules.requests, held=km._tessera_rules.held,
                          held_lists=km._tessera_rules.held_lists, held_requests=km._tessera_rules.held_requests,
                          held_answers=km._tessera_rules.held_answers, store_lock=km._lock, rules=km._tessera_rules)
        cluster_box.append(cluster)
        try:
            yield cluster
        finally:
            await kube.close()
            await session.close()


def kmock_status(code: int, reason: str, message: str) -> Any:
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": reason,
            "message": message, "code": code}  # fmt: skip
    return kmock.Response(status=code, payload=body)


def _start_envtest(tmp: Path) -> tuple[list[subprocess.Popen[bytes]], Path]:  # pragma: no cover
    """etcd + kube-apiserver from `KUBEBUILDER_ASSETS` on loopback ports, a static token."""
    from services.runtime.natsserver import free_port

    assets = Path(os.environ["KUBEBUILDER_ASSETS"])
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    token = tmp / "tokens.csv"
    token.write_text("tessera-test,admin,1,system:masters\n")
    sa_key = tmp / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    etcd = subprocess.Popen([str(assets / "etcd"), "--data-dir", str(tmp / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    api = subprocess.Popen([str(assets / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                            f"--secure-port={api_port}", "--bind-address=127.0.0.1",
                            f"--cert-dir={tmp / 'certs'}", f"--token-auth-file={token}",
                            "--authorization-mode=RBAC", f"--service-account-key-file={sa_key}",
                            f"--service-account-signing-key-file={sa_key}",
                            "--service-account-issuer=https://kubernetes.default.svc",
                            "--service-cluster-ip-range=10.0.0.0/24", "--disable-admission-plugins=ServiceAccount"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    path = tmp / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
        "clusters": [{"name": "envtest", "cluster": {"server": f"https://127.0.0.1:{api_port}",
                                                     "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
        "users": [{"name": "admin", "user": {"token": "tessera-test"}}],
    }))  # fmt: skip
    return [api, etcd], path


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.asynccontextmanager
async def envtest_cluster(tmp: Path) -> AsyncIterator[Cluster]:  # pragma: no cover - needs binaries
    procs, path = await asyncio.to_thread(_start_envtest, tmp)
    try:
        kube = Kube(await configuration(str(path)), Limits(qps=0))
        for _ in range(300):
            try:
                await kube.get("/readyz")
                break
            except Exception:
                await asyncio.sleep(0.1)
        try:
            yield Cluster("real", path, kube)
        finally:
            await kube.close()
    finally:
        await asyncio.to_thread(_stop, procs)


@contextlib.asynccontextmanager
async def given_cluster(tmp: Path) -> AsyncIterator[Cluster]:  # pragma: no cover - needs a cluster
    path = Path(os.environ["TESSERA_TEST_KUBECONFIG"])
    kube = await Kube.connect(str(path), Limits(qps=0))
    try:
        yield Cluster("real", path, kube, namespace=os.environ.get("TESSERA_TEST_NAMESPACE", "default"))
    finally:
        await kube.close()


@contextlib.asynccontextmanager
async def open_cluster(backend: str) -> AsyncIterator[Cluster]:
    tmp = Path(tempfile.mkdtemp(prefix="tessera-kube-"))
    try:
        opener = {"kmock": kmock_cluster, "envtest": envtest_cluster, "kubeconfig": given_cluster}[backend]
        async with opener(tmp) as cluster:
            yield cluster
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class GarbageCollector:
    """kube-controller-manager's garbage collector, for what Tessera makes owned by a Volcano
    Job: once a Job is deleted, the objects of the given kinds in its namespace whose
    `ownerReferences` name its uid are deleted — background propagation, each with its own uid
    as a precondition, pods gracefully (their kubelet confirms), and none already being
    deleted. A Job deleted in the foreground (the emulator's `_foreground`) has its dependents
    deleted while it stays, and its `foregroundDeletion` finalizer removed once none of them
    with `blockOwnerDeletion` is left — a pod blocks until its kubelet confirms; one made
    meanwhile is deleted too. Every real cluster runs one; an API server alone (envtest) does
    not, and the emulator has one only where a test or a benchmark starts this: Tessera must do
    without it, and leave the work to it where it runs. The real one keeps a graph of every
    object from its own watches; this one lists a deleted Job's namespace (its pods by the
    Job's label), which costs the shared cores far less than decoding every pod event of a
    churn. Its requests are counted under its own User-Agent."""

    AGENT = "garbage-collector"
    JOBS = "/apis/batch.volcano.sh/v1alpha1/jobs"
    #: kind → its path in a namespace
    KINDS: ClassVar[dict[str, str]] = {"pods": "/api/v1/namespaces/{ns}/pods", "podgroups": "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
             "configmaps": "/api/v1/namespaces/{ns}/configmaps", "services": "/api/v1/namespaces/{ns}/services",
             "secrets": "/api/v1/namespaces/{ns}/secrets",
             "persistentvolumeclaims": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
             "networkpolicies": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"}  # fmt: skip

    def __init__(self, kubeconfig: str, kinds: tuple[str, ...] = tuple(KINDS)) -> None:
        self.kubeconfig = kubeconfig
        self.kinds = kinds
        self.deleted = 0
        self._task: asyncio.Task[None] | None = None
        self._kube: Kube | None = None
        self._foreground: dict[str, asyncio.Task[None]] = {}  # owner uid → its foreground deletion

    async def __aenter__(self) -> GarbageCollector:
        self._kube = await Kube.connect(self.kubeconfig, Limits(qps=0, connections=8), agent=self.AGENT)
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await cancel_all([t for t in (self._task, *self._foreground.values()) if t is not None])
        if self._kube is not None:
            await self._kube.close()

    async def _watch(self) -> None:
        assert self._kube is not None
        async for ch in Reflector(self._kube, self.JOBS).changes():
            meta = ch.obj.get("metadata") or {}
            ns, name, uid = str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))
            if ch.kind == "delete":
                await self._collect(ns, name, uid)
            elif ch.kind == "upsert" and meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []) \
                    and uid not in self._foreground:  # fmt: skip
                self._foreground[uid] = asyncio.create_task(self._in_foreground(ns, name, uid))

    async def _dependents(self, ns: str, job: str, owner: str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
        """The objects owned by `owner`, by path, and the resourceVersion of their pods' list."""
        assert self._kube is not None
        found, pods_version = [], ""
        for kind in self.kinds:
            path = self.KINDS[kind].format(ns=ns)
            query = {"labelSelector": f"volcano.sh/job-name={job}"} if kind == "pods" else {}
            try:
                listed = await self._kube.get(path, **query)
            except KubeError as exc:
                if exc.status == 404:  # a kind this server does not serve
                    continue
                raise
            if kind == "pods":
                pods_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
            for obj in listed.get("items") or []:
                meta = obj.get("metadata") or {}
                if any(ref.get("uid") == owner for ref in meta.get("ownerReferences") or []):
                    found.append((f"{path}/{meta.get('name')}", obj))
        return found, pods_version

    async def _delete(self, found: list[tuple[str, dict[str, Any]]]) -> int:
        """Deletes those not being deleted already; how many it asked to delete."""
        assert self._kube is not None
        asked = 0
        for path, obj in found:
            meta = obj.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            asked += 1
            if await self._kube.delete_this(path, str(meta.get("uid") or "")):
                self.deleted += 1
        return asked

    async def _collect(self, ns: str, job: str, owner: str) -> None:
        await self._delete((await self._dependents(ns, job, owner))[0])

    async def _in_foreground(self, ns: str, job: str, owner: str) -> None:
        assert self._kube is not None
        pods = self.KINDS["pods"].format(ns=ns)
        while True:
            found, version = await self._dependents(ns, job, owner)
            if await self._delete(found):
                continue  # listed again: what went at once is gone, a bound pod is terminating
            if not any(ref.get("uid") == owner and ref.get("blockOwnerDeletion")
                       for _path, obj in found for ref in (obj.get("metadata") or {}).get("ownerReferences") or []):  # fmt: skip
                break
            # only pods linger (their kubelet confirms): the next change of one is looked at
            query = {"labelSelector": f"volcano.sh/job-name={job}", "resourceVersion": version}
            async for _event in self._kube.watch(pods, query):
                break
        path = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs/{job}"
        while True:  # the finalizer off, on this very object (409: changed meanwhile, read again)
            try:
                obj = await self._kube.get(path)
                meta = obj.get("metadata") or {}
                if meta.get("uid") != owner:
                    return
                rest = [f for f in meta.get("finalizers") or [] if f != FOREGROUND]
                await self._kube.patch(path, {"metadata": {"finalizers": rest or None,
                                                           "resourceVersion": meta.get("resourceVersion")}})  # fmt: skip
                return
            except KubeError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    raise


class Kubelet:
    """HAMi's device plugin and the kubelet for every node (see the module docstring)."""

    def __init__(self, cluster: Cluster, run_for: dict[str, int] | None = None, *,
                 hold_deletions: bool = False, hold_starts: bool = False,
                 stop_exit_code: int = 143) -> None:  # fmt: skip
        """`hold_deletions`: a pod being deleted keeps running (its grace period) until the test
        calls `confirm`; otherwise the kubelet confirms at once, as for containers that stop
        on SIGTERM. `hold_starts`: a bound pod stays Pending (its images pulling) until the
        test calls `start`."""
        self.cluster = cluster
        self.hold_deletions = hold_deletions
        self.hold_starts = hold_starts
        self.stop_exit_code = stop_exit_code  # what a deleted pod's containers exit with on SIGTERM
        self.pulling: dict[tuple[str, str], dict[str, Any]] = {}  # held starts
        self.terminating: dict[tuple[str, str], str] = {}  # (ns, pod) -> uid, held
        self.kube = cluster.kube
        self.served: list[tuple[str, str, str]] = []  # (node, ns, pod) in order served
        self.violations: list[str] = []
        self.allocating: dict[str, set[str]] = {}
        self.max_allocating = 0
        self.exit_codes = run_for or {}  # pod name -> exit code to finish with at once
        self._task: asyncio.Task[None] | None = None
        self._done: set[tuple[str, str, str]] = set()

    async def __aenter__(self) -> Kubelet:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        await cancel_all([self._task])

    async def _run(self) -> None:
        async for ch in Reflector(self.kube, pods_path()).changes():
            if ch.kind != "upsert":
                continue
            try:
                await self._serve(ch.obj)
            except KubeError as exc:
                if exc.status != 404:
                    raise

    async def _serve(self, obj: dict[str, Any]) -> None:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        ns, name, node = meta.get("namespace"), meta.get("name"), spec.get("nodeName")
        if meta.get("deletionTimestamp") and node:  # the kubelet confirms a graceful deletion
            if self.hold_deletions:
                self.terminating[(ns, name)] = meta.get("uid", "")
                return
            await self.confirm(ns, name, meta.get("uid", ""))
            return
        served = (ns, name, meta.get("uid", ""))  # a pod re-created under its name is served afresh
        if not node or served in self._done or (obj.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        annotations = meta.get("annotations") or {}
        if annotations.get(hami.BIND_PHASE) == "allocating":
            self.allocating.setdefault(node, set()).add(name)
            self.max_allocating = max(self.max_allocating, len(self.allocating[node]))
            n = await self.kube.get(nodes_path(node))
            lock = ((n.get("metadata") or {}).get("annotations") or {}).get(hami.NODE_LOCK, "")
            if lock.split(",")[1:3] != [ns, name]:
                self.violations.append(f"{ns}/{name} allocating on {node} without the node lock ({lock!r})")
            await self.kube.patch(pods_path(ns, name), {"metadata": {"annotations": {hami.BIND_PHASE: "success"}}})
            await self.kube.patch(nodes_path(node), {"metadata": {"annotations": {hami.NODE_LOCK: None}}})
            self.allocating[node].discard(name)
        if self.hold_starts:
            self.pulling[(ns, name)] = obj
            return
        self._done.add(served)
        self.served.append((node, ns, name))
        # as a kubelet reports a started pod: each container running and ready (no probes)
        statuses = [{"name": c.get("name", ""), "ready": True, "started": True, "state": {"running": {}}}
                    for c in spec.get("containers") or []]  # fmt: skip
        await self.kube.patch(pods_path(ns, name, "status"), {"status": {"phase": "Running", "containerStatuses": statuses}})
        if name in self.exit_codes:
            await self.finish(ns, name, self.exit_codes[name])

    async def start(self) -> None:
        """The images are in: every held pod starts (and those bound from now on at once)."""
        self.hold_starts = False
        held, self.pulling = list(self.pulling.values()), {}
        for obj in held:
            meta = obj.get("metadata") or {}
            with contextlib.suppress(KubeError):  # 404: deleted meanwhile
                current = await self.kube.get(pods_path(meta.get("namespace"), meta.get("name")))
                if (current.get("metadata") or {}).get("uid") == meta.get("uid"):
                    await self._serve(current)

    async def confirm(self, ns: str, name: str, uid: str = "") -> None:
        """The containers stopped: the pod's terminal phase first, as a kubelet (1.27 on) writes
        it for a deleted pod — Failed, its containers killed by SIGTERM (exit 143), or Succeeded
        where they exit 0 on it (`stop_exit_code`) — then delete this very pod (a UID
        precondition, as a kubelet does: a late event of a pod deleted already must not remove
        the next one made under its name)."""
        uid = uid or self.terminating.get((ns, name), "")
        self.terminating.pop((ns, name), None)
        with contextlib.suppress(KubeError):  # 404: gone
            current = await self.kube.get(pods_path(ns, name))
            if (current.get("metadata") or {}).get("uid") == uid and \
                    (current.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):  # fmt: skip
                await self.finish(ns, name, self.stop_exit_code)
        with contextlib.suppress(KubeError):  # 409: another pod has the name now; 404: gone
            await self.kube.delete(pods_path(ns, name), {"apiVersion": "v1", "kind": "DeleteOptions",
                                                         "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})  # fmt: skip

    async def finish(self, ns: str, name: str, code: int) -> None:
        phase = "Succeeded" if code == 0 else "Failed"
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        await self.kube.patch(pods_path(ns, name, "status"), {"status": {
            "phase": phase, "containerStatuses": [{"name": "c", "state": state}]}})  # fmt: skip


async def serve(directory: Path) -> None:  # pragma: no cover - used by benchmarks.k8s
    """The kmock cluster as a process of its own (benchmarks): writes `kubeconfig` into
    `directory`, prints "ready", serves until SIGTERM, then writes `requests.json`: the requests
    it served by client (User-Agent), verb and resource."""
    import signal

    async with kmock_cluster(directory) as cluster:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print(f"ready {cluster.kubeconfig}", flush=True)
        await stop.wait()
        counts = [{"agent": a, "verb": v, "resource": r, "n": n} for (a, v, r), n in sorted(cluster.requests.items())]
        (directory / "requests.json").write_text(json.dumps(counts, indent=1))


if __name__ == "__main__":  # pragma: no cover
    import sys

    asyncio.run(serve(Path(sys.argv[1])))
