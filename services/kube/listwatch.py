"""List, then watch from the listed resourceVersion (client-go's reflector, in a loop).

A watch that ends (server timeout, dropped connection) resumes from the last resourceVersion
seen, bookmarks included; `410 Gone` (the version fell out of the API server's window) means
relist, and the relist is diffed against what was already known, so objects deleted while the
watch was down are reported deleted. Every change is reported once: an ADDED for an object the
reflector already holds unchanged (an emulator replaying, a relist) is not a change.

Failures back off as client-go's reflector does (1 s doubling to 30 s, from the first failure
after the last answer; its backoff manager goes 800 ms → 30 s), and are said once: an API
server that does not answer is said by the client, once per process (`reach`), so a reflector
says nothing more about it; any other failure is one WARNING at the first of a run and one INFO
when the run ends. Each of ~40 watches logged one WARNING a second through a 24 s outage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from services.kube.client import UNANSWERED, Kube, KubeError, pods_path

log = logging.getLogger(__name__)

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    kind: Literal["upsert", "delete", "synced"]
    key: str
    obj: Obj


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


#: seconds between two lists of a resource the server does not serve, at most
MISSING_BACKOFF = 60.0
#: seconds a reflector waits at most before it lists or watches again after failures in a row
#: (client-go's reflector: 30 s)
BACKOFF_CAP = 30.0


def backoff(first: float, failures: int, cap: float = BACKOFF_CAP) -> float:
    """The wait after the `failures`-th failure in a row: `first`, doubled each time, at most
    `cap` (deterministic: the reflectors of one process are few, and the API server's own
    priority and fairness spreads them; jitter would only make the tests guess)."""
    return min(cap, first * 2 ** min(max(failures - 1, 0), 30))


class Reflector:
    """`changes()` yields upserts and deletes, and `synced` after every (re)list."""

    def __init__(self, kube: Kube, path: str, query: Mapping[str, Any] | None = None,
                 keep: Callable[[Obj], bool] | None = None, page: int = 500,
                 watch_timeout: int = 300, retry: float = 1.0,
                 missing: asyncio.Event | None = None) -> None:  # fmt: skip
        self.kube, self.path = kube, path
        #: set when the list answers 404: the server does not serve the resource (a CRD not
        #: installed), so one waiting for the first list need not (the list is tried again)
        self.missing = missing
        self.query = dict(query or {})
        self.keep = keep or (lambda _o: True)
        self.page, self.watch_timeout, self.retry = page, watch_timeout, retry
        self.cache: dict[str, Obj] = {}
        self.rv = ""
        self.relists = 0
        self.resumes = 0
        self.absent = 0  # lists answered 404 in a row
        self.failures = 0  # failures in a row since the last answer (the backoff's exponent)
        self.said = False  # this run of failures was logged (its end is, too)

    async def _list(self) -> tuple[dict[str, Obj], str]:
        items: dict[str, Obj] = {}
        cont, rv = "", ""
        while True:
            query = {**self.query, "limit": str(self.page)}
            if cont:
                query["continue"] = cont
            body = await self.kube.get(self.path, **query)
            for obj in body.get("items") or []:
                if self.keep(obj):
                    items[object_key(obj)] = obj
            meta = body.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = str(meta.get("continue") or "")
            if not cont:
                return items, rv

    def _upsert(self, obj: Obj) -> Change | None:
        key = object_key(obj)
        if not self.keep(obj):
            return self._delete(obj)  # no longer of interest (e.g. its schedulerName changed)
        old = self.cache.get(key)
        if old == obj or (old is not None and _untyped(old) == _untyped(obj)):
            return None
        self.cache[key] = obj
        return Change("upsert", key, obj)

    def _delete(self, obj: Obj) -> Change | None:
        key = object_key(obj)
        old = self.cache.pop(key, None)
        return None if old is None else Change("delete", key, obj)

    async def changes(self) -> AsyncIterator[Change]:
        relist = True
        while True:
            try:
                if relist:
                    items, self.rv = await self._list()
                    self.relists += 1
                    self._recovered()
                    if self.absent:
                        log.info("%s is served now: listed", self.path)
                        self.absent = 0
                    for key in [k for k in self.cache if k not in items]:
                        yield Change("delete", key, self.cache.pop(key))
                    for obj in items.values():
                        if (ch := self._upsert(obj)) is not None:
                            yield ch
                    yield Change("synced", "", {})
                    relist = False
                query = {**self.query, "allowWatchBookmarks": "true",
                         "timeoutSeconds": str(self.watch_timeout)}  # fmt: skip
                if self.rv:
                    query["resourceVersion"] = self.rv
                # the server ends the watch after timeoutSeconds; a connection silent past that
                # (half-open) is given up on and the watch resumed
                async for ev in self.kube.watch(self.path, query, read_timeout=self.watch_timeout + 60):
                    if self.failures:
                        self._recovered()
                    kind, obj = ev.get("type"), ev.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        log.info("watch %s: error %s (%s): relisting", self.path, code,
                                 obj.get("message"))  # fmt: skip
                        relist = True
                        break
                    if _rv(obj) and _rv(obj) != "...":
                        self.rv = _rv(obj)
                    if kind == "BOOKMARK":
                        continue
                    ch = self._delete(obj) if kind == "DELETED" else self._upsert(obj)
                    if ch is not None:
                        yield ch
                else:
                    self.resumes += 1  # the server ended the watch: resume from self.rv
                    self._recovered()
            except KubeError as exc:
                if exc.status == 410:  # the version expired: only a fresh list is consistent
                    relist = True
                    self._recovered()
                    continue
                if exc.status == 404 and relist:
                    # not served (a CRD not installed: HyperNodes before Volcano 1.12, JobFlows):
                    # asked again, less and less often, and said once — not every second for ever
                    if self.missing is not None:
                        self.missing.set()
                    self.absent += 1
                    if self.absent == 1:
                        log.warning("%s is not served (%s): a CRD not installed? Listed again every "
                                    "%.0f s at most", self.path, exc, MISSING_BACKOFF)  # fmt: skip
                    await asyncio.sleep(min(MISSING_BACKOFF, self.retry * 2 ** min(self.absent - 1, 10)))
                    continue
                relist = relist or not self.rv
                await self._failed(f"{'list' if relist else 'watch'} {self.path} failed", exc,
                                   unanswered=exc.reason == UNANSWERED)  # fmt: skip
            except (TimeoutError, OSError, ValueError) as exc:
                self.resumes += 1
                await self._failed(f"watch {self.path} dropped", exc, dropped=True)
            except Exception as exc:  # aiohttp payload errors on a cut connection
                if type(exc).__module__.startswith("aiohttp"):
                    self.resumes += 1
                    await self._failed(f"watch {self.path} dropped", exc, dropped=True)
                else:
                    raise

    async def _failed(self, what: str, exc: BaseException, unanswered: bool = False,
                      dropped: bool = False) -> None:  # fmt: skip
        """Wait before trying again, longer after each failure in a row. Said at the first of a
        run unless the client said it already (the server does not answer: one line for every
        watch of the process) or it is the drop of a watch that was running (routine: API
        servers and load balancers end connections; resumed after `retry`, said if resuming fails).
        A watch is known open only by its first event, so an idle one that was open is known
        only by its drop: a drop restarts the run (else a quiet watch dropped after an outage
        waited the outage's 30 s)."""
        if dropped:  # it was open (answered): a run of failures starts again from this one
            self._recovered()
        self.failures += 1
        reach = self.kube.reach
        quiet = (unanswered and reach.down) or dropped
        if not self.said and not quiet:
            self.said = True
            log.warning("%s (%s): retrying from resourceVersion %s, backing off up to %.0f s",
                        what, exc, self.rv or "(a list)", BACKOFF_CAP)  # fmt: skip
        else:
            log.debug("%s (%s): failure %d in a row", what, exc, self.failures)
        await reach.wait_answered(backoff(self.retry, self.failures))

    def _recovered(self) -> None:
        """The server answered: the backoff starts again from `retry`, and a run said ends."""
        if self.said:
            log.info("%s: listing and watching again after %d failures", self.path, self.failures)
        self.failures, self.said = 0, False


def _untyped(obj: Obj) -> Obj:
    """The object without `kind` and `apiVersion`: a list's items carry neither and a watch
    event's object both, so after a relist every object last seen through the watch compared
    unequal and was reported changed (only an object that did change is)."""
    return {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}


class Merged:
    """Several reflectors' changes as one stream, as `Reflector.changes` gives them: `synced`
    once every one of them has listed (and again after any later relist). Their objects must not
    overlap — each reflector reports deletes of its own objects only."""

    def __init__(self, reflectors: list[Reflector]) -> None:
        self.reflectors = reflectors

    async def changes(self) -> AsyncIterator[Change]:
        queue: asyncio.Queue[tuple[int, Change | BaseException]] = asyncio.Queue()

        async def pump(i: int, r: Reflector) -> None:
            try:
                async for ch in r.changes():
                    await queue.put((i, ch))
            except Exception as exc:  # (a reflector retries by itself: this is a bug) said once
                await queue.put((i, exc))

        tasks = [asyncio.create_task(pump(i, r)) for i, r in enumerate(self.reflectors)]
        unlisted = set(range(len(tasks)))
        try:
            while True:
                i, ch = await queue.get()
                if isinstance(ch, BaseException):
                    raise ch
                if ch.kind == "synced":
                    unlisted.discard(i)
                    if unlisted:
                        continue
                yield ch
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def scheduler_pods(kube: Kube, names: Iterable[str], path: str = "",
                   keep: Callable[[Obj], bool] | None = None) -> Reflector | Merged:  # fmt: skip
    """The pods of the given schedulers only, selected by the API server (`spec.schedulerName`,
    immutable, so no pod moves between the selections): a shared cluster's other pods — most
    of them, and every status update the kubelets write for them — are never sent, let alone
    decoded (issue 29: each process's pod watch decoded every pod of the cluster)."""
    reflectors = [Reflector(kube, path or pods_path(), query={"fieldSelector": f"spec.schedulerName={name}"},
                            keep=keep) for name in sorted(set(names))]  # fmt: skip
    if not reflectors:
        raise ValueError("no scheduler names: no pod would be Tessera's")
    return reflectors[0] if len(reflectors) == 1 else Merged(reflectors)
