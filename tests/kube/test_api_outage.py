"""An API-server outage as an SRE sees it (review rev-sre, finding 5): the emulator behind a
TCP proxy that is switched off (connections refused, open watches cut) and on again.

During 24 s of refused connections every service answered `/readyz` 200, no metric said
anything, and the logs got one WARNING per watch per second with no backoff (655 lines) and
never a line saying since when the server was gone. Now: one WARNING at the outage's start and
one INFO at its end per client, reflectors back off and stay quiet about it, readiness fails
once the outage outlasts its limit (liveness does not), and `tessera_kube_api_reachable` says
it. The reachability's clock is a fake one: no sleeps, no timing asserts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace

import kmock
import pytest

from services.cli.kubeobjects import component_object
from services.cli.supervise import with_readiness
from services.kube.client import Kube, Limits, configuration, nodes_path, pods_path
from services.kube.listwatch import BACKOFF_CAP, Change, Reflector, backoff
from services.runtime import liveness
from services.runtime.health import Health, serve_probes
from services.runtime.metrics import ServiceMetrics
from services.runtime.natsserver import free_port
from tests.kube.cluster import _kubeconfig
from tests.processes import wait_until


class Proxy:
    """A TCP proxy to `target` on loopback: `down()` refuses new connections and cuts the open
    ones (an API server gone), `up()` serves again on the same port."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, free_port()
        self.server: asyncio.Server | None = None
        self.conns: set[asyncio.StreamWriter] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        if self.server is None:  # switched off while this one was connecting upstream
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self.conns.update({writer, up_writer})

        async def pipe(a: asyncio.StreamReader, b: asyncio.StreamWriter) -> None:
            try:
                while data := await a.read(65536):
                    b.write(data)
                    await b.drain()
            except OSError:
                pass
            finally:
                b.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.conns.difference_update({writer, up_writer})

    async def up(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)

    async def down(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for conn in list(self.conns):
            conn.transport.abort()
        self.conns.clear()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def behind_proxy(tmp_path) -> AsyncIterator[tuple[Proxy, Kube, Kube]]:  # type: ignore[no-untyped-def]
    """(the proxy, a client through it, a client straight to the emulator)."""
    async with kmock.KubernetesEmulator() as km, kmock.Server(km) as srv:
        km.resources["v1/pods"] = {}
        km.resources["v1/nodes"] = {}
        proxy = Proxy(int(str(srv.url).rstrip("/").rsplit(":", 1)[1]))
        await proxy.up()
        _kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{proxy.port}")
        _kubeconfig(tmp_path / "direct", str(srv.url).rstrip("/"))
        kube = Kube(await configuration(str(tmp_path / "kc")), Limits(qps=0))
        kube.retries = 0  # each failure goes straight to the reflector (no 0.2 s · 2^n retries)
        direct = Kube(await configuration(str(tmp_path / "direct")), Limits(qps=0))
        try:
            yield proxy, kube, direct
        finally:
            await proxy.down()
            await kube.close()
            await direct.close()


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {}}


async def _drain(r: Reflector, seen: list[Change]) -> None:
    async for ch in r.changes():
        seen.append(ch)


def _kube_records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("services.kube") and r.levelno == level]


async def test_an_outage_is_one_line_each_way_unready_past_its_limit_and_a_metric(behind_proxy, caplog) -> None:  # type: ignore[no-untyped-def]
    proxy, kube, direct = behind_proxy
    clock = Clock()
    kube.reach.clock = clock
    health = Health(clock=clock)
    health.ready = True
    metrics = ServiceMetrics("queue")
    liveness.watch_reach(SimpleNamespace(name="queue", metrics=metrics), kube.reach, health, 10.0)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, logger="services.kube")
    reflectors = [Reflector(kube, pods_path(), retry=0.01), Reflector(kube, nodes_path(), retry=0.01),
                  Reflector(kube, pods_path("default"), retry=0.01)]  # fmt: skip
    seen: list[list[Change]] = [[] for _ in reflectors]
    tasks = [asyncio.create_task(_drain(r, s)) for r, s in zip(reflectors, seen, strict=True)]
    try:
        await wait_until(lambda: asyncio.sleep(0, all(any(c.kind == "synced" for c in s) for s in seen)),
                         10, "every reflector listed")  # fmt: skip
        assert b"tessera_kube_api_reachable{service=\"queue\"} 1.0" in metrics.exposition()

        await proxy.down()
        await wait_until(lambda: asyncio.sleep(0, all(r.failures >= 6 for r in reflectors)), 20,
                         "six failures in a row for every reflector")  # fmt: skip
        # backed off: the sixth wait is 32 times the first
        assert backoff(0.01, 6) == 0.32 and backoff(1.0, 6) == BACKOFF_CAP
        await direct.create(pods_path("default"), _pod("made-meanwhile"))  # (each reflector
        await direct.create(nodes_path(), {"apiVersion": "v1", "kind": "Node",  # gets an event)
                                           "metadata": {"name": "made-meanwhile"}})  # fmt: skip
        # 18+ failed attempts of 3 watches: the client said it once, the reflectors not at all
        said = _kube_records(caplog, logging.WARNING)
        assert len(said) == 1 and "unreachable since" in said[0], said
        assert health.readiness() == (True, "ok")  # not yet longer than the limit
        clock.now += 11
        ready, why = health.readiness()
        assert not ready and "API server" in why and "unreachable for 11s" in why, why
        assert health.live() == (True, "ok")  # never a restart for it
        text = metrics.exposition().decode()
        assert 'tessera_kube_api_reachable{service="queue"} 0.0' in text
        assert 'tessera_kube_api_unreachable_seconds{service="queue"} 11.0' in text
        assert 'tessera_kube_requests_total{service="queue",method="WATCH",code="<error>"}' in text
        # `get components` asks each running service's /readyz: `up` itself sees only processes
        probes = serve_probes(health, metrics.exposition, 0)
        try:
            state = {"components": [{"name": "queue", "state": "running", "pid": 1, "restarts": 1,
                                     "last_error": "killed by SIGKILL"}],
                     "metrics": {"queue": probes.server_port}}  # fmt: skip
            [shown] = await asyncio.to_thread(with_readiness, state)
        finally:
            probes.shutdown()
            probes.server_close()
        assert shown["state"] == "unready", shown
        assert "unreachable for 11s" in shown["last_error"] and "(before: killed by SIGKILL)" in shown["last_error"]
        assert component_object(shown)["conditions"][0]["status"] == "False"

        await proxy.up()
        await wait_until(lambda: asyncio.sleep(0, all(any(c.key.endswith("made-meanwhile") for c in s) for s in seen)),
                         20, "every reflector resumed and saw what was made during the outage")  # fmt: skip
        await wait_until(lambda: asyncio.sleep(0, not kube.reach.down and all(r.failures == 0 for r in reflectors)),
                         20, "every reflector back")  # fmt: skip
        assert health.readiness() == (True, "ok")
        assert len(_kube_records(caplog, logging.WARNING)) == 1
        back = _kube_records(caplog, logging.INFO)
        assert len([m for m in back if "reachable again" in m]) == 1, back
        assert not [m for m in back if "listing and watching again" in m]  # (never said failing)
        assert 'tessera_kube_api_reachable{service="queue"} 1.0' in metrics.exposition().decode()
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


def test_the_backoff_doubles_from_the_first_wait_up_to_its_cap() -> None:
    assert [backoff(1.0, n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff(1.0, 10_000) == BACKOFF_CAP
