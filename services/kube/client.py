"""One way to talk to the API server: kubernetes-asyncio's client (kubeconfig or in-cluster
config, its auth and TLS) with raw JSON bodies and a client-side QPS limit.

Raw JSON rather than generated models: a list of 10,000 pods decoded into model objects costs
seconds; msgspec decodes it in milliseconds, and the edge's translations (`nodes`, `pods`) read
plain dicts either way. The QPS limit is a token bucket like client-go's (`--kube-qps`,
`--kube-burst`; by default kube-scheduler's 50/100), so operators can keep Tessera within what
their API server tolerates; a 429 (API priority and fairness, or a max-inflight limit) or a
5xx is answered as client-go answers it — wait as `Retry-After` says (else back off) and ask
again, a few times — and a watch has a read timeout beyond its `timeoutSeconds`, so a
half-open connection cannot freeze it (issue 28).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import aiohttp
import msgspec

from services.kube import leanimport
from services.kube.http1 import Answer, Http1, HTTPError
from services.kube.reach import Reachability

leanimport.install()  # before kubernetes-asyncio's first import: its generated classes unused

from kubernetes_asyncio.client import ApiClient, Configuration  # noqa: E402

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
_json = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode
USER_AGENT = "tessera"
T = TypeVar("T")


def agent_of(part: str) -> str:
    """The User-Agent of one part of Tessera: `tessera-allocator`, `tessera-cli`…"""
    return f"{USER_AGENT}-{part}" if part else USER_AGENT


class KubeError(Exception):
    """A non-2xx answer: `status` (409 conflict, 404 gone, 410 expired…) and the API's message.
    No answer at all is a 503 "no answer"; `unsent` when the request never left (no
    connection could be made)."""

    def __init__(
        self, status: int, reason: str, body: str = "", headers: Mapping[str, str] | None = None,
        unsent: bool = False,
    ) -> None:
        super().__init__(f"{status} {reason}: {body[:300]}")
        self.status, self.reason, self.body = status, reason, body
        self.headers = dict(headers or {})
        self.unsent = unsent

    @property
    def message(self) -> str:
        """What the API server's Status says (`pods "x" is forbidden: …`), else the answer."""
        try:
            said = _json.decode(self.body).get("message")
        except (msgspec.DecodeError, AttributeError):
            said = None
        return str(said) if said else str(self)


#: the reason of a KubeError that is no answer of the server's (503 for the callers' retries)
UNANSWERED = "no answer"
#: the status codes of a request the API server refused for what it asked (PodSecurity, a
#: ResourceQuota, a webhook, an invalid object): asked the same, refused the same, so a
#: controller backs off to minutes and says it where the object's user looks
REFUSALS = frozenset({400, 403, 422})
#: seconds before a controller asks again for what failed, doubled at each failure in a row
#: (a controller's rate-limited requeue) up to RETRY_CAP when the server refused it; asked every
#: second, one misconfigured object took the process's client QPS from every other
RETRY_FIRST = 1.0
RETRY_CAP = 300.0
#: the cap of a controller's retries when the server did not refuse (no answer, 5xx, 429): an
#: API server back after an outage of minutes is asked again within seconds
TRANSIENT_BACKOFF_CAP = 10.0


def next_retry(before: float | None, cap: float = RETRY_CAP) -> float:
    """The delay after a failure whose previous delay in a row was `before` (None: the first)."""
    return RETRY_FIRST if before is None else min(before * 2, cap)


def retry_cap(status: int) -> float:
    """How long a failure with this status may wait at most: minutes refused, seconds not."""
    return RETRY_CAP if status in REFUSALS else TRANSIENT_BACKOFF_CAP


def no_answer(exc: BaseException) -> KubeError:
    """A request that got no answer, as the 503 every caller already retries or reports;
    `unsent` when no connection was made (either transport's word for it)."""
    unsent = (isinstance(exc, HTTPError) and not exc.sent) or isinstance(exc, aiohttp.ClientConnectorError)
    return KubeError(503, UNANSWERED, repr(exc), unsent=unsent)


#: what aiohttp raises when no answer came (a refused or cut connection, a timeout)
NO_ANSWER = (aiohttp.ClientError, OSError, TimeoutError)


#: answers that mean "not now": asked again after Retry-After, or a backoff
RETRIED = frozenset({429, 500, 502, 503, 504})
RETRIES = 4


def retry_after(headers: Mapping[str, str] | None, attempt: int) -> float:
    """Seconds to wait before asking again: the server's `Retry-After` (seconds), else
    0.2 · 2^attempt; at most 10 s."""
    raw = (headers or {}).get("Retry-After", "")
    try:
        wait = float(raw)
    except ValueError:
        wait = 0.2 * 2**attempt
    return max(0.0, min(wait, 10.0))


@dataclass
class Limits:
    qps: float = 50.0  # requests per second, sustained (0 = unlimited); kube-scheduler's default
    burst: int = 100
    connections: int = 128  # HTTP connections in the pool: requests in flight at once


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self.tokens = float(self.burst)
        self.stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.tokens = 1
                self.stamp = time.monotonic()
            self.tokens -= 1


def _lean(api: ApiClient, connections: int) -> Http1 | None:
    """Plain HTTP/1.1 for the one-shot requests (`http1`), with the ApiClient's TLS context and
    host — none when a proxy is configured (aiohttp speaks to proxies) or the host is not a
    plain http(s) URL. `TESSERA_KUBE_HTTP=aiohttp` keeps every request on aiohttp."""
    rest = api.rest_client
    if rest.proxy or os.environ.get("TESSERA_KUBE_HTTP", "") == "aiohttp":
        return None
    if _proxied(api.configuration.host):
        return None  # (an API server reachable only through it was never reached)
    tls = getattr(rest.pool_manager.connector, "_ssl", None)
    try:
        return Http1(api.configuration.host, tls if isinstance(tls, ssl.SSLContext) else None,
                     rest.server_hostname or None, connections)  # fmt: skip
    except ValueError:
        return None


class ExecToken:
    """A kubeconfig user's exec plugin (EKS's `aws eks get-token`, GKE's and AKS's plugins),
    run again for a new token: before a request once the token it gave has expired, and when
    the server answers 401. kubernetes-asyncio runs the plugin once at load and never again
    (only its in-cluster loader refreshes), so a service started with such a kubeconfig was
    refused by every request after the token's 15 to 60 minutes, for good."""

    def __init__(self, loader: Any, cfg: Configuration) -> None:
        self.loader = loader
        self.cfg = cfg
        self._running: asyncio.Lock | None = None

    async def __call__(self, cfg: Configuration) -> None:
        """Configuration's refresh hook, asked before every request: the plugin runs only when
        the token it gave said when it expires and that time is near. A plugin that fails here
        (an STS blip, an SSO session over) leaves the request to go with the token it has:
        raised, its ConfigException was no KubeError, and ended the watches that asked; the
        server's 401 brings the plugin back (`refused`)."""
        if _stale(getattr(self.loader, "exec_plugin_expiry", None)):
            try:
                await self._run(None)
            except Exception as exc:
                logging.getLogger(__name__).warning("the kubeconfig's exec plugin failed (%s): "
                                                    "the request goes with the token it has", exc)  # fmt: skip

    async def refused(self, token: str) -> bool:
        """After a 401 to a request sent with `token`: a new token, unless another request's
        refusal got one meanwhile. False when the plugin gives the same token again."""
        await self._run(token)
        return self.cfg.api_key.get("BearerToken") != token

    async def _run(self, refused: str | None) -> None:
        """The plugin again, once for all the requests that found the token stale or refused
        (checked again under the lock: a burst of 401s ran it once per request, one after
        another, while every request waited). The expiry it said goes first: kubernetes-asyncio
        keeps a past one when the next token says none, and the plugin ran before every request."""
        self._running = self._running or asyncio.Lock()
        async with self._running:
            if refused is not None and self.cfg.api_key.get("BearerToken") != refused:
                return  # renewed by another request's refusal meanwhile
            if refused is None and not _stale(getattr(self.loader, "exec_plugin_expiry", None)):
                return  # renewed by another request meanwhile
            with contextlib.suppress(AttributeError):
                del self.loader.exec_plugin_expiry
            await self.loader.load_from_exec_plugin()
            if getattr(self.loader, "token", None):
                self.cfg.api_key["BearerToken"] = self.loader.token


#: a token is made anew this long before the expiry its plugin said (kubernetes-asyncio's margin)
EXPIRY_MARGIN = datetime.timedelta(minutes=5)


def _stale(expiry: datetime.datetime | None) -> bool:
    if expiry is None:
        return False
    if expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=datetime.UTC)
    return expiry - datetime.datetime.now(datetime.UTC) < EXPIRY_MARGIN


def _proxied(url: str) -> bool:
    """Whether kubectl would reach `url` through the environment's proxy: `HTTPS_PROXY` /
    `HTTP_PROXY` for its scheme, never for a loopback host, and not for a host `NO_PROXY` names
    (a domain and its subdomains, an address, a CIDR block, `*`) — Go's rules (client-go reads
    them), which the kept-alive client follows to go direct wherever kubectl does (Python's own
    rules take no CIDR and proxied an in-cluster API server's address kubectl reaches direct)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    env = {k.lower(): v for k, v in os.environ.items() if k.lower().endswith("_proxy") and v}
    if not env.get(f"{parts.scheme}_proxy") or host == "localhost":
        return False
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_loopback:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for entry in (e.strip().lower() for e in env.get("no_proxy", "").split(",")):
        if not entry:
            continue
        if entry == "*":
            return False
        if "/" in entry:
            with contextlib.suppress(ValueError):
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return False
            continue
        name, _, only = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if only and (not only.isdigit() or int(only) != port):
            continue
        name = name.lstrip(".").strip("[]")
        if host == name or (address is None and host.endswith("." + name)):
            return False
    return True


async def configuration(kubeconfig: str = "", context: str = "") -> Configuration:
    """A kubeconfig file (`--kubeconfig`, else `$KUBECONFIG`), or the in-cluster service account."""
    from kubernetes_asyncio import config

    cfg = Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    if path:
        loader = await config.load_kube_config(config_file=path, context=context or None,
                                               client_configuration=cfg)  # fmt: skip
        user = getattr(loader, "_user", None)
        if user is not None and user.safe_get("exec") and getattr(loader, "token", None):
            # (a plugin may give a client certificate instead, Pinniped's or Teleport's: no token)
            cfg.refresh_api_key_hook = ExecToken(loader, cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        raise KubeError(0, "no cluster", "give --kubeconfig PATH (or run in a cluster)")
    return cfg


class Kube:
    """Raw JSON calls on one `ApiClient`; every call waits for a token of the QPS bucket."""

    def __init__(self, cfg: Configuration, limits: Limits | None = None, agent: str = USER_AGENT) -> None:
        self.limits = limits or Limits()
        # the API server's audit log and request logs tell clients apart by it: one per service
        # (`agent_of`), as kube-scheduler names itself
        self.agent = agent
        cfg.connection_pool_maxsize = self.limits.connections
        self.api = ApiClient(configuration=cfg)
        if not any(
            os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
        ):
            # kubernetes-asyncio's session trusts the environment, so aiohttp reads ~/.netrc and
            # the proxy variables in a worker thread for every request: two thread hops per API
            # call, ~10 % of a busy service's CPU (issue 29's profile). Without a proxy to honour
            # there is nothing to find there (the API server's auth is the kubeconfig's).
            self.api.rest_client.pool_manager._trust_env = False
        self.bucket = TokenBucket(self.limits.qps, self.limits.burst)
        #: Events draw on a bucket of their own, as kube-scheduler's event recorder has a client
        #: of its own: the binder's `Scheduled` Event per pod was one in five of its requests
        #: when a churn of Jobs, at the default 50 QPS, bound ~10 pods/s (benchmarks.kube_churn)
        self.event_bucket = TokenBucket(self.limits.qps, self.limits.burst)
        self.lean = _lean(self.api, self.limits.connections)
        self.requests = 0
        self.retried = 0  # requests asked again after a 429 or 5xx
        self.retries = RETRIES  # times a 429 or 5xx is asked again before it is the caller's
        #: whether the server answers, from every request: one line per outage, readiness, metrics
        self.reach = Reachability(cfg.host)

    @classmethod
    async def connect(cls, kubeconfig: str = "", limits: Limits | None = None, agent: str = USER_AGENT) -> Kube:
        return cls(await configuration(kubeconfig), limits, agent)

    async def close(self) -> None:
        if self.lean is not None:
            await self.lean.close()
        await self.api.close()

    async def _call(self, method: str, path: str, query: Mapping[str, Any] | None = None,
                    body: object = None, content_type: str = "application/json",
                    timeout: float | tuple[float, float] | None = 30.0) -> Any:  # fmt: skip
        return await self._retrying(lambda: self._once(method, path, query, body, content_type, timeout))

    async def _retrying(self, once: Callable[[], Awaitable[T]], replayable: bool = True) -> T:
        """`once()`, asked again after a 429 or 5xx (`Retry-After`, else a backoff). A request
        that is not `replayable` (a create whose name the server generates: made twice, it is two
        objects) is asked again only when the server cannot have acted on it — a 429, or no
        connection made — as client-go retries a POST only then."""
        renewed = False
        for attempt in range(self.retries + 1):
            token = self.api.configuration.api_key.get("BearerToken")
            try:
                return await once()
            except KubeError as exc:
                if exc.status == 401 and not renewed and await self._renewed(token):
                    renewed = True  # once: a token refused as soon as it is made is no blip
                    continue
                if exc.status not in RETRIED or attempt == self.retries:
                    raise
                if not replayable and exc.status != 429 and not exc.unsent:
                    raise
                self.retried += 1
                await asyncio.sleep(retry_after(exc.headers, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _renewed(self, token: str | None) -> bool:
        """A new token after a 401, when the credentials come from an exec plugin."""
        hook = self.api.configuration.refresh_api_key_hook
        if not isinstance(hook, ExecToken) or token is None:
            return False
        try:
            return await hook.refused(token)
        except Exception as exc:  # the plugin failed: the 401 stands, said with why
            raise KubeError(401, "Unauthorized", f"the kubeconfig's exec plugin failed: {exc}") from exc

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Content-Type": content_type,
            "User-Agent": self.agent,
        }
        for auth in (await self.api.configuration.auth_settings()).values():
            if auth.get("in") == "header":
                headers[auth["key"]] = auth["value"]
        return headers

    async def _lean_once(self, lean: Http1, method: str, path: str, query: Mapping[str, Any] | None,
                         body: object, content_type: str, replayable: bool = True) -> bytes:  # fmt: skip
        await self._bucket(path).take()
        self.requests += 1
        target = path + ("?" + urlencode(list(query.items())) if query else "")
        data = body if body is None or isinstance(body, bytes) else _encode(body)
        try:
            answer = await lean.request(method, target, await self._headers(content_type), data, 30.0,
                                        replayable)  # fmt: skip
        except (HTTPError, TimeoutError) as exc:
            self.reach.unanswered(method, exc)
            raise no_answer(exc) from exc  # retried like a 503
        self.reach.answered(method, answer.status)
        if not 200 <= answer.status < 300:
            raise _refusal(answer)
        return answer.body

    async def _once(self, method: str, path: str, query: Mapping[str, Any] | None, body: object,
                    content_type: str, timeout: float | tuple[float, float] | None) -> Any:  # fmt: skip
        # Straight to the ApiClient's aiohttp session (its TLS context, pool and proxy), with the
        # configuration's own credentials (`auth_settings` runs its refresh hook: `ExecToken`):
        # `call_api` sanitised, re-serialised and re-parsed every request, ~12 % of the binder's
        # CPU in issue 29's profile.
        await self._bucket(path).take()
        self.requests += 1
        headers = await self._headers(content_type)
        url = self.api.configuration.host + path
        if query:
            url += "?" + urlencode(list(query.items()))
        if timeout is None:
            limits = aiohttp.ClientTimeout()
        elif isinstance(timeout, tuple):
            limits = aiohttp.ClientTimeout(
                connect=timeout[0], sock_connect=timeout[0], sock_read=timeout[1]
            )
        else:
            limits = aiohttp.ClientTimeout(total=timeout)
        rest = self.api.rest_client
        extra: dict[str, Any] = {}
        if rest.proxy:
            extra["proxy"] = rest.proxy
        if rest.proxy_headers:
            extra["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            extra["server_hostname"] = rest.server_hostname
        data = body if body is None or isinstance(body, bytes) else _encode(body)
        try:
            resp = await rest.pool_manager.request(
                method, url, data=data, headers=headers, timeout=limits, **extra
            )
        except NO_ANSWER as exc:
            self.reach.unanswered("WATCH" if (query or {}).get("watch") == "true" else method, exc)
            raise no_answer(exc) from exc
        self.reach.answered("WATCH" if (query or {}).get("watch") == "true" else method, resp.status)
        if not 200 <= resp.status < 300:  # unread bodies do not raise by themselves
            try:
                text = (await resp.read()).decode(errors="replace")
            except NO_ANSWER as exc:
                raise no_answer(exc) from exc
            finally:
                resp.release()
            raise KubeError(resp.status, str(resp.reason or ""), text, dict(resp.headers or {}))
        return resp

    def _bucket(self, path: str) -> TokenBucket:
        return self.event_bucket if path.endswith("/events") else self.bucket

    async def request(self, method: str, path: str, query: Mapping[str, Any] | None = None,
                      body: object = None, content_type: str = "application/json") -> Any:  # fmt: skip
        replayable = not (method == "POST" and _named_by_server(body))
        if self.lean is not None:
            lean = self.lean
            data = await self._retrying(
                lambda: self._lean_once(lean, method, path, query, body, content_type, replayable), replayable
            )
            return _json.decode(data) if data else {}

        async def answered() -> bytes:
            resp = await self._once(method, path, query, body, content_type, 30.0)
            try:
                return await resp.read()  # (a connection cut mid-answer is no answer too)
            except NO_ANSWER as exc:
                raise no_answer(exc) from exc
            finally:
                resp.release()

        data = await self._retrying(answered, replayable)
        return _json.decode(data) if data else {}

    async def get(self, path: str, **query: Any) -> Any:
        return await self.request("GET", path, query)

    async def create(self, path: str, body: object) -> Any:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: object, content_type: str = MERGE_PATCH) -> Any:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, body: object = None) -> Any:
        return await self.request("DELETE", path, body=body)

    async def delete_this(self, path: str, uid: str) -> bool:
        """Delete the object at `path` only if it is still the one with `uid` (a precondition:
        an object made anew under the name is another one, never ours to delete). True when
        deleted or being deleted; False when gone already or the name holds another object."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        try:
            await self.delete(path, options if uid else None)
            return True
        except KubeError as exc:
            if exc.status in (404, 409):
                return False
            raise

    async def watch(self, path: str, query: Mapping[str, Any],
                    read_timeout: float | None = None) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
        """The events of one watch request, one JSON object per line, until the server ends it
        (or `read_timeout` seconds pass: a connection the server no longer answers on)."""
        if self.lean is not None:
            async for event in self._lean_watch(self.lean, path, query, read_timeout):
                yield event
            return
        timeout = (30.0, read_timeout) if read_timeout else None  # (connect, between two reads)
        resp = await self._call("GET", path, {**query, "watch": "true"}, timeout=timeout)
        try:
            async for line in resp.content:
                if line.strip():
                    yield _json.decode(line)
        finally:
            resp.release()

    async def _lean_watch(self, lean: Http1, path: str, query: Mapping[str, Any],
                          read_timeout: float | None) -> AsyncIterator[dict[str, Any]]:  # fmt: skip
        target = f"{path}?{urlencode([*query.items(), ('watch', 'true')])}"

        async def opened() -> tuple[bytes | None, AsyncGenerator[bytes | Answer, None]]:
            await self.bucket.take()
            self.requests += 1
            stream = lean.lines(target, await self._headers("application/json"), 30.0, read_timeout)
            try:
                first = await anext(stream, None)
            except (HTTPError, TimeoutError) as exc:
                if isinstance(exc, HTTPError) and exc.answered:
                    raise  # cut once open: the reflector resumes it (a drop is no outage)
                self.reach.unanswered("WATCH", exc)  # no connection, cut unanswered, or silent
                raise no_answer(exc) from exc
            self.reach.answered("WATCH", first.status if isinstance(first, Answer) else 200)
            if isinstance(first, Answer):  # refused: nothing streams
                await stream.aclose()
                raise _refusal(first)
            return first, stream

        first, stream = await self._retrying(opened)
        try:
            if first is not None and first.strip():
                yield _json.decode(first)
            async for line in stream:  # (an answer other than 200 only ever comes first)
                if isinstance(line, bytes) and line.strip():
                    yield _json.decode(line)
        finally:
            await stream.aclose()


def _named_by_server(body: object) -> bool:
    """A body whose object names itself by `generateName` alone: each create makes another."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    return isinstance(meta, dict) and bool(meta.get("generateName")) and not meta.get("name")


def _refusal(answer: Answer) -> KubeError:
    """A non-2xx answer as the error every caller knows (its `Retry-After` kept)."""
    headers = {"Retry-After": answer.headers["retry-after"]} if "retry-after" in answer.headers else {}
    return KubeError(answer.status, answer.reason, answer.body.decode(errors="replace"), headers)


def pods_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    return f"{base}/{name}" + (f"/{sub}" if sub else "") if name else base


def nodes_path(name: str = "") -> str:
    return f"/api/v1/nodes/{name}" if name else "/api/v1/nodes"


def namespaces_path(name: str = "") -> str:
    """Namespaces (cluster-scoped): their labels, which pod affinity's namespaceSelector reads."""
    return f"/api/v1/namespaces/{name}" if name else "/api/v1/namespaces"


def events_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/events" + (f"/{name}" if name else "")


PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def replicasets_path(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/replicasets" + (f"/{name}" if name else "")


def statefulsets_path(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets" + (f"/{name}" if name else "")


def daemonsets_path(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/daemonsets" + (f"/{name}" if name else "")


def batchjobs_path(namespace: str, name: str = "") -> str:
    """Kubernetes Jobs (batch/v1), not Volcano's."""
    return f"/apis/batch/v1/namespaces/{namespace}/jobs" + (f"/{name}" if name else "")


def claims_path(namespace: str = "", name: str = "", sub: str = "") -> str:
    """PersistentVolumeClaims (all namespaces when `namespace` is empty)."""
    base = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims" if namespace else "/api/v1/persistentvolumeclaims"
    return f"{base}/{name}" + (f"/{sub}" if sub else "") if name else base


def volumes_path(name: str = "", sub: str = "") -> str:
    """PersistentVolumes (cluster-scoped)."""
    return f"/api/v1/persistentvolumes/{name}" + (f"/{sub}" if sub else "") if name else "/api/v1/persistentvolumes"


STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def configmaps_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def secret_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/secrets" + (f"/{name}" if name else "")


def services_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/services" + (f"/{name}" if name else "")


def networkpolicies_path(namespace: str, name: str = "") -> str:
    return f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies" + (f"/{name}" if name else "")


def pdbs_path(namespace: str = "", name: str = "") -> str:
    """PodDisruptionBudgets, policy/v1 (all namespaces when `namespace` is empty)."""
    base = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets" if namespace else \
        "/apis/policy/v1/poddisruptionbudgets"  # fmt: skip
    return f"{base}/{name}" if name else base


def quotas_path(namespace: str = "", name: str = "") -> str:
    """ResourceQuotas (all namespaces when `namespace` is empty)."""
    base = f"/api/v1/namespaces/{namespace}/resourcequotas" if namespace else "/api/v1/resourcequotas"
    return f"{base}/{name}" if name else base
