"""Only Tessera writes Tessera's log (issue 15 item 1): on `up`'s NATS every service has its own
user with the subjects of `contracts.permissions`, the CLI user reads and applies but cannot
append or purge, and a client without credentials is refused.

Through the real processes: the system of `plane` runs the demo workload with authorization on
(so every service had each right it used), then each user's rights are probed on the same
server. A probe that may publish on a log subject sends with an expected last subject sequence
the stream cannot have: the server lets it through to JetStream, which refuses it (10071) — a
right shown without writing anything. A refused publish is an asynchronous `Permissions
Violation` error on the connection, awaited as such."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import Awaitable, Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
import yaml

from contracts.envelope import EXPECTED_LAST_SUBJECT_SEQ
from contracts.permissions import ADMIN, APPENDS, CLI, COMPACTORS
from contracts.subjects import Subjects
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsauth import connect_options, load
from tests.e2e.test_system import EXAMPLES, apply
from tests.processes import ROOT, wait_until

S = Subjects()
KINDS = {"queue": S.queue("q"), "pc": S.priority_class("p"), "job": S.job("default", "j"),
         "node": S.node("n"), "card": S.card("n", "c"), "sched": S.scheduler("s"),
         "use": S.usage("n"), "vol": S.storage("pvc", "c", "default"),
         "quota": S.quota("default", "q"), "topo": S.hypernode("h"), "pdb": S.budget("default", "b"),
         "inv": S.inventory("a"), "ns": S.namespace("team"), "log": S.compactions()}  # fmt: skip
PURGE = "$JS.API.STREAM.PURGE.TESSERA"
#: a purge that matches nothing: where it is allowed, the live log must stay whole
PURGE_NOTHING = json.dumps({"filter": S.job("no-such", "job")}).encode()
DELETE = "$JS.API.STREAM.DELETE.TESSERA"


class Probe:
    """One user's connection; `publish` says whether the server let the message through."""

    def __init__(self) -> None:
        self.nc: nats.aio.client.Client | None = None
        self.refusals: asyncio.Queue[str] = asyncio.Queue()

    async def connect(self, url: str, creds: str) -> Probe:
        async def on_error(exc: Exception) -> None:
            if "permissions violation" in str(exc).lower():
                self.refusals.put_nowait(str(exc))

        self.nc = await nats.connect(url, error_cb=on_error, allow_reconnect=False,
                                     **connect_options(creds))  # its own inbox prefix
        return self

    async def refused(self, sent: Awaitable[object]) -> str:
        """The server's refusal of what `sent` sends (a publish, request or subscription)."""
        assert self.nc is not None
        sending = asyncio.ensure_future(sent)
        try:
            return await asyncio.wait_for(self.refusals.get(), 10)
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)

    async def publish(self, subject: str, body: bytes = b"{}") -> bool:
        """True: JetStream answered (the server allowed it); False: a permissions violation."""
        assert self.nc is not None
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox, max_msgs=1)
        await self.nc.flush()
        await self.nc.publish(subject, body, reply=inbox,
                              headers={EXPECTED_LAST_SUBJECT_SEQ: "999999999"})  # fmt: skip
        answer = asyncio.ensure_future(sub.next_msg(timeout=10))
        refusal = asyncio.ensure_future(self.refusals.get())
        done, pending = await asyncio.wait({answer, refusal}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await sub.unsubscribe()
        if refusal in done:
            assert subject.lower() in refusal.result(), refusal.result()  # nats-py lowercases it
            return False
        reply = json.loads(answer.result().data or b"{}")
        if subject.startswith(f"{S.root}.ev."):  # a log subject: refused by the stream, not written
            assert reply["error"]["err_code"] == 10071, reply
        return True

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.close()


async def test_each_user_publishes_only_where_the_table_says(plane: ControlPlane) -> None:
    reply = await apply(plane.url, (EXAMPLES / "article.yaml").read_text())
    assert "accepted" in {r.outcome for r in reply.results}

    async def placed() -> bool:  # the services did their work under their own users
        report = await fetch_report(plane.url, "tessera")
        return any(p["phase"] == "Running" for p in report["pods"])

    await wait_until(placed, timeout=60, what="a pod to run under authorization")
    log = await JetStreamLog.connect(plane.url)
    try:
        for user in (*APPENDS, CLI):
            path = plane.creds(user)
            assert stat.S_IMODE((plane.credentials / f"{user}.json").stat().st_mode) == 0o600
            probe = await Probe().connect(plane.url, path)
            try:
                allowed = {kind for kind, subject in KINDS.items() if await probe.publish(subject)}
                assert allowed == set(APPENDS.get(user, ())), user
                assert await probe.publish(PURGE, PURGE_NOTHING) is (user in COMPACTORS), user
                assert not await probe.publish(DELETE), user
            finally:
                await probe.close()
        admin = await Probe().connect(plane.url, plane.creds(ADMIN))
        try:
            assert await admin.publish(KINDS["card"])  # the operator's own user may
        finally:
            await admin.close()
        for subject in KINDS.values():  # nothing any probe sent was written (the system
            assert await log.last(subject) is None, subject  # itself goes on appending)
    finally:
        await log.close()


async def test_cli_user_reads_and_applies_but_cannot_forge(plane: ControlPlane, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT)}
    creds = plane.creds(CLI)

    def tessera(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "services.cli.main", *args, "--nats", plane.url,
                               "--nats-creds", creds], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, **env}, timeout=120)  # fmt: skip

    manifest = tmp_path / "q.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                        "metadata": {"name": "team-a"}, "spec": {"weight": 1}}))  # fmt: skip
    applied = tessera("apply", "-f", str(manifest))
    assert applied.returncode == 0 and "queue/team-a accepted" in applied.stdout, applied
    got = tessera("get", "queues", "-o", "json")
    assert got.returncode == 0 and "team-a" in got.stdout, got
    events = tessera("events", "-o", "json")
    assert events.returncode == 0 and "QueueCreated" in events.stdout, events
    compact = tessera("compact")  # purges subjects: the CLI user may not, and is told so
    assert compact.returncode == 2 and "may not purge the log" in compact.stderr, compact
    assert "Traceback" not in compact.stderr, compact.stderr

    probe = await Probe().connect(plane.url, creds)
    try:
        assert not await probe.publish(S.job("default", "npu-train-job"))  # a PlacementCommitted
        assert not await probe.publish(S.card("node-a", "node-a-Ascend910B3-0"))  # a ledger event
        assert not await probe.publish(PURGE, PURGE_NOTHING)
        assert await probe.publish(f"{S.api('allocator')}.cards")  # what `get cards` asks
        assert probe.nc is not None  # the reader's ephemeral consumers cannot be a durable:
        rewrite = {"stream_name": "TESSERA", "config": {"durable_name": "allocator",
                   "ack_policy": "none", "filter_subject": S.all_cards()}}  # fmt: skip
        answer = await probe.nc.request("$JS.API.CONSUMER.CREATE.TESSERA", json.dumps(rewrite).encode())
        assert "error" in json.loads(answer.data), answer.data
    finally:
        await probe.close()


async def test_a_client_without_credentials_is_refused(plane: ControlPlane) -> None:
    with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
        await nats.connect(plane.url.split(",")[0], allow_reconnect=False, max_reconnect_attempts=1)


@pytest.fixture
def tls_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path / "state", tls=True)  # no node agent: admission answers
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


async def test_tls_between_clients_and_nats(tls_plane: ControlPlane) -> None:
    """`up --nats-tls`: every service connects over TLS with the CA `up` made (they answer);
    a client without that CA is refused (the server requires TLS, its certificate is not
    trusted), credentials or not."""
    assert tls_plane.url.startswith("tls://") and tls_plane.ca
    queue = yaml.safe_dump({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": "over-tls"}, "spec": {"weight": 1}})  # fmt: skip
    reply = await apply(tls_plane.url, queue)
    assert [r.outcome for r in reply.results] == ["accepted"]
    cred = load(tls_plane.creds(CLI))
    plain = tls_plane.url.replace("tls://", "nats://")
    with pytest.raises(Exception):  # noqa: B017 - the error type varies with where the handshake fails
        nc = await nats.connect(plain, user=cred.user, password=cred.password, allow_reconnect=False,
                                max_reconnect_attempts=1, connect_timeout=3)  # fmt: skip
        await nc.close()
