"""The workload zoo on a Kubernetes API (issue 27): the five service processes on a real NATS
with `--kubeconfig`, against kmock's emulator (or a real API server when one is given), nodes
registered as HAMi registers them (template 910B3 node-a, hami-core 910B3 node-b, A100 gpu-1,
cordoned node-c). The zoo of `tests/zoo.py` is created as `kubectl apply` creates it: Pods with
`schedulerName: volcano`, a PodGroup, a Volcano Job.

Every pod is bound once to the node kube-scheduler + Volcano + HAMi would choose (`spec.nodeName`),
the card pods with HAMi's annotations for the slice they hold (`hami.io/*-devices-allocated`,
Ascend's runtime info with its vNPU template); the pod too big for any node stays unbound with
`PodScheduled=False` and a `FailedScheduling` Event naming the resource. The log holds at most
the zoo's fixed number of events per pod, also after a later pod ran with the cluster otherwise
idle, and no proposal was answered "already placed as proposed".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from contracts import hami
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.status import scheduled_condition
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod, hami_nodes
from tests.processes import wait_until
from tests.zoo import (
    DURATION,
    EXPECTED,
    LATER,
    LATER_EXPECTED,
    LATER_POD,
    MEMORY_910B3,
    NVIDIA_MEMORY,
    PODGROUP,
    PODS,
    UNFITTABLE,
    VOLCANO_JOB,
    Held,
    LogFacts,
    Outcome,
    bound,
    log_facts,
    log_problems,
    outcome_problems,
)

SETTLE = 90.0  # the zoo binds in seconds (CI under load: more); a cpu-only pod that is never bound fails here
LATER_SETTLE = 60.0  # one more pod on an idle cluster
CORDONED = "node-c"


def kube_pod(doc: dict[str, Any]) -> dict[str, Any]:
    """A zoo Pod as a user creates it for Volcano: `schedulerName: volcano`, and no simulated
    duration (the harness's kubelet ends the pods that have one)."""
    pod = as_pod(doc)
    (pod["metadata"].get("annotations") or {}).pop(DURATION, None)
    return pod


def finishing() -> dict[str, int]:
    """The pods the kubelet ends at once with exit code 0 (those with a duration in the zoo)."""
    return {
        d["metadata"]["name"]: 0
        for d in PODS
        if DURATION in (d["metadata"].get("annotations") or {})
    }


def held(pod: dict[str, Any]) -> list[Held]:
    """The slices HAMi's annotations give the pod: a card's whole memory is the whole card, a
    device Ascend's runtime info names a template of is that template, anything else soft."""
    ann = pod["metadata"].get("annotations") or {}
    templates = hami.runtime_templates(ann)
    out = []
    for d in hami.allocated_devices(ann):
        vendor = "nvidia" if d.type.startswith("NVIDIA") else "huawei"
        whole = d.memory >= (NVIDIA_MEMORY if vendor == "nvidia" else MEMORY_910B3)
        kind = "whole" if whole else "template" if d.uuid in templates else "soft"
        out.append(
            Held(
                kind=kind,
                memory=d.memory,
                cores=d.cores,
                template=templates.get(d.uuid),
                vendor=vendor,
            )
        )
    return out


def reason_of(pod: dict[str, Any]) -> str:
    cond = scheduled_condition(pod)
    return str(cond.get("message") or "") if cond and cond.get("status") == "False" else ""


def problems_of(objs: dict[str, dict[str, Any]], expected: dict[str, Outcome]) -> list[str]:
    out = []
    for name, want in expected.items():
        pod = objs.get(name)
        if pod is None:
            out.append(f"{name}: no such pod on the API")
            continue
        node = kpods.node_name(pod) or None
        phase = kpods.phase(pod) or "Pending"
        out += outcome_problems(name, want, phase, node, held(pod), reason_of(pod))
        if node == CORDONED:
            out.append(f"{name}: bound to the cordoned {CORDONED}")
        ann = pod["metadata"].get("annotations") or {}
        if held(pod) and (ann.get(hami.VGPU_NODE) != node or ann.get(hami.BIND_PHASE) != "success"):
            out.append(f"{name}: HAMi's annotations say node {ann.get(hami.VGPU_NODE)!r}, "
                       f"bind-phase {ann.get(hami.BIND_PHASE)!r}; want {node!r}, 'success'")  # fmt: skip
    return out


async def pods_by_name(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in await cluster.pods()}


async def facts_of(url: str, namespace: str) -> LogFacts:
    log = await JetStreamLog.connect(url)
    try:
        return log_facts([m async for m in log.replay()], namespace)
    finally:
        await log.close()


def namespaced(doc: dict[str, Any], ns: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["namespace"] = ns
    return doc


async def test_zoo_is_bound_where_kube_scheduler_volcano_and_hami_bind_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    ns = cluster.namespace
    await cluster.volcano_crds()
    await hami_nodes(cluster)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster, run_for=finishing()):
        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.kube.create(volcano.podgroups_path(ns), namespaced(PODGROUP, ns))
            await cluster.kube.create(volcano.jobs_path(ns), namespaced(VOLCANO_JOB, ns))
            for doc in PODS:
                await cluster.create_pod(kube_pod(doc))
            ended: list[str] = []

            async def settled() -> bool:
                nonlocal ended
                ended = problems_of(await pods_by_name(cluster), EXPECTED)
                return not ended

            try:
                await wait_until(settled, SETTLE, "every zoo pod bound where it belongs")
            except TimeoutError:
                pass  # `ended` says which pods are not; the log says why, below
            facts = await facts_of(cp.url, ns)
            problems = ended + log_problems(facts)
            if (
                cluster.kind == "kmock"
            ):  # each pod bound once (accepted bindings), the waiting one never
                bound_to = {pod: nodes for (_ns, pod), nodes in cluster.bound.items()}
                problems += [
                    f"{n}: bound {len(v)} times ({v})"
                    for n, v in sorted(bound_to.items())
                    if len(v) != 1
                ]
                if UNFITTABLE in bound_to or UNFITTABLE in {b["pod"] for b in cluster.bindings}:
                    problems.append(f"{UNFITTABLE}: a binding was requested for it")
            assert not problems, "\n".join(problems)
            failed: list[dict] = []

            async def told() -> bool:  # (the Event is written after the condition, on its own)
                nonlocal failed
                failed = [e for e in await cluster.events(ns) if e["involvedObject"].get("name") == UNFITTABLE
                          and e.get("reason") == "FailedScheduling"]  # fmt: skip
                return any("cpu" in e["message"] for e in failed)

            with contextlib.suppress(TimeoutError):
                await wait_until(told, 30, f"{UNFITTABLE}'s FailedScheduling Event naming cpu")
            # the Events say why, as the condition does (an early one may predate the nodes)
            assert all(e["type"] == "Warning" for e in failed) and any("cpu" in e["message"] for e in failed), \
                [e["message"] for e in failed]  # fmt: skip

            # later, with nothing else to do: one more pod is bound and runs; the waiting pod's
            # subject must not have grown past its bound meanwhile
            before = facts.count(UNFITTABLE)
            await cluster.create_pod(kube_pod(LATER))
            later: list[str] = []

            async def later_runs() -> bool:
                nonlocal later
                later = problems_of(
                    await pods_by_name(cluster), {**EXPECTED, LATER_POD: LATER_EXPECTED}
                )
                return not later

            try:
                await wait_until(
                    later_runs, LATER_SETTLE, "the later pod Running, the zoo where it was"
                )
            except TimeoutError:
                raise AssertionError("\n".join(later)) from None
            after = await facts_of(cp.url, ns)
        finally:
            await asyncio.to_thread(cp.stop)
    problems = log_problems(after)
    assert not problems, "\n".join(problems)
    assert after.count(UNFITTABLE) <= bound(UNFITTABLE), (before, after.per_job[UNFITTABLE])
