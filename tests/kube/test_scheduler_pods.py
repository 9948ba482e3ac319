"""Tessera's pod watches ask the API server for their schedulers' pods only (issue 29): with
two names, two selections merged into one stream that says `synced` once both are listed —
never after one alone, which would read as the other scheduler's pods all gone."""

from __future__ import annotations

import asyncio
from typing import Any

from services.kube.listwatch import Change, Merged, scheduler_pods
from tests.kube.cluster import Cluster


def pod(name: str, scheduler: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def test_two_schedulers_pods_are_one_stream_synced_once_both_are_listed(cluster: Cluster) -> None:
    for name, scheduler in (("a", "volcano"), ("b", "tessera"), ("c", ""), ("d", "volcano")):
        await cluster.create_pod(pod(name, scheduler))
    watched = scheduler_pods(cluster.kube, ["volcano", "tessera"])
    assert isinstance(watched, Merged) and len(watched.reflectors) == 2
    seen: list[Change] = []
    stream = watched.changes()
    try:
        async with asyncio.timeout(30):
            async for ch in stream:
                seen.append(ch)
                if ch.kind == "synced":
                    break
            listed = sorted(c.obj["metadata"]["name"] for c in seen if c.kind == "upsert")
            assert listed == ["a", "b", "d"] and [c.kind for c in seen].count("synced") == 1
            await cluster.create_pod(pod("e"))  # the default scheduler's: never sent
            await cluster.create_pod(pod("f", "tessera"))
            async for ch in stream:
                assert ch.obj["metadata"]["name"] == "f", ch
                break
    finally:
        await stream.aclose()
    assert scheduler_pods(cluster.kube, ["volcano"]).query == {"fieldSelector": "spec.schedulerName=volcano"}
