"""Admission on a cluster: Pods whose `schedulerName` is Tessera's (and PriorityClasses) are
read from the API server and judged by the very rules `tessera apply` uses.

An accepted pod becomes its job's `JobSubmitted` (a pod already Running on a node also gets an
`existing` proposal, so its cards are booked before anything else is placed there); a refused
pod gets a Warning Event and `PodScheduled=False` naming every rule, and nothing else changes;
a pod deleted from the API server ends its implied job (`JobDeleted`). Changes are taken in
batches (one plan, one pipelined append for everything that arrived together), and Running pods
of a batch go first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from contracts.api import REJECTED
from services.admission.service import AdmissionService
from services.kube import pods, status
from services.kube.client import PRIORITY_CLASSES, Kube, KubeError, pods_path
from services.kube.listwatch import Change, Reflector

log = logging.getLogger(__name__)

MAX_BATCH = 500


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

    def _ours(self, obj: dict[str, Any]) -> bool:
        return pods.scheduler_name(obj) in self.scheduler_names

    async def _feed(self, what: str, reflector: Reflector, synced: asyncio.Event) -> None:
        async for ch in reflector.changes():
            await self.changes.put((what, ch))
            if ch.kind == "synced":
                synced.set()

    async def _feed_all(self) -> None:
        """PriorityClasses are listed before the first pod, so a pod naming one is judged
        with its value."""
        pcs, listed = asyncio.Event(), asyncio.Event()
        t = asyncio.create_task(self._feed("priorityclass", Reflector(self.kube, PRIORITY_CLASSES), pcs))
        try:
            with contextlib.suppress(TimeoutError):  # a server without them must not stall pods
                await asyncio.wait_for(pcs.wait(), 10.0)
            await self._feed("pod", Reflector(self.kube, pods_path(), keep=self._ours), listed)
        finally:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def _wanted(self, obj: dict[str, Any]) -> bool:
        r = pods.ref(obj)
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
        for what, ch in batch:
            if ch.kind == "synced":
                continue
            if what == "priorityclass":
                if ch.kind == "upsert":
                    docs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 **{k: v for k, v in ch.obj.items() if k in (
                                     "value", "globalDefault", "preemptionPolicy", "description")},
                                 "metadata": {"name": (ch.obj.get("metadata") or {}).get("name")}})  # fmt: skip
                continue
            r = pods.ref(ch.obj)
            if ch.kind == "delete":
                if not r.grouped:
                    await self.admission.delete_job(r.namespace, r.job, r.uid or "pod")
                continue
            if self._wanted(ch.obj):
                objs[(r.namespace, r.name)] = ch.obj
        running = [o for o in objs.values() if pods.node_name(o)]
        docs.extend(pods.manifest(o) for o in running)
        docs.extend(pods.manifest(o) for o in objs.values() if not pods.node_name(o))
        if not docs:
            return
        results = await self.admission.admit_documents(docs)
        for res in results:
            obj = objs.get((res.namespace, res.name)) if res.kind == "Pod" else None
            if res.outcome == REJECTED:
                if obj is None:
                    obj = next((o for o in objs.values() if pods.ref(o).job == res.name
                                and pods.ref(o).namespace == res.namespace), None)  # fmt: skip
                if obj is None:
                    log.warning("%s %s refused: %s", res.kind, res.name, "; ".join(res.reasons))
                    continue
                self.refused += 1
                with contextlib.suppress(KubeError):
                    await status.refuse(self.kube, obj, res.reasons, self.clock())
            else:
                self.admitted += 1

    async def recover(self) -> None:
        pass  # what admission knows comes from the log; the pods from the first list

    async def run(self, stopping: asyncio.Event) -> None:
        feeders = [asyncio.create_task(self._feed_all())]
        try:
            while not stopping.is_set():
                try:
                    first = await asyncio.wait_for(self.changes.get(), 0.5)
                except TimeoutError:
                    continue
                batch = [first]
                while len(batch) < MAX_BATCH and not self.changes.empty():
                    batch.append(self.changes.get_nowait())
                try:
                    await self.process(batch)
                except Exception:
                    log.exception("a batch of %d changes was not admitted; retrying", len(batch))
                    await asyncio.sleep(1.0)
                    for item in batch:
                        self.changes.put_nowait(item)
        finally:
            for t in feeders:
                t.cancel()
            for t in feeders:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
