"""List-then-watch against kmock's emulator through kubernetes-asyncio: a watch that ends is
resumed from the last resourceVersion (bookmarks included), `410 Gone` means relist, and the
relist is diffed against what was known so objects deleted meanwhile are reported deleted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import kmock
import pytest

from services.kube.client import Kube, Limits, configuration, pods_path
from services.kube.listwatch import Change, Reflector
from tests.kube.cluster import _kubeconfig


@pytest.fixture
async def emulator(tmp_path) -> AsyncIterator[tuple[kmock.KubernetesEmulator, Kube]]:  # type: ignore[no-untyped-def]
    async with kmock.KubernetesEmulator() as km, kmock.Server(km) as srv:
        km.resources["v1/pods"] = {}
        _kubeconfig(tmp_path / "kc", str(srv.url).rstrip("/"))
        kube = Kube(await configuration(str(tmp_path / "kc")), Limits(qps=0))
        try:
            yield km, kube
        finally:
            await kube.close()


def _pod(name: str, rv: str = "") -> dict:
    meta = {"name": name, "namespace": "default", **({"resourceVersion": rv} if rv else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}}


async def _take(it: AsyncIterator[Change], n: int) -> list[tuple[str, str]]:
    return [(c.kind, c.key) for c in [await asyncio.wait_for(anext(it), 10) for _ in range(n)]]


async def test_resume_from_bookmark_then_relist_on_410_reports_deletions(emulator) -> None:  # type: ignore[no-untyped-def]
    km, kube = emulator
    await kube.create(pods_path("default"), _pod("b"))
    # the first list is stale: it still has `a`, which the server no longer holds
    km["get", kmock.params({"limit": "500"})][:1] << {
        "kind": "PodList", "metadata": {"resourceVersion": "10"}, "items": [_pod("a", "5"), _pod("b")]}  # fmt: skip
    replies = iter([
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "42"}}},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}},
    ])  # fmt: skip
    km["get", kmock.params({"watch": "true"})][:2] << (lambda _req: next(replies))
    reflector = Reflector(kube, pods_path(), retry=0.01)
    it = reflector.changes().__aiter__()
    assert await _take(it, 3) == [("upsert", "default/a"), ("upsert", "default/b"), ("synced", "")]
    # bookmark → the stream ends → resumed from 42 → 410 → relisted: `a` is gone, `b` unchanged
    assert await _take(it, 2) == [("delete", "default/a"), ("synced", "")]
    assert reflector.relists == 2 and reflector.resumes >= 1
    resumed = [r for r in km if r.params.get("watch") == "true"]
    assert resumed[1].params.get("resourceVersion") == "42"
    await kube.create(pods_path("default"), _pod("c"))
    assert await _take(it, 1) == [("upsert", "default/c")]


async def test_a_relist_reports_no_change_for_objects_the_watch_already_brought(emulator) -> None:  # type: ignore[no-untyped-def]
    # a real server's list items carry no kind/apiVersion and its watch events' objects do:
    # after a 410 every object last seen through the watch was reported changed again, and the
    # job controller and admission judged every pod and Job of the cluster anew
    km, kube = emulator
    listed = {k: v for k, v in _pod("a", "5").items() if k not in ("kind", "apiVersion")}
    again = {k: v for k, v in _pod("a", "11").items() if k not in ("kind", "apiVersion")}
    lists = iter([{"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "10"}, "items": [listed]},
                  {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "12"}, "items": [again]}])  # fmt: skip
    km["get", kmock.params({"limit": "500"})][:2] << (lambda _req: next(lists))
    replies = iter([
        {"type": "MODIFIED", "object": _pod("a", "11")},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}},
    ])  # fmt: skip
    km["get", kmock.params({"watch": "true"})][:2] << (lambda _req: next(replies))
    reflector = Reflector(kube, pods_path(), retry=0.01)
    it = reflector.changes().__aiter__()
    assert await _take(it, 3) == [("upsert", "default/a"), ("synced", ""), ("upsert", "default/a")]
    assert await _take(it, 1) == [("synced", "")]  # relisted: nothing changed
    assert reflector.relists == 2


async def test_a_resource_the_server_does_not_serve_is_reported_missing(emulator) -> None:  # type: ignore[no-untyped-def]
    """A CRD not installed (Volcano's HyperNode on an older Volcano, or none at all) answers a
    list with 404: the reflector keeps trying, and says so, so that admission, which waits for
    Queues and HyperNodes before judging pods, does not wait its 10 s for nothing."""
    _km, kube = emulator
    missing = asyncio.Event()
    reflector = Reflector(kube, "/apis/topology.volcano.sh/v1alpha1/hypernodes", retry=0.01, missing=missing)
    changes = asyncio.create_task(anext(reflector.changes().__aiter__()))
    try:
        await asyncio.wait_for(missing.wait(), 10)
        assert not changes.done()  # nothing listed: no change, no `synced`
    finally:
        changes.cancel()


async def test_an_unserved_resource_is_said_once_and_asked_less_and_less_often(emulator, caplog) -> None:  # type: ignore[no-untyped-def]
    """It was asked every second, with a warning each time, for as long as the service ran (a
    cluster without the HyperNode CRD logged one a second)."""
    import logging

    from services.kube import listwatch
    from tests.processes import wait_until

    _km, kube = emulator
    reflector = Reflector(kube, "/apis/flow.volcano.sh/v1alpha1/jobflows", retry=0.001)
    caplog.set_level(logging.INFO, logger=listwatch.__name__)
    changes = asyncio.create_task(anext(reflector.changes().__aiter__()))
    try:
        await wait_until(lambda: asyncio.sleep(0, reflector.absent >= 6), 10, "six lists answered 404")
    finally:
        changes.cancel()
    said = [r for r in caplog.records if "jobflows" in r.getMessage()]
    assert len(said) == 1 and "is not served" in said[0].getMessage()


async def test_events_do_not_wait_for_the_other_requests_share_of_the_qps_limit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kube-scheduler writes its Events through a client of its own, each with the QPS limit:
    Tessera's binder asked one binding and one `Scheduled` Event per pod from one bucket, so at
    the default 50 QPS it bound ~25 pods/s (benchmarks.kube_churn). A client whose requests
    have spent its bucket still writes an Event at once (the bucket here refills once in ~3 h:
    sharing it, the Event would wait past the guard)."""
    from services.kube.client import events_path
    from services.kube.status import write_event

    async with kmock.KubernetesEmulator() as km, kmock.Server(km) as srv:
        km.resources["v1/pods"] = {}
        km.resources["v1/events"] = {}
        _kubeconfig(tmp_path / "kc", str(srv.url).rstrip("/"))
        kube = Kube(await configuration(str(tmp_path / "kc")), Limits(qps=0.0001, burst=1))
        reader = Kube(await configuration(str(tmp_path / "kc")), Limits(qps=0))
        try:
            await kube.create(pods_path("default"), _pod("a"))  # the bucket's one token
            await asyncio.wait_for(write_event(kube, _pod("a"), "Normal", "Scheduled", "assigned", 0.0), 30)
            assert [e["reason"] for e in (await reader.get(events_path("default")))["items"]] == ["Scheduled"]
            with pytest.raises(TimeoutError):  # (and the pods' bucket is spent indeed)
                await asyncio.wait_for(kube.create(pods_path("default"), _pod("b")), 0.5)
        finally:
            await kube.close()
            await reader.close()
