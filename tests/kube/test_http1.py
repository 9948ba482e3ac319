"""The HTTP/1.1 client of the per-pod API calls, against servers on loopback that answer the
ways an API server (or what fronts it) may: a length, chunks, an interim 100, a connection
closed after the answer, a kept connection closed while idle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from services.kube.http1 import Answer, Http1, HTTPError
from services.runtime.natsserver import free_port
from tests.processes import wait_until

Respond = Callable[[bytes, int], bytes | None]  # (request head + body, connection's nth) -> raw answer


async def _serve(respond: Respond) -> tuple[asyncio.Server, list[bytes], list[int]]:
    seen: list[bytes] = []
    opened: list[int] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(1)
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
                body = await reader.readexactly(length)
                seen.append(head + body)
                answer = respond(head + body, n)
                n += 1
                if answer is None:  # hang up without a word
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    break
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    return server, seen, opened


@pytest.fixture
async def served() -> AsyncIterator[Callable[[Respond], object]]:
    servers: list[asyncio.Server] = []

    async def start(respond: Respond) -> tuple[Http1, list[bytes], list[int]]:
        server, seen, opened = await _serve(respond)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return Http1(f"http://127.0.0.1:{port}/base", None, None, 4), seen, opened

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def _ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def test_a_request_goes_out_whole_and_connections_are_kept(served) -> None:  # type: ignore[no-untyped-def]
    client, seen, opened = await served(lambda req, n: _ok(b'{"n": %d}' % n))
    for i in range(3):
        answer = await client.request("POST", "/api/v1/x?a=b", {"Authorization": "Bearer t"}, b'{"k":1}', 5)
        assert (answer.status, answer.reason, answer.body) == (201, "Created", b'{"n": %d}' % i)
        assert answer.headers["content-type"] == "application/json"
    assert len(opened) == 1  # one connection for all three
    head = seen[0].split(b"\r\n")
    assert head[0] == b"POST /base/api/v1/x?a=b HTTP/1.1"
    assert b"Authorization: Bearer t" in head and b"Content-Length: 7" in head
    assert seen[0].endswith(b'\r\n\r\n{"k":1}')
    await client.close()


async def test_chunked_answers_an_interim_100_and_errors_are_answers(served) -> None:  # type: ignore[no-untyped-def]
    def respond(req: bytes, n: int) -> bytes:
        if n == 0:
            return (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")  # fmt: skip
        return _ok(b'{"kind":"Status","code":409}').replace(b"201 Created", b"409 Conflict")

    client, _seen, opened = await served(respond)
    first = await client.request("GET", "/a", {}, None, 5)
    assert (first.status, first.body) == (200, b"hello world")
    second = await client.request("POST", "/b", {}, b"{}", 5)
    assert (second.status, second.reason) == (409, "Conflict") and b"409" in second.body
    assert len(opened) == 1
    await client.close()


async def test_a_connection_the_server_closes_is_not_used_again(served) -> None:  # type: ignore[no-untyped-def]
    client, _seen, opened = await served(lambda req, n: _ok(b"{}", "Connection: close\r\n"))
    for _ in range(2):
        assert (await client.request("GET", "/a", {}, None, 5)).status == 201
    assert len(opened) == 2
    await client.close()


async def test_a_kept_connection_closed_while_idle_is_replaced_once(served) -> None:  # type: ignore[no-untyped-def]
    # the first connection answers once, then hangs up on the next request unread (an idle
    # timeout on the server's side); the request goes out again on a new connection
    client, seen, opened = await served(lambda req, n: _ok(b"{}") if n == 0 else None)
    assert (await client.request("GET", "/a", {}, None, 5)).status == 201
    assert (await client.request("POST", "/b", {}, b"{}", 5)).status == 201
    assert len(opened) == 2 and [s.split(b" ")[1] for s in seen] == [b"/base/a", b"/base/b", b"/base/b"]
    await client.close()


async def test_a_create_the_server_names_is_not_sent_again_when_a_kept_connection_fails(served) -> None:  # type: ignore[no-untyped-def]
    # the server read it before hanging up: sent again, a generateName create made two objects
    client, seen, _opened = await served(lambda req, n: _ok(b"{}") if n == 0 else None)
    assert (await client.request("GET", "/a", {}, None, 5)).status == 201
    with pytest.raises(HTTPError) as caught:
        await client.request("POST", "/b", {}, b"{}", 5, replayable=False)
    assert caught.value.sent and [s.split(b" ")[1] for s in seen] == [b"/base/a", b"/base/b"]
    await client.close()


async def test_a_server_that_never_answers_is_an_error_not_a_hang(served) -> None:  # type: ignore[no-untyped-def]
    client, _seen, _opened = await served(lambda req, n: None)
    with pytest.raises(HTTPError):
        await client.request("GET", "/a", {}, None, 5)
    await client.close()


async def _stream_server(parts: list[bytes], then_silent: bool = False) -> asyncio.Server:
    """Answers one GET with `parts` written one by one (the chunk framing is the test's), then
    ends — or stays silent with the connection open."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.01)
        if then_silent:  # until the client gives up and hangs up
            await reader.read()
        writer.close()

    return await asyncio.start_server(on_conn, "127.0.0.1", 0)


async def _lines(server: asyncio.Server, read_timeout: float | None = 5) -> list[object]:
    port = server.sockets[0].getsockname()[1]
    client = Http1(f"http://127.0.0.1:{port}", None, None, 1)
    return [item async for item in client.lines("/w?watch=true", {}, 5, read_timeout)]


async def test_a_watch_streams_lines_across_and_within_chunks() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = [b'{"type":"ADDED","n":1}\n', b'{"type":"MODIFIED",', b'"n":2}\n{"type":"DELETED","n":3}\n']
    chunks = [b"%x\r\n%s\r\n" % (len(b), b) for b in body]
    parts = [head, chunks[0] + chunks[1][:7], chunks[1][7:], chunks[2], b"0\r\n\r\n"]
    server = await _stream_server(parts)
    try:
        got = await _lines(server)
    finally:
        server.close()
    assert got == [b'{"type":"ADDED","n":1}', b'{"type":"MODIFIED","n":2}', b'{"type":"DELETED","n":3}']


async def test_a_refused_watch_is_one_answer_and_a_silent_one_times_out() -> None:
    refused = b'{"kind":"Status","code":410}'
    server = await _stream_server([b"HTTP/1.1 410 Gone\r\nContent-Length: %d\r\n\r\n%s" % (len(refused), refused)])
    try:
        (answer,) = await _lines(server)
    finally:
        server.close()
    assert isinstance(answer, Answer) and (answer.status, answer.body) == (410, refused)
    silent = await _stream_server([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{}\n\n\r\n"],
                                  then_silent=True)  # fmt: skip
    try:
        with pytest.raises(TimeoutError):
            await _lines(silent, read_timeout=0.3)
    finally:
        silent.close()


async def test_closing_the_client_closes_its_open_watches() -> None:
    """A watch whose reader was cancelled but has not run since still holds its connection:
    closing the client hangs it up (an API server's graceful stop waited on it)."""
    hung_up = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n")
        await reader.read()  # until the client hangs up
        hung_up.set()
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Http1(f"http://127.0.0.1:{port}", None, None, 1)
    stream = client.lines("/w", {}, 5, None)
    assert await anext(stream) == b"{}"
    await client.close()  # the generator is neither closed nor cancelled
    await asyncio.wait_for(hung_up.wait(), 5)
    await stream.aclose()
    server.close()


async def test_kept_connections_the_server_closed_after_a_lull_are_not_tried_in_turn() -> None:
    # kube-apiserver closes a kept connection after 90 s idle (a load balancer may sooner):
    # after a lull every pooled connection is closed, and the retry took the next kept one —
    # as stale — and the request failed ("no answer") instead of going out on a new one
    hang_up = asyncio.Event()
    closed: list[int] = []
    opened: list[int] = []
    seen: list[bytes] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(1)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            seen.append(head)
            if hang_up.is_set():  # a connection of after the lull answers
                writer.write(_ok(b"{}"))
                await writer.drain()
                await reader.read()  # (until the client closes it)
                return
            await hang_up.wait()  # hold the answer until all three are open
            writer.write(_ok(b"{}"))
            await writer.drain()
        finally:
            writer.close()
            closed.append(1)

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Http1(f"http://127.0.0.1:{port}", None, None, 4)
    try:
        first = [asyncio.ensure_future(client.request("GET", f"/{i}", {}, None, 5)) for i in range(3)]

        async def all_open() -> bool:
            return len(seen) == 3

        await wait_until(all_open, 10, "three requests on three connections")
        hang_up.set()  # each answers, then the server closes it: the lull's idle timeout
        assert [(await f).status for f in first] == [201] * 3

        async def all_closed() -> bool:
            return len(closed) == 3

        await wait_until(all_closed, 10, "the server closing its side")
        answer = await client.request("GET", "/after", {}, None, 5)
        assert answer.status == 201
        assert seen[-1].split(b" ")[1] == b"/after" and len(opened) >= 4
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


async def test_a_refused_connection_is_an_http_error_that_says_nothing_was_sent() -> None:
    client = Http1(f"http://127.0.0.1:{free_port()}", None, None, 1)
    with pytest.raises(HTTPError) as caught:
        await client.request("POST", "/a", {}, b"{}", 5)
    assert caught.value.sent is False
    with pytest.raises(HTTPError):  # a watch's connection too
        await anext(client.lines("/w?watch=true", {}, 5, 5))
    await client.close()
