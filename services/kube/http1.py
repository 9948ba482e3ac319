"""HTTP/1.1 requests on kept-alive connections, for the API calls made once per pod.

aiohttp's client spent ~0.2 ms of CPU on each binding (building a request object, its URL,
cookie filtering, timers, a response object, the connector's bookkeeping): a fifth of the
allocator's CPU in issue 29's profile, one binding per pod. A request/response exchange on an
open connection is a few lines of protocol; this module writes and reads just those, over the
same TLS context, credentials and host the ApiClient was configured with. Watches (long
streams) stay on aiohttp, and so does everything when a proxy is configured.

What the API server speaks and this relies on: HTTP/1.1 persistent connections (the default),
`Content-Length` or `chunked` bodies, `Connection: close` when the server ends one. A kept
connection the server closed meanwhile (an idle timeout) fails on its first read without a
byte of answer: the request is sent again once on a new connection, as Go's and aiohttp's
clients do for a request the server never read.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from urllib.parse import urlsplit

from services.runtime.waits import within

#: the largest response head accepted (a Status error with long messages fits many times over)
HEAD_LIMIT = 1 << 20


class HTTPError(ConnectionError):
    """The connection failed or the server's answer is not HTTP/1.1 as written. `sent` is
    False only when no connection was made (refused, unresolvable, a TLS handshake refused):
    the server never saw the request, so even a create that names no object may be sent again.
    `answered` when the server's status line had come (a watch cut while it streamed: a drop,
    not an API server that does not answer)."""

    def __init__(self, message: str, sent: bool = True, answered: bool = False) -> None:
        super().__init__(message)
        self.sent, self.answered = sent, answered


class Answer:
    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers  # names in lower case
        self.body = body


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Http1:
    """Requests to one API server on up to `connections` kept-alive connections."""

    def __init__(self, base_url: str, tls: ssl.SSLContext | None, server_hostname: str | None,
                 connections: int) -> None:  # fmt: skip
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")  # a server behind a path (a proxy's /k8s/clusters/x)
        default = 443 if self.https else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = name if self.port == default else f"{name}:{self.port}"
        self.tls = (tls or ssl.create_default_context()) if self.https else None
        self.server_hostname = (server_hostname or self.host) if self.https else None
        self._idle: list[_Conn] = []
        self._streams: set[_Conn] = set()  # watches open now: closed with the client
        self._slots = asyncio.Semaphore(connections)

    def _head(self, method: str, target: str, headers: Mapping[str, str], *more: str) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.authority}",
                 *(f"{k}: {v}" for k, v in headers.items()), *more]  # fmt: skip
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _open(self) -> _Conn:
        """A new connection. A refusal (an API server restarting, an endpoint going away behind
        a Service) is an `HTTPError` like any other failed exchange: raised as the bare OSError
        it is, it passed every caller's retry and ended the loop that asked (review of
        session 32)."""
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.tls, server_hostname=self.server_hostname, limit=HEAD_LIMIT
            )
        except OSError as exc:  # (ssl.SSLError and socket.gaierror are OSErrors)
            raise HTTPError(f"connecting to {self.authority}: {exc!r}", sent=False) from exc
        return _Conn(reader, writer)

    def _kept(self) -> _Conn | None:
        """The most recently used kept connection the server has not closed. One it closed
        while idle (kube-apiserver after 90 s, a load balancer sooner) has its end of stream
        read already: dropped here rather than tried, since after one stale try the request
        went out on the next kept one — as stale after the same lull — and failed."""
        while self._idle:
            conn = self._idle.pop()
            if not (conn.reader.at_eof() or conn.writer.transport.is_closing()):
                return conn
            conn.close()
        return None

    async def request(self, method: str, target: str, headers: Mapping[str, str],
                      body: bytes | None, timeout: float, replayable: bool = True) -> Answer:  # fmt: skip
        """`target`: path and query. Raises `HTTPError` (or TimeoutError) when no answer came.
        A request that is not `replayable` (a create the server names) is not sent again when a
        kept connection fails after it was written: the server may have read and acted on it."""
        data = self._head(method, target, headers, f"Content-Length: {len(body) if body else 0}") + (body or b"")
        async with self._slots:
            return await within(self._exchange(data, method, replayable), timeout)

    async def _exchange(self, data: bytes, method: str, replayable: bool = True) -> Answer:
        for attempt in range(2):
            kept = self._kept() if attempt == 0 else None  # the second try: a new connection
            reused = kept is not None
            conn = kept if kept is not None else await self._open()
            try:
                conn.writer.write(data)
                answer, keep = await _read_answer(conn.reader, method)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                conn.close()
                unread = isinstance(exc, asyncio.IncompleteReadError) and not exc.partial
                if reused and attempt == 0 and replayable and (unread or isinstance(exc, ConnectionResetError)):
                    continue  # the server had closed the kept connection: never read this one
                raise HTTPError(f"{method} to {self.authority}: {exc!r}") from exc
            except BaseException:  # cancelled (a timeout) mid-answer: the connection is spoilt
                conn.close()
                raise
            if keep:
                self._idle.append(conn)
            else:
                conn.close()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def lines(self, target: str, headers: Mapping[str, str], connect_timeout: float,
                    read_timeout: float | None) -> AsyncGenerator[bytes | Answer, None]:  # fmt: skip
        """A GET whose answer is a stream of lines (a watch), on a connection of its own: an
        `Answer` first and alone when the status is not 200, else each line as it comes, until
        the server ends the answer. Nothing read for `read_timeout` s raises TimeoutError (a
        half-open connection); one timer per stream, re-armed lazily, not one per read — the
        per-chunk timer and the stream reader's bookkeeping were most of what a watched event
        cost through aiohttp (issue 29)."""
        conn = await within(self._open(), connect_timeout)
        self._streams.add(conn)
        loop = asyncio.get_running_loop()
        last = [loop.time()]
        expired = [False]
        timer: asyncio.TimerHandle | None = None
        answered = False

        def watchdog() -> None:
            nonlocal timer
            idle = loop.time() - last[0]
            if read_timeout is not None and idle >= read_timeout:
                expired[0] = True
                conn.writer.transport.abort()  # the pending read ends at once
            else:
                timer = loop.call_later((read_timeout or 0) - idle, watchdog)

        try:
            conn.writer.write(self._head("GET", target, headers))
            if read_timeout is not None:
                timer = loop.call_later(read_timeout, watchdog)
            raw = await conn.reader.readuntil(b"\r\n\r\n")
            status, reason, hdrs = _head(raw)
            answered = True
            if status != 200:
                body = await _body(conn.reader, hdrs)
                yield Answer(status, reason, hdrs, body)
                return
            async for line in _stream_lines(conn.reader, hdrs, last, loop):
                yield line
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            if expired[0]:
                raise TimeoutError(f"watch {target}: nothing read for {read_timeout} s") from None
            raise HTTPError(f"watch {target}: {exc!r}", answered=answered) from exc
        finally:
            if timer is not None:
                timer.cancel()
            self._streams.discard(conn)
            conn.close()

    async def close(self) -> None:
        """Every connection, kept or streaming: a watch whose reader was cancelled but has not
        run since would otherwise hold its connection (and the server's handler) open."""
        idle, self._idle = self._idle, []
        for conn in [*idle, *self._streams]:
            conn.close()
        self._streams.clear()


def _head(raw: bytes) -> tuple[int, str, dict[str, str]]:
    """Status, reason and headers (names in lower case) of a response head; `version` kept
    under the pseudo-header ":version"."""
    lines = raw[:-4].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {":version": version}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return int(code), reason, headers


async def _body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _chunked(reader)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()  # delimited by the end of the connection


async def _read_answer(reader: asyncio.StreamReader, method: str) -> tuple[Answer, bool]:
    while True:
        status, reason, headers = _head(await reader.readuntil(b"\r\n\r\n"))
        if not 100 <= status < 200:
            break  # (an interim answer, 100 Continue: the real one follows)
    keep = headers[":version"] == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if method == "HEAD" or status in (204, 304):
        body = b""
    else:
        keep = keep and ("chunked" in headers.get("transfer-encoding", "").lower() or "content-length" in headers)
        body = await _body(reader, headers)
    return Answer(status, reason, headers, body), keep


async def _stream_lines(reader: asyncio.StreamReader, headers: Mapping[str, str], last: list[float],
                        loop: asyncio.AbstractEventLoop) -> AsyncIterator[bytes]:  # fmt: skip
    """The lines of a streamed body, its chunk framing undone over whole reads (many events
    arrive in one read: no await per chunk or per line)."""
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    left = int(headers.get("content-length", "-1"))
    raw = bytearray()  # read, framing not undone yet
    data = bytearray()  # the body's bytes not yet split into lines
    need = -1  # the current chunk's bytes still to take (-1: a size line is next)
    while True:
        block = await reader.read(1 << 16)
        last[0] = loop.time()
        if not block:
            if chunked or left > 0:
                raise asyncio.IncompleteReadError(bytes(raw), None)  # cut mid-answer
            if data:
                yield bytes(data)
            return
        if not chunked:
            data += block
            if left >= 0:
                left -= len(block)
        else:
            raw += block
            while True:
                if need < 0:
                    end = raw.find(b"\r\n")
                    if end < 0:
                        break
                    need = int(bytes(raw[:end]).split(b";", 1)[0].strip(), 16)
                    del raw[: end + 2]
                    if need == 0:  # the last chunk (trailers, if any, are not read)
                        left = 0
                        break
                if len(raw) < need + 2:
                    break
                data += raw[:need]
                del raw[: need + 2]
                need = -1
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            yield bytes(data[start:end])
            start = end + 1
        del data[:start]
        if left == 0:
            if data:
                yield bytes(data)
            return


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
