"""Tessera's node side on one node (the DaemonSet): discover the cards, write HAMi's node
annotations, and serve the kubelet's device-plugin calls for them — the half of HAMi an
operator otherwise installs for its device plugins.

Every `report_every` seconds (HAMi's agents: 30 s) the cards are read again with the vendor
tools; a change (a card gone unhealthy, a card gone) is sent to the kubelet through
ListAndWatch and to the cluster through the register annotation, which Tessera's cluster-side
node agent turns into the node's registration (the allocator then takes no new slices on the
unhealthy card). The handshake is refreshed each time, so a node whose agent stopped is seen.

Allocate finds its pod as HAMi's plugins do: the pod the node lock names (Tessera's binder
holds it while binding a device pod), else the one pod on this node in `bind-phase:
allocating`. On success the pod's erased slots are written back and, with no device left,
`bind-phase: success` and the lock is released; on failure `bind-phase: failed` and the lock is
released, and the kubelet fails the pod's admission (its task finishes, its slices are freed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from contracts import hami
from contracts.devices import CardSpec
from services.core.devices.catalogue import Catalogue
from services.core.devices.quantities import QuantityError, parse_int_quantity
from services.kube.client import Kube, KubeError, nodes_path, pods_path
from services.nodeagent.deviceplugin.allocate import (
    ALL_LIMITERS,
    DEFAULT_PATHS,
    AllocateError,
    Allocation,
    HostPaths,
    allocate,
)
from services.nodeagent.deviceplugin.resources import Resource, node_annotations, resources
from services.nodeagent.deviceplugin.tools import Discovery
from services.runtime.waits import within

log = logging.getLogger(__name__)

REPORT_EVERY = 30.0
#: what Go's strconv.ParseBool reads as true (HAMi reads CUDA_DISABLE_CONTROL with it)
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
UNREADABLE_AFTER = 3  # failed reads in a row before the cards are reported unhealthy


class NodeSide:
    def __init__(self, kube: Kube, discovery: Discovery, *, catalogue: Catalogue,
                 paths: HostPaths = DEFAULT_PATHS, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.kube = kube
        self.discovery = discovery
        self.node = discovery.node
        self.catalogue = catalogue
        self.paths = paths
        self.clock = clock
        self.cards: dict[str, CardSpec] = {}
        self.resources: dict[str, Resource] = {}
        self.hami_vnpu_core = False
        self.version = 0  # bumped on every change of the devices: ListAndWatch sends anew
        self.changed = asyncio.Condition()
        self._written: dict[str, str] = {}
        self.reads = 0  # the tools' good reads (a failed refresh after one is the API server's)
        self._allocating = asyncio.Lock()  # the kubelet admits one pod at a time; so do we

    # --- discovery and registration ------------------------------------------------------------

    async def refresh(self) -> bool:
        """Read the cards again; True when the devices changed (ListAndWatch woken)."""
        found = await self.discovery.read()
        self.reads += 1
        self.hami_vnpu_core = found.annotations.get(hami.VNPU_CORE) == "true"
        cards = {c.uuid: c for c in served(found.cards, self.cards, installed_limiters(self.paths))}
        changed = cards != self.cards
        if changed:
            await self._serve(cards)
            log.info("node %s: %d cards, resources %s", self.node, len(cards),
                     ", ".join(f"{r.name}={len(r.devices)}" for r in self.resources.values()))  # fmt: skip
        await self.write_annotations()
        return changed

    async def _serve(self, cards: dict[str, CardSpec]) -> None:
        """These cards from now on: the kubelet's resources made of them, ListAndWatch woken."""
        self.cards = cards
        self.resources = {r.name: r for r in resources(list(cards.values()), self.catalogue)}
        async with self.changed:
            self.version += 1
            self.changed.notify_all()

    async def unreadable(self) -> None:
        """The cards can no longer be read: each reported unhealthy, to the kubelet (ListAndWatch)
        and the scheduler (the register annotation), until a read says otherwise."""
        if not any(c.healthy for c in self.cards.values()):
            return
        await self._serve({u: msgspec.structs.replace(c, healthy=False) for u, c in self.cards.items()})
        log.warning("node %s: cards unreadable; %d reported unhealthy", self.node, len(self.cards))
        with contextlib.suppress(KubeError):
            await self.write_annotations()

    async def write_annotations(self) -> None:
        """HAMi's register annotations and fresh handshakes; a vendor no longer here loses its
        register annotation (HAMi's scheduler then drops its devices)."""
        wanted: dict[str, str | None] = dict(node_annotations(list(self.cards.values()), self.catalogue,
                                                              self.clock(), self.hami_vnpu_core))  # fmt: skip
        for key in self._written:
            wanted.setdefault(key, None)
        await self.kube.patch(nodes_path(self.node), {"metadata": {"annotations": wanted}})
        self._written = {k: v for k, v in wanted.items() if v is not None}

    async def wait_change(self, seen: int) -> int:
        """The devices' version once it differs from `seen` (ListAndWatch's next send)."""
        async with self.changed:
            await self.changed.wait_for(lambda: self.version != seen)
            return self.version

    # --- Allocate ------------------------------------------------------------------------------

    async def allocate(self, resource: str, requests: Sequence[Sequence[str]]) -> Allocation:
        """Serve the kubelet's Allocate; raises AllocateError after marking the pod failed."""
        async with self._allocating:
            res = self.resources.get(resource)
            if res is None:
                raise AllocateError(f"{resource}: not a resource of node {self.node}")
            pod = await self.pending_pod()
            meta = pod.get("metadata") or {}
            ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
            annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
            spec = pod.get("spec") or {}
            every = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            containers = [str(c.get("name") or "") for c in every]
            uncontrolled = frozenset(str(c.get("name") or "") for c in every if any(
                e.get("name") == "CUDA_DISABLE_CONTROL" and str(e.get("value", "")) in GO_TRUE
                for e in c.get("env") or []))  # fmt: skip
            nv = self.catalogue.nvidia
            priorities = {str(c.get("name") or ""): p for c in every
                          if (p := _priority(c, nv.resource_priority_name)) is not None}  # fmt: skip
            try:
                answer = allocate(res, self.cards, annotations, requests, containers=containers,
                                  pod_uid=str(meta.get("uid") or ""), paths=self.paths,
                                  oversubscribe=nv.device_memory_scaling > 1,
                                  limiters=installed_limiters(self.paths), uncontrolled=uncontrolled,
                                  core_policy=nv.gpu_core_policy, priorities=priorities)  # fmt: skip
                writable_dirs(answer)
            except (AllocateError, hami.CodecError, OSError) as exc:
                await self._failed(ns, name, str(exc))
                raise AllocateError(f"{ns}/{name}: {exc}") from None
            try:
                await self.kube.patch(pods_path(ns, name), {"metadata": {"annotations": answer.patch}})
            except KubeError as exc:  # (deleted meanwhile, the API server away): the lock goes
                await self._failed(ns, name, f"the pod's allocation not written: {exc}")  # too, not
                raise AllocateError(f"{ns}/{name}: the pod's allocation not written: {exc}") from None  # at expiry
            if answer.done:
                await self.release_lock(ns, name)
            log.info("allocated %s for %s/%s%s", resource, ns, name, " (done)" if answer.done else "")
            return answer

    async def pending_pod(self) -> dict[str, Any]:
        """The pod the kubelet is admitting: the node lock's, else the only one allocating here."""
        node = await self.kube.get(nodes_path(self.node))
        lock = ((node.get("metadata") or {}).get("annotations") or {}).get(hami.NODE_LOCK, "")
        holder = hami.lock_holder(lock) if lock else None
        if holder is not None:
            _, ns, name = holder
            try:
                pod = await self.kube.get(pods_path(ns, name))
            except KubeError as exc:
                if exc.status != 404:
                    raise
                raise AllocateError(f"the node lock names {ns}/{name}, which does not exist") from None
            if _allocating_here(pod, self.node):
                return pod
            raise AllocateError(f"the node lock names {ns}/{name}, which is not allocating on {self.node}")
        listed = await self.kube.get(pods_path(), fieldSelector=f"spec.nodeName={self.node}")
        found = [p for p in listed.get("items") or [] if _allocating_here(p, self.node)]
        if len(found) != 1:
            raise AllocateError(f"no node lock on {self.node} and {len(found)} pods allocating there "
                                "(exactly one can be served without the lock)")  # fmt: skip
        return found[0]

    async def _failed(self, ns: str, name: str, reason: str) -> None:
        log.warning("Allocate for %s/%s failed: %s", ns, name, reason)
        with contextlib.suppress(KubeError):
            await self.kube.patch(pods_path(ns, name), {"metadata": {"annotations": {hami.BIND_PHASE: "failed"}}})
        await self.release_lock(ns, name)

    async def release_lock(self, ns: str, name: str) -> None:
        """Erase the node lock if it names this pod, at the version read (never another's)."""
        for _attempt in range(5):
            try:
                node = await self.kube.get(nodes_path(self.node))
            except KubeError:
                return
            meta = node.get("metadata") or {}
            holder = hami.lock_holder((meta.get("annotations") or {}).get(hami.NODE_LOCK, "") or "")
            if holder is None or holder[1:] != (ns, name):
                return
            patch = {"metadata": {"annotations": {hami.NODE_LOCK: None},
                                  "resourceVersion": meta.get("resourceVersion")}}  # fmt: skip
            try:
                await self.kube.patch(nodes_path(self.node), patch)
                return
            except KubeError as exc:
                if exc.status != 409:
                    log.warning("node lock of %s not released: %s", self.node, exc)
                    return

    async def wanted_cards(self, resource: str) -> list[str]:
        """The cards the next container of the pod being admitted was committed to ([] when no
        pod is found: the kubelet's preference is then any)."""
        res = self.resources.get(resource)
        if res is None:
            return []
        try:
            pod = await self.pending_pod()
        except (AllocateError, KubeError):
            return []
        value = ((pod.get("metadata") or {}).get("annotations") or {}).get(res.to_allocate, "")
        try:
            slots = hami.decode_pod_devices(res.to_allocate, value)
        except hami.CodecError:
            return []
        return [d.uuid for d in next((s for s in slots if s), [])]

    # --- running ------------------------------------------------------------------------------

    async def run(self, stopping: asyncio.Event, every: float = REPORT_EVERY,
                  on_refresh: Callable[[], Any] | None = None, retry: float = 5.0) -> None:  # fmt: skip
        """Refresh every `every` seconds until `stopping`; a failed refresh is retried after 5 s
        (HAMi's agents do the same) and keeps the last devices — for `UNREADABLE_AFTER` failed
        reads in a row, then every card is reported unhealthy until a read succeeds: a GPU
        fallen off the bus fails nvidia-smi as a whole, and its cards stayed Healthy for good."""
        failed = 0  # failed reads in a row: a refused annotation write is no sign of the cards
        while not stopping.is_set():
            wait = every
            reads = self.reads
            try:
                await self.refresh()
                failed = 0
            except Exception:
                wait = retry
                if self.reads == reads:
                    failed += 1
                    log.exception("node %s: cards not read (%d in a row); retrying", self.node, failed)
                    if failed >= UNREADABLE_AFTER:
                        await self.unreadable()
                else:
                    failed = 0
                    log.exception("node %s: annotations not written; retrying", self.node)
            if on_refresh is not None:  # (a kubelet restarted meanwhile is registered again)
                try:
                    await on_refresh()
                except Exception:
                    log.exception("node %s: registering with the kubelet failed; retrying", self.node)
                    wait = retry
            with contextlib.suppress(TimeoutError):
                await within(stopping.wait(), wait)


def installed_limiters(paths: HostPaths) -> frozenset[str]:
    """The vendors whose in-container limiter is on this node (the chart mounts its host
    directories at the same paths): HAMi-core's libvgpu.so with its ld.so.preload, the vNPU
    hook's ld.so.preload. Nothing installs them but HAMi's own device-plugin images."""
    hook = Path(paths.hami_core) / "vgpu"
    have = set()
    if (hook / "libvgpu.so").is_file() and (hook / "ld.so.preload").is_file():
        have.add("nvidia")
    if (Path(paths.vnpu_core) / "ld.so.preload").is_file():
        have.add("huawei")
    return frozenset(have)


def writable_dirs(answer: Allocation) -> None:
    """The host directories a grant mounts writable, made world-writable before the runtime
    binds them (HAMi's plugins make them 0777): left missing, the runtime made them root's
    0755 and a container of another user could not write its limiter's cache or lock."""
    for grant in answer.grants:
        for m in grant.mounts:
            if not m.read_only:
                path = Path(m.host_path)
                path.mkdir(parents=True, exist_ok=True)
                path.chmod(0o777)


def served(cards: Sequence[CardSpec], before: Mapping[str, CardSpec] | None = None,
           limiters: frozenset[str] = ALL_LIMITERS) -> list[CardSpec]:  # fmt: skip
    """The cards as this node side serves them: a GPU in MIG mode is registered (so the node's
    cards are all told) but unhealthy, to the kubelet and the scheduler alike — Allocate cannot
    give MIG instances, and advertised healthy it drew pods that each failed the kubelet's
    admission (UnexpectedAdmissionError), a Job's made again onto it. HAMi's plugin serves MIG.
    A soft-sliced card whose vendor's limiter is not on the node (`limiters`) is served whole
    (split count 1): Allocate refuses slices there, and offered as shares it drew them, each
    failing admission. Said once per card (`before`: the cards as last served)."""
    before = before or {}
    out = []
    for c in cards:
        was = before.get(c.uuid)
        if c.mode == "mig" and c.healthy:
            if was is None or was.mode != "mig":
                log.warning("card %s is in MIG mode, which Tessera's device plugin does not serve: "
                            "registered unhealthy (HAMi's device plugin serves MIG)", c.uuid)  # fmt: skip
            c = msgspec.structs.replace(c, healthy=False)
        if c.mode == "hami-core" and c.vendor not in limiters and c.split_count > 1:
            if was is None or was.split_count != 1:
                log.warning("card %s: no in-container limiter for %s on this node: served whole (split count 1, "
                            "was %d) until it is installed", c.uuid, c.vendor, c.split_count)  # fmt: skip
            c = msgspec.structs.replace(c, split_count=1)
        out.append(c)
    return out


def _allocating_here(pod: Mapping[str, Any], node: str) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(hami.BIND_PHASE) == "allocating" and annotations.get(hami.VGPU_NODE) == node


def _priority(container: Mapping[str, Any], name: str) -> str | None:
    """The container's `nvidia.com/priority` limit as HAMi's webhook writes it into
    CUDA_TASK_PRIORITY (limits only, as there); None without one or when it is not an integer
    (admission refuses such a value)."""
    raw = ((container.get("resources") or {}).get("limits") or {}).get(name)
    if raw is None:
        return None
    try:
        return str(parse_int_quantity(raw))
    except QuantityError:
        return None
