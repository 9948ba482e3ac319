"""Tessera started with a new log on a cluster whose Volcano Jobs another log placed (`tessera
down --purge` then `up --fresh`, a migration from Volcano): each such Job is placed in the new
log where its pods are bound — a running pod on the cards HAMi's annotations name, an ended one
on none — and its pods are its own from then on: their phases are reported, the job ends when
they do, and nothing else is booked or made for it (issue rev-sre 1b). Before, admission never
saw a Job's pods: the Job was placed as new work on other cards, its bound pods were never
bound for that placement (they carried the lost log's stamp), so nothing was ever reported —
the job stayed Bound in Tessera and Pending on the API server, its new cards held for good,
while the cards its running pod used were free in the ledger for anyone else."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from contracts import hami
from services.cli.up import ControlPlane
from services.kube import pods as kpods
from services.kube import volcano
from services.kube.client import pods_path
from tests.kube import test_volcano as vc
from tests.kube.cluster import Cluster, Kubelet
from tests.kube.workload import as_pod, cli_json, hami_nodes
from tests.processes import wait_until


def _whole_card_pod(name: str) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"huawei.com/Ascend910B3": "1"}}}]}})  # fmt: skip


def _cards_of(pod: dict[str, Any]) -> set[str]:
    notes = pod["metadata"].get("annotations") or {}
    return {s.card for s in hami.annotated_slices(kpods.node_name(pod), notes)}


@pytest.mark.parametrize("cluster", ["kmock"], indirect=True)
async def test_a_volcano_job_placed_by_a_lost_log_is_placed_where_its_pods_are(cluster: Cluster,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    await vc.volcano_served(cluster)
    await hami_nodes(cluster)
    first = ControlPlane(tmp_path / "first", kubeconfig=str(cluster.kubeconfig))
    async with Kubelet(cluster) as kubelet:
        await vc._start(first)
        try:  # a pod on one card first: the old log's placement is not what a new log would pick
            await cluster.create_pod(_whole_card_pod("before"))

            async def before_runs() -> bool:
                return kpods.phase(await cluster.pod("default", "before") or {}) == "Running"

            await wait_until(before_runs, 60, "the first pod Running")
            await vc.create_article_job(cluster)
            await wait_until(lambda: vc.article_gang_runs(cluster, 0), 90, "the Job's two pods Running")
        finally:
            await asyncio.to_thread(first.stop)  # and its log is lost (`tessera down --purge`)
        await kubelet.finish("default", vc.WORKERS[0], 0)  # while no Tessera runs
        await cluster.kube.delete(pods_path("default", "before"))

        async def before_gone() -> bool:
            return await cluster.pod("default", "before") is None

        await wait_until(before_gone, 30, "the first pod gone")
        bound = {p["metadata"]["name"]: p for p in await cluster.pods() if p["metadata"]["name"] in vc.WORKERS}
        uids = {n: p["metadata"]["uid"] for n, p in bound.items()}
        running = _cards_of(bound[vc.WORKERS[1]])
        assert len(running) == 1 and _cards_of(bound[vc.WORKERS[0]]), bound

        second = ControlPlane(tmp_path / "second", kubeconfig=str(cluster.kubeconfig))  # `up --fresh`
        await vc._start(second)
        try:

            async def events() -> list[dict[str, Any]]:
                return list(await cli_json(second, "events", "--job", f"default/{vc.JOB}", "-o", "json", codes=(0, 1)))

            async def reported() -> bool:
                kinds = [(e["type"], e["data"].get("task")) for e in await events()]
                return ("TaskFinished", vc.WORKERS[0]) in kinds and ("TaskStarted", vc.WORKERS[1]) in kinds

            await wait_until(reported, 60, "the ended pod's end and the running pod's start in the new log")

            async def used() -> dict[str, int]:
                cards = await cli_json(second, "get", "cards", "-o", "records", codes=(0, 1))
                return {c["uuid"]: c["memory_used"] for c in cards if c["memory_used"]}

            assert set(await used()) == running  # the running pod's card, and no other
            commits = [e for e in await events() if e["type"] == "PlacementCommitted"]
            assert [c["data"].get("existing", False) for c in commits] == [True], commits
            assert {p["task"]: p["node"] for p in commits[0]["data"]["placements"]} == \
                {n: kpods.node_name(p) for n, p in bound.items()}  # fmt: skip

            async def restamped() -> bool:  # the new log's commit, as on a pod it bound itself
                notes = ((await cluster.pod("default", vc.WORKERS[1]) or {}).get("metadata") or {}).get("annotations") or {}
                return notes.get(volcano.PLACEMENT) == str(commits[0]["seq"]) and volcano.MADE_AFTER not in notes

            await wait_until(restamped, 30, "the running pod stamped with the new log's commit")

            await kubelet.finish("default", vc.WORKERS[1], 0)

            async def freed() -> bool:
                return not await used()

            await wait_until(freed, 60, "the card free once the last pod Succeeded")
            await wait_until(lambda: vc._phase_is(cluster, vc.JOB, "Completed"), 60, "the Job Completed")
            now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}
            assert now == uids  # no pod deleted, none made again
            kinds = [e["type"] for e in await events()]
            assert kinds.count("PlacementProposed") == 1 and "PlacementRejected" not in kinds, kinds
        finally:
            await asyncio.to_thread(second.stop)
