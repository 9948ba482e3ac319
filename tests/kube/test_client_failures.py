"""What the API client does when the server does not answer as asked: a refused connection (an
API server restarting), a create whose outcome is unknown, a token the server no longer takes.

A real kube-apiserver does each of these; the emulator never does, so these tests run the client
against a small HTTP server on loopback that answers as scripted, through both transports (the
kept-alive HTTP/1 client and aiohttp's)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp.web
import pytest

from services.kube.client import RETRIES, Kube, KubeError, Limits, _proxied, configuration
from services.runtime.natsserver import free_port
from tests.processes import wait_until

Answer = Callable[[aiohttp.web.Request, bytes], aiohttp.web.Response]


def _ok(body: dict[str, object], status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.json_response(body, status=status)


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                                      "reason": reason, "message": message, "code": code},
                                     status=code)  # fmt: skip


class Server:
    """An HTTP server on a loopback port that answers every request with `answer` and keeps
    what it was asked; started when the test says (the port is refused until then)."""

    def __init__(self, port: int, answer: Answer) -> None:
        self.port = port
        self.answer = answer
        self.seen: list[tuple[str, str, bytes, str]] = []  # method, path, body, Authorization
        self.runner: aiohttp.web.AppRunner | None = None

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        body = await request.read()
        self.seen.append((request.method, request.path, body, request.headers.get("Authorization", "")))
        return self.answer(request, body)

    async def start(self) -> None:
        app = aiohttp.web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = aiohttp.web.AppRunner(app)
        await self.runner.setup()
        await aiohttp.web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture(params=["http1", "aiohttp"])
async def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    if request.param == "aiohttp":
        monkeypatch.setenv("TESSERA_KUBE_HTTP", "aiohttp")
    yield request.param


@pytest.fixture
async def servers() -> AsyncIterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        await server.stop()


def _kubeconfig(path: Path, port: int, user: dict[str, object], host: str = "127.0.0.1") -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://{host}:{port}"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
        "users": [{"name": "u", "user": user}],
    }))  # fmt: skip
    return path


async def _client(tmp_path: Path, port: int, user: dict[str, object] | None = None,
                  host: str = "127.0.0.1") -> Kube:  # fmt: skip
    path = _kubeconfig(tmp_path / "kubeconfig", port, user or {"token": "t"}, host)
    return Kube(await configuration(str(path)), Limits(qps=0))


async def test_a_refused_connection_is_asked_again_until_the_server_is_back(
    tmp_path: Path, transport: str, servers: list[Server]
) -> None:
    # an API server restarting refuses connections for a moment; before, the refusal came out
    # as a bare ConnectionRefusedError that no caller's retry took, and ended the loop asking
    server = Server(free_port(), lambda req, body: _ok({"kind": "Node", "metadata": {"name": "n"}}))
    servers.append(server)
    kube = await _client(tmp_path, server.port)
    try:
        asking = asyncio.ensure_future(kube.get("/api/v1/nodes/n"))

        async def refused_once() -> bool:
            return kube.retried >= 1 or asking.done()

        await wait_until(refused_once, 10, "the first refusal")
        assert not asking.done(), asking.exception() if asking.done() else None
        await server.start()
        assert (await asking)["metadata"]["name"] == "n"
        assert [s[:2] for s in server.seen] == [("GET", "/api/v1/nodes/n")]
    finally:
        await kube.close()


async def test_a_server_that_stays_away_is_a_kube_error_every_caller_handles(
    tmp_path: Path, transport: str
) -> None:
    kube = await _client(tmp_path, free_port())
    try:
        with pytest.raises(KubeError) as caught:
            await kube.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
        assert caught.value.status == 503 and caught.value.unsent
        assert kube.retried == RETRIES  # asked again as a 503 is
    finally:
        await kube.close()


@pytest.mark.parametrize(("status", "sent_times"), [(504, 1), (500, 1), (429, 2)])
async def test_a_create_the_server_names_is_sent_again_only_when_it_cannot_have_been_made(
    tmp_path: Path, transport: str, servers: list[Server], status: int, sent_times: int
) -> None:
    # a 504 (the server's own timeout) or a 500 does not say the create failed: with
    # `generateName` nothing answers 409 to a second one, so sending it again made two
    # Commands (an action run twice). A 429 is a refusal before anything was done.
    def answer(req: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        if len(server.seen) == 1:
            return _status(status, "Timeout" if status == 504 else "InternalError", "try again")
        return _ok({"kind": "Command", "metadata": {"name": "cmd-x1"}}, 201)

    server = Server(free_port(), answer)
    servers.append(server)
    await server.start()
    kube = await _client(tmp_path, server.port)
    path = "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    try:
        made = {"metadata": {"generateName": "cmd-", "namespace": "default"}, "action": "RestartJob"}
        if sent_times == 1:
            with pytest.raises(KubeError) as caught:
                await kube.create(path, made)
            assert caught.value.status == status
        else:
            assert (await kube.create(path, made))["metadata"]["name"] == "cmd-x1"
        assert len(server.seen) == sent_times
        # a create that names its object is safe to send again: a second one is refused (409)
        server.seen.clear()
        named = {"metadata": {"name": "cmd-y", "namespace": "default"}, "action": "RestartJob"}
        assert (await kube.create(path, named))["metadata"]["name"] == "cmd-x1"
        assert len(server.seen) == 2
    finally:
        await kube.close()


PLUGIN = """
import json, pathlib, sys
count = pathlib.Path(sys.argv[1])
mode = pathlib.Path(sys.argv[2]).read_text() if len(sys.argv) > 2 else ""
n = int(count.read_text() or 0) + 1 if count.exists() else 1
count.write_text(str(n))
if mode == "fail":
    sys.exit("the identity provider is away")
status = {"token": f"token-{n}"}
if mode == "expired":  # said to expire an hour ago: the plugin runs before every request
    status["expirationTimestamp"] = "2000-01-01T00:00:00Z"
if mode == "certificate":  # Pinniped's, Teleport's: a client certificate, no token
    status = {"clientCertificateData": "-----BEGIN CERTIFICATE-----\\nx\\n-----END CERTIFICATE-----\\n",
              "clientKeyData": "-----BEGIN PRIVATE KEY-----\\nx\\n-----END PRIVATE KEY-----\\n"}
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": status}))
"""


def _exec_user(plugin: Path, count: Path, mode: Path | None = None) -> dict[str, object]:
    args = [str(plugin), str(count), *([str(mode)] if mode else [])]
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable, "args": args}}


async def _token_server(servers: list[Server], valid: dict[str, str]) -> Server:
    """A started server that answers a request only when it carries the token `valid` holds
    at that moment (401 otherwise), as an API server does once a token expired."""

    def answer(req: aiohttp.web.Request, body: bytes) -> aiohttp.web.Response:
        if req.headers.get("Authorization") != valid["token"]:
            return _status(401, "Unauthorized", "Unauthorized")
        return _ok({"kind": "Node", "metadata": {"name": "n"}})

    server = Server(free_port(), answer)
    servers.append(server)
    await server.start()
    return server


async def test_a_token_from_an_exec_plugin_is_made_anew_when_the_server_refuses_it(
    tmp_path: Path, transport: str, servers: list[Server]
) -> None:
    # EKS's, GKE's and AKS's kubeconfigs get a token from an exec plugin, valid 15-60 minutes;
    # the plugin ran once at start and a service was refused (401) by every request after
    plugin, count = tmp_path / "plugin.py", tmp_path / "count"
    plugin.write_text(PLUGIN)
    valid = {"token": "Bearer token-1"}
    server = await _token_server(servers, valid)
    kube = await _client(tmp_path, server.port, _exec_user(plugin, count))
    try:
        assert (await kube.get("/api/v1/nodes/n"))["metadata"]["name"] == "n"
        valid["token"] = "Bearer token-2"  # the first one expired
        assert (await kube.get("/api/v1/nodes/n"))["metadata"]["name"] == "n"
        assert [s[3] for s in server.seen] == ["Bearer token-1", "Bearer token-1", "Bearer token-2"]
        assert count.read_text() == "2"  # the plugin ran once more, not per request
        assert (await kube.get("/api/v1/nodes/n"))["metadata"]["name"] == "n"
        assert count.read_text() == "2"
        valid["token"] = "Bearer nobody's"  # refused whatever the plugin gives: the 401 stands
        with pytest.raises(KubeError) as caught:
            await kube.get("/api/v1/nodes/n")
        assert caught.value.status == 401 and count.read_text() == "3"
    finally:
        await kube.close()


async def test_the_environments_proxy_carries_every_request_kubectl_would_send_through_it(
    tmp_path: Path, servers: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    # with only HTTP(S)_PROXY set (no proxy-url in the kubeconfig) the kept-alive client went
    # straight to the API server, which is reachable only through the proxy here
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxy = Server(free_port(), lambda req, body: _ok({"kind": "Node", "metadata": {"name": str(req.url)}}))
    servers.append(proxy)
    await proxy.start()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    # a name only the proxy resolves
    kube = await _client(tmp_path, 6443, host="kube-api.invalid")
    try:
        got = await kube.get("/api/v1/nodes/n")
        assert got["metadata"]["name"] == "http://kube-api.invalid:6443/api/v1/nodes/n"
    finally:
        await kube.close()
    # where kubectl goes direct, so does the kept-alive client: a loopback host, a host or a
    # CIDR block NO_PROXY names (Go's rules: Python's proxied an address in a CIDR kubectl does not)
    kube = await _client(tmp_path, proxy.port)
    try:
        assert kube.lean is not None
        assert (await kube.get("/api/v1/nodes/m"))["metadata"]["name"].endswith("/api/v1/nodes/m")
    finally:
        await kube.close()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    for url, no_proxy, through in [
        ("https://10.96.0.1:443", "10.0.0.0/8", False), ("https://10.96.0.1:443", "", True),
        ("https://api.corp.example:6443", ".corp.example", False), ("https://corp.example.org", "corp.example", True),
        ("https://api.x:6443", "api.x:443", True), ("https://api.x:6443", "api.x:6443", False),
        ("https://api.x:6443", "*", False), ("https://[fd00::1]:6443", "fd00::/8", False),
        ("https://localhost:6443", "", False),
    ]:  # fmt: skip
        monkeypatch.setenv("NO_PROXY", no_proxy)
        assert _proxied(url) is through, (url, no_proxy)


async def test_an_exec_plugin_failing_or_refused_in_a_burst_neither_ends_a_caller_nor_runs_per_request(
    tmp_path: Path, servers: list[Server]
) -> None:
    plugin, count, mode = tmp_path / "plugin.py", tmp_path / "count", tmp_path / "mode"
    plugin.write_text(PLUGIN)
    valid = {"token": "Bearer token-1"}
    server = await _token_server(servers, valid)
    mode.write_text("expired")  # so the plugin runs again before each request
    kube = await _client(tmp_path, server.port, _exec_user(plugin, count, mode))
    try:
        valid["token"] = "Bearer token-2"
        assert (await kube.get("/api/v1/nodes/n"))["metadata"]["name"] == "n"
        mode.write_text("fail")  # before a request: the request goes with the token it has
        assert (await kube.get("/api/v1/nodes/n"))["metadata"]["name"] == "n"  # (a bare ConfigException before)
        mode.write_text("")  # tokens without expiry from here: runs only after a 401
        runs = int(count.read_text())
        valid["token"] = "Bearer nobody's yet"
        refused = await asyncio.gather(*(kube.get("/api/v1/nodes/n") for _ in range(8)), return_exceptions=True)
        assert all(isinstance(r, KubeError) and r.status == 401 for r in refused), refused
        assert int(count.read_text()) - runs <= 2, "the plugin ran once per refused request"
    finally:
        await kube.close()
    mode.write_text("certificate")  # a plugin that gives a certificate: the kubeconfig loads
    cfg = await configuration(str(_kubeconfig(tmp_path / "kc-cert", server.port, _exec_user(plugin, count, mode))))
    assert cfg.refresh_api_key_hook is None
