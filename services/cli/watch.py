"""`tessera get KIND -w`: the list, then an object again each time the log changes it.

kubectl's watch prints the table once and then one row per change, without the header, until
Ctrl-C. Here a change is read from the log itself (`JetStreamLog.follow`: the stream, woken by
each publish), and the listing is built again from everything read so far — the same function
`get` prints from, so a watched row is the row `get` would print at that moment. Events that
arrive together are folded before one rebuild, so a burst costs one replay of the report, not
one per event.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys

import yaml

from services.cli.connection import nats_url, open_log
from services.cli.get import Listing, _names, columns_of, listing_of, select
from services.cli.tables import table
from services.runtime.eventlog.model import StoredMessage

#: Kinds the log's events change; nodes, cards and components have readers of their own.
WATCHABLE = ("pods", "jobs", "podgroups", "queues")


def _build(what: str, messages: list[StoredMessage], namespace: str | None) -> Listing:
    return listing_of(messages, what, namespace)[0]


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _shown(row: dict, columns: tuple[str, ...]) -> tuple[str, ...]:
    """What the row prints, AGE aside: an object is printed again when it changed, not when
    it grew a second older."""
    return tuple(str(row.get(c, "")) for c in columns if c != "age")


class Printer:
    """Prints rows (or objects) that changed since last time, in `args.output`'s form."""

    def __init__(self, args: argparse.Namespace, what: str, selector: list[tuple[str, str, str]]) -> None:
        self.args, self.what, self.selector = args, what, selector
        self.columns = columns_of(what, args.output, args.all_namespaces)
        self.seen: dict[tuple[str, str], tuple[str, ...]] = {}
        self.widths: list[int] = []

    def show(self, got: Listing, first: bool) -> None:
        got = select(got, self.selector)
        if self.args.names:
            got = got.pick([i for i, o in enumerate(got.objects) if set(_names(o)) & set(self.args.names)])
        changed = []
        for i, (obj, row) in enumerate(zip(got.objects, got.rows, strict=True)):
            shown = _shown(row, self.columns) if self.args.output in ("table", "wide") else (json.dumps(obj),)
            if self.seen.get(_key(obj)) != shown:
                self.seen[_key(obj)] = shown
                changed.append(i)
        if not changed and not first:
            return
        part = got.pick(changed)
        if self.args.output in ("json", "yaml"):
            for obj in part.objects:
                print(json.dumps(obj, indent=4) if self.args.output == "json"
                      else "---\n" + yaml.safe_dump(obj, sort_keys=False).rstrip("\n"), flush=True)  # fmt: skip
            return
        if self.args.output == "records":
            for r in part.records:
                print(json.dumps(r), flush=True)
            return
        lines = table(part.rows, self.columns).splitlines()
        print("\n".join(lines if first else lines[1:]), flush=True)


async def _watch(args: argparse.Namespace, what: str, selector: list[tuple[str, str, str]]) -> None:
    namespace = None if args.all_namespaces else args.namespace
    log = await open_log(nats_url(args), args.root)
    printer = Printer(args, what, selector)
    try:
        messages = [m async for m in log.replay(1)]
        printer.show(_build(what, messages, namespace), first=True)
        arrived: asyncio.Queue[StoredMessage] = asyncio.Queue()

        async def read() -> None:
            async for m in log.follow(messages[-1].seq + 1 if messages else 1, stamped=True):
                arrived.put_nowait(m)

        reader = asyncio.create_task(read())
        try:
            while True:
                messages.append(await arrived.get())
                while not arrived.empty():  # a burst: one rebuild for all of it
                    messages.append(arrived.get_nowait())
                printer.show(_build(what, messages, namespace), first=False)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    finally:
        await log.close()


def watch(args: argparse.Namespace, what: str, selector: list[tuple[str, str, str]]) -> int:
    """Until Ctrl-C (or SIGTERM); exit 0 then, as kubectl's watch does."""
    if what not in WATCHABLE:
        print(f"error: -w watches {', '.join(WATCHABLE)} (not {what})", file=sys.stderr)
        return 2
    if args.kubeconfig:
        print("error: -w reads the log; with --kubeconfig use kubectl get -w", file=sys.stderr)
        return 2
    try:
        asyncio.run(_watch(args, what, selector))
    except KeyboardInterrupt:
        pass
    return 0
