"""Each service may touch only what it owns (issue 23), shown by the real nats-server refusing
one service's credentials: it cannot shorten or purge the log, pull or ack another service's
durable, overwrite another's snapshot, or read another's replies.

One nats-server with the authorization of `contracts.permissions` (what `tessera up` and the
chart configure), the log and each object made by its owner through the services' own code
(`JetStreamLog`, `ObjectStoreSnapshots`); the refusals are the server's asynchronous
`Permissions Violation` errors, awaited as such (`Probe` of the authorization test). That the
services still do all their work under these rights is what every end-to-end test shows: `up`
runs them with authorization on.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client

from contracts.permissions import APPENDS, COMPACTORS, SNAPSHOTTERS, inbox_prefix, nats_user
from contracts.subjects import Subjects
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.eventlog.model import Entry, LogError
from services.runtime.natsauth import authorization, server_config, write_credentials
from services.runtime.natsserver import NatsServer
from services.runtime.snapshot import ObjectStoreSnapshots, bucket_of
from tests.e2e.test_natsauth import Probe

S = Subjects()
API = "$JS.API"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Path]]]:
    root = tmp_path_factory.mktemp("least-privilege")
    files = write_credentials(root / "creds")
    server = NatsServer(data_dir=root / "nats", config=server_config(authorization(files, S, "TESSERA")))
    server.start()
    try:
        yield server.url, files
    finally:
        server.stop()


async def _log(secured: tuple[str, dict[str, Path]], user: str, **kwargs: object) -> JetStreamLog:
    url, files = secured
    return await JetStreamLog.connect(url, credentials=str(files[user]), writer=user, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def probes(secured: tuple[str, dict[str, Path]]) -> AsyncIterator[dict[str, Probe]]:
    url, files = secured
    opened = {user: await Probe().connect(url, str(files[user])) for user in APPENDS}
    try:
        yield opened
    finally:
        for probe in opened.values():
            await probe.close()


def _nc(probe: Probe) -> Client:
    assert probe.nc is not None
    return probe.nc


async def test_no_service_shortens_or_purges_the_log(secured: tuple[str, dict[str, Path]],
                                                    probes: dict[str, Probe]) -> None:  # fmt: skip
    log = await _log(secured, "admission")  # the first service to start creates the streams
    try:
        await log.append(Entry(S.queue("q"), b"{}"))
        shorten = json.dumps({"name": "TESSERA", "subjects": [S.events], "max_msgs": 1,
                              "max_age": 1_000_000_000}).encode()  # fmt: skip
        for user, probe in probes.items():
            nc = _nc(probe)
            refusal = await probe.refused(nc.request(f"{API}.STREAM.UPDATE.TESSERA", shorten, timeout=10))
            assert "stream.update.tessera" in refusal, user
            # nor by creating it anew: a create of an existing stream with another config is
            # the server's error, not an update
            answer = await nc.request(f"{API}.STREAM.CREATE.TESSERA", shorten, timeout=10)
            assert "error" in json.loads(answer.data), (user, answer.data)
            delete = nc.request(f"{API}.STREAM.DELETE.TESSERA", b"", timeout=10)
            assert "stream.delete.tessera" in await probe.refused(delete), user
            if user not in COMPACTORS:
                purge = nc.request(f"{API}.STREAM.PURGE.TESSERA", b"{}", timeout=10)
                assert "stream.purge.tessera" in await probe.refused(purge), user
        # a service asking for another configuration uses the stream as it is, at once
        other = await _log(secured, "queue", duplicate_window=1.0)
        await other.close()
        info = await log.js.stream_info("TESSERA")
        assert info.config.max_msgs in (None, -1) and info.config.duplicate_window == 120.0
        assert info.state.messages == 1
        operator = await _log(secured, "admin", duplicate_window=60.0)  # what `up` and the
        await operator.close()  # chart's hook do first (`tessera ensure-streams`), as admin
        assert (await log.js.stream_info("TESSERA")).config.duplicate_window == 60.0
    finally:
        await log.close()


async def test_a_service_cannot_pull_or_ack_another_services_durable(
    secured: tuple[str, dict[str, Path]], probes: dict[str, Probe]
) -> None:
    alloc = await _log(secured, "allocator")
    try:
        consumer = await alloc.consumer("allocator", [S.all_cards()])
        await alloc.append(Entry(S.card("n", "c"), b"{}"))
        delivery = await consumer.next(timeout=5)
        assert delivery is not None
        ack_subject = delivery._msg.reply  # $JS.ACK.TESSERA.allocator.…
        assert ack_subject.startswith("$JS.ACK.TESSERA.allocator."), ack_subject
        scheduler = probes["scheduler"]
        nc = _nc(scheduler)
        pull = nc.request(f"{API}.CONSUMER.MSG.NEXT.TESSERA.allocator", b'{"batch":1}', timeout=10)
        assert "consumer.msg.next.tessera.allocator" in await scheduler.refused(pull)
        assert "$js.ack.tessera.allocator" in await scheduler.refused(nc.publish(ack_subject, b"+ACK"))
        rewrite = json.dumps({"stream_name": "TESSERA", "config": {"durable_name": "allocator",
                              "ack_policy": "none", "deliver_policy": "new"}}).encode()  # fmt: skip
        create = nc.request(f"{API}.CONSUMER.DURABLE.CREATE.TESSERA.allocator", rewrite, timeout=10)
        assert "consumer.durable.create.tessera.allocator" in await scheduler.refused(create)
        named = json.dumps({"stream_name": "TESSERA", "config": {"name": "allocator",
                            "ack_policy": "none"}}).encode()  # fmt: skip
        answer = await nc.request(f"{API}.CONSUMER.CREATE.TESSERA", named, timeout=10)
        assert "error" in json.loads(answer.data), answer.data  # the ephemeral form: no name
        own = await _log(secured, "scheduler")  # and its own code says so, naming the rule
        try:
            with pytest.raises(LogError, match="only its own durable"):
                await own.consumer("allocator", [S.all_cards()])
        finally:
            await own.close()
        info = await alloc.js.consumer_info("TESSERA", "allocator")  # untouched by all that
        assert str(info.config.ack_policy).endswith("explicit") and info.num_ack_pending == 1
        await consumer.close()
    finally:
        await alloc.close()


async def test_a_service_cannot_overwrite_another_services_snapshot(
    secured: tuple[str, dict[str, Path]], probes: dict[str, Probe]
) -> None:
    queue = await _log(secured, "queue")
    try:
        await ObjectStoreSnapshots(queue).save("queue", b"the queue's projection")
        bucket = bucket_of("TESSERA", "queue")
        meta = f"$O.{bucket}.M.{base64.urlsafe_b64encode(b'queue').decode()}"
        for user in SNAPSHOTTERS - {"queue"} | {"allocator"}:
            probe = probes[user]
            nc = _nc(probe)
            assert meta.lower() in await probe.refused(nc.publish(meta, b"{}")), user
            chunk = f"$O.{bucket}.C.forged"
            assert chunk.lower() in await probe.refused(nc.publish(chunk, b"x")), user
            purge = nc.request(f"{API}.STREAM.PURGE.OBJ_{bucket}", b"{}", timeout=10)
            assert f"stream.purge.obj_{bucket}".lower() in await probe.refused(purge), user
        assert await ObjectStoreSnapshots(queue).load("queue") == b"the queue's projection"
    finally:
        await queue.close()


async def test_a_service_cannot_read_another_services_replies(
    secured: tuple[str, dict[str, Path]], probes: dict[str, Probe]
) -> None:
    for user, probe in probes.items():
        nc = _nc(probe)
        assert nc._inbox_prefix.decode() == inbox_prefix(nats_user(user))
        info = await nc.request(f"{API}.INFO", b"", timeout=10)  # its own replies come
        assert "error" not in json.loads(info.data)
        someone_else = "queue" if user == "allocator" else "allocator"
        for other in ("_INBOX.>", f"{inbox_prefix(nats_user(someone_else))}.>"):
            refusal = await probe.refused(nc.subscribe(other))
            assert "subscription" in refusal and other.lower() in refusal, (user, refusal)
