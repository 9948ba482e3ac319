"""Leadership among the replicas of one service: a key in a JetStream KV bucket that expires.

Two schedulers on one log would both propose every job and both write its phase changes and
reasons (issue 12 item 6). The replica holding the lease decides; the others follow the log and
take over when it lapses. The key is created only if absent (`create`), renewed with the
revision it holds (`update(last=…)`, so a replica that lost it cannot renew someone else's), and
expires `ttl` seconds after its last write (the bucket's max age): a leader killed with -9 is
replaced within `ttl`; one stopped normally deletes its key and is replaced at once.

A leader counts itself leader only until `ttl` after it *sent* its last successful renewal,
which the server stored later, so it stops before the key can expire. A process paused past
that (a stalled host) may still append a decision or two; that is safe because the lease is
not what protects the ledgers — the allocator's optimistic concurrency and its answers on the
job subjects are (one commit per proposal, whoever proposed it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from services.runtime.eventlog.jetstream import WRONG_LAST_SEQUENCE
from services.runtime.waits import unless_stopped, within

log = logging.getLogger(__name__)


class Lease:
    def __init__(self, js: JetStreamContext, bucket: str, key: str, ttl: float = 5.0,
                 holder: str = "", replicas: int = 1) -> None:  # fmt: skip
        self.js = js
        self.bucket = bucket
        self.key = key
        self.ttl = ttl
        self.holder = holder or uuid.uuid4().hex
        self.replicas = replicas  # as the streams': on a cluster a lost server keeps the lease
        self.revision = 0  # of our key while we hold it
        self.valid_until = 0.0  # monotonic time until which we may act as leader
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            config = KeyValueConfig(bucket=self.bucket, history=1, ttl=self.ttl,
                                    storage=StorageType.FILE, replicas=self.replicas)  # fmt: skip
            try:
                self._kv = await self.js.create_key_value(config)
            except nats.js.errors.BadRequestError:  # exists (perhaps with another ttl): use it
                self._kv = await self.js.key_value(self.bucket)
        return self._kv

    def held(self) -> bool:
        return self.revision > 0 and time.monotonic() < self.valid_until

    async def renew(self) -> bool:
        """Take the lease if it is free, or extend ours; True if we hold it now."""
        sent = time.monotonic()
        try:
            kv = await self._bucket()
            if self.revision and time.monotonic() < self.valid_until:
                self.revision = await kv.update(self.key, self.holder.encode(), last=self.revision)
            else:
                self.revision = await kv.create(self.key, self.holder.encode())
            self.valid_until = sent + self.ttl
        except nats.js.errors.KeyWrongLastSequenceError:
            # ours still, if a renewal landed but its answer was lost (a timeout under load):
            # take its revision rather than lock ourselves out until it expires
            self.revision = await self._ours(kv)
            if self.revision:
                self.valid_until = sent + self.ttl
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
            log.warning("lease %s/%s not renewed: %s", self.bucket, self.key, exc)
            if not self.held():
                self.revision = 0
        return self.held()

    async def _ours(self, kv: KeyValue) -> int:
        """The key's revision if it holds our id (0 if it is another's or gone)."""
        try:
            entry = await kv.get(self.key)
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError):
            return 0
        return (entry.revision or 0) if entry.value == self.holder.encode() else 0

    async def keep(self, stopping: asyncio.Event, changed: asyncio.Event | None = None) -> None:
        """Renew every third of the ttl until `stopping`; `changed` is set when we gain it."""
        had = False
        while not stopping.is_set():
            renewal = asyncio.ensure_future(self.renew())
            # a renewal waits up to the request timeout (10 s) for a broker that may be gone:
            # a stop does not wait for it
            if not await unless_stopped(asyncio.shield(renewal), stopping):
                renewal.cancel()
                break
            has = renewal.result()
            if has and not had:
                log.info("lease %s/%s taken (revision %d)", self.bucket, self.key, self.revision)
                if changed is not None:
                    changed.set()
            elif had and not has:
                log.warning("lease %s/%s lost", self.bucket, self.key)
            had = has
            with contextlib.suppress(TimeoutError):
                await within(stopping.wait(), self.ttl / 3)
        await self.release()

    async def release(self) -> None:
        """Give the lease up (a normal stop): the next replica need not wait for the ttl. Not
        longer than the ttl, after which the key is gone anyway: a stop because the NATS server
        died waited out the request's timeout (10 s) for an answer that could not come."""
        if not self.revision:
            return
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
            await within(self._delete_ours(), self.ttl)
        self.revision = 0

    async def _delete_ours(self) -> None:
        """Delete the key at our revision; if a renewal we gave up on (a stop cancels the one in
        flight) landed meanwhile, the key is ours at a later revision: delete at that one. Only
        the old one tried, the delete was refused in silence and the next replica waited the
        whole ttl after a normal stop (the end-of-session review)."""
        kv = await self._bucket()
        try:
            await kv.delete(self.key, last=self.revision)
        except nats.js.errors.APIError as exc:  # (nats-py's delete raises the bare 10071, not
            if exc.err_code != WRONG_LAST_SEQUENCE:  # KeyWrongLastSequenceError as update does)
                raise
            if revision := await self._ours(kv):
                await kv.delete(self.key, last=revision)
