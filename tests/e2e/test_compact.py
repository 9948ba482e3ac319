"""`tessera compact` (issue 12 item 7): finished jobs' subjects and card history go, a running
pod's job and every card's state stay, and every service — killed and restarted on the
compacted log — keeps the running pod's booking and goes on scheduling, with DESIGN §9 holding
on what is left of the log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import msgspec
import pytest
import yaml

from benchmarks.chaos import slice_pod
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.core.audit import audit
from services.core.retention import ended
from services.runtime.compaction import compact
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import decode_stored
from services.runtime.snapshot import ObjectStoreSnapshots, Stored, compacted_horizon
from tests.e2e.test_system import apply
from tests.processes import ROOT, wait_until


def pods(*specs: tuple[str, int]) -> str:
    return yaml.safe_dump_all([slice_pod(name, 16384, seconds) for name, seconds in specs])


async def test_compaction_keeps_what_is_live_and_every_service_restarts_on_it(plane: ControlPlane) -> None:
    reply = await apply(plane.url, pods(("done-0", 1), ("done-1", 1), ("done-2", 1), ("long", 600)))
    assert {r.outcome for r in reply.results} == {"accepted"}
    log = await JetStreamLog.connect(plane.url)
    s = log.subjects

    async def settled(finished: set[str]) -> bool:
        messages = [m async for m in log.replay()]
        events = [(m.seq, e) for m in messages if (e := await decode_stored(m)) is not None]
        report = await fetch_report(plane.url, "tessera")
        phases = {p["name"]: p["phase"] for p in report["pods"]}
        found = audit(events, report["pods"], compacted=True)
        assert not found.broken, found.broken  # the log itself is wrong: no use waiting
        # a pod Succeeded before its job's end is appended (the queue service's): compaction
        # counts jobs that ended, so wait for those too
        ended_jobs = {getattr(e, "name", "") for _, e in events if ended(e)}
        return (found.clean and phases.get("long") == "Running" and finished <= ended_jobs
                and all(phases.get(n) == "Succeeded" for n in finished))  # fmt: skip

    try:
        await wait_until(lambda: settled({"done-0", "done-1", "done-2"}), timeout=60,
                         what="three pods done, one running, ledgers released")  # fmt: skip
        done = await compact(log, keep_finished=1)
        assert done.jobs == 2 and done.after < done.before
        kept = {name for name in ("done-0", "done-1", "done-2", "long")
                if [m async for m in log.replay(1, s.job("chaos", name))]}  # fmt: skip
        assert len(kept) == 2 and "long" in kept  # the running one and the newest finished one
        cards = [m async for m in log.replay(1, s.all_cards())]
        assert len(cards) == len({m.subject for m in cards})  # one event per card left

        for name in plane.names():
            plane.kill(name)
            plane.restart(name)
        reply = await apply(plane.url, pods(("after", 1)))
        assert {r.outcome for r in reply.results} == {"accepted"}
        await wait_until(lambda: settled({"after"}), timeout=60,
                         what="a new pod placed and done on the compacted log, 'long' still booked")  # fmt: skip
    finally:
        await log.close()


SNAPSHOTTERS = ("admission", "queue", "scheduler", "nodeagent")


def whole_card_pods(prefix: str, count: int, seconds: int) -> str:
    docs = []
    for i in range(count):
        pod = slice_pod(f"{prefix}-{i}", 0, seconds)
        del pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910B3-memory"]
        docs.append(pod)
    return yaml.safe_dump_all(docs)


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[ControlPlane]:
    """Every restart writes a snapshot (`--snapshot-every 1`); no compaction but the test's."""
    env = {"TESSERA_SNAPSHOT_EVERY": "1"}
    cp = ControlPlane(tmp_path / "state", inventory=str(ROOT / "examples" / "inventory.yaml"), env=env)
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


async def test_a_restart_on_a_snapshot_older_than_a_compaction_keeps_no_ghost_job(
    snapshotting: ControlPlane,
) -> None:
    """The SRE's repro, made exact: every service holds a snapshot taken while 16 whole-card
    pods ran (the cluster's every card); they end, compaction forgets them, every service is
    killed and restarts on that snapshot. Before, the scheduler folded the snapshot onward —
    the ends were purged — and kept the 16 cards booked for ever: 16 new whole-card pods
    waited. Now the snapshot is refused ("compacted since"), the log left is replayed, and
    the 16 run."""
    plane = snapshotting
    log = await JetStreamLog.connect(plane.url)
    store = ObjectStoreSnapshots(log)

    async def phases() -> dict[str, str]:
        return {p["name"]: p["phase"] for p in (await fetch_report(plane.url, "tessera"))["pods"]}

    async def seq_of(name: str) -> int:
        data = await store.load(name)
        return msgspec.msgpack.decode(data, type=Stored).header.seq if data else 0

    try:
        first = [f"first-{i}" for i in range(16)]
        reply = await apply(plane.url, whole_card_pods("first", 16, 20))
        assert {r.outcome for r in reply.results} == {"accepted"}, reply
        await wait_until(lambda: _all(phases, first, "Running"), timeout=60, what="16 whole-card pods running")
        running_at = await log.last_sequence()
        held: dict[str, bytes] = {}
        for name in SNAPSHOTTERS:  # each restart writes a snapshot at the log's end: the 16 run in it
            plane.kill(name)
            plane.restart(name)
            await wait_until(lambda n=name: _at_least(seq_of, n, running_at), timeout=30, what=f"{name}'s snapshot")
            held[name] = await store.load(name)  # type: ignore[assignment]

        async def ended_all() -> bool:
            ends = {getattr(e, "name", "") for m in [m async for m in log.replay(1, log.subjects.all_jobs())]
                    if (e := await decode_stored(m)) is not None and ended(e)}  # fmt: skip
            return set(first) <= ends and await _all(phases, first, "Succeeded")

        await wait_until(ended_all, timeout=90, what="the 16 pods Succeeded, their jobs ended")
        forgotten = 0

        async def all_forgotten() -> bool:  # a job is forgotten once its cards' releases are in too
            nonlocal forgotten
            forgotten += (await compact(log, keep_finished=0)).jobs
            return forgotten == 16

        await wait_until(all_forgotten, timeout=30, what="compaction forgot the 16 ended jobs")
        taken = {name: msgspec.msgpack.decode(data, type=Stored).header.seq for name, data in held.items()}
        _, horizon = await compacted_horizon(log)
        assert max(taken.values()) < horizon, (taken, horizon)  # the ends purged were after every snapshot

        for name in SNAPSHOTTERS:  # a restart now starts from the snapshot the 16 run in (as after
            plane.kill(name)  # a long quiet spell: snapshots come every quarter of the log)
        for name, data in held.items():
            await store.save(name, data)
        for name in plane.names():
            if name not in SNAPSHOTTERS:
                plane.kill(name)
        sizes = {name: (plane.log_dir / f"{name}.log").stat().st_size for name in SNAPSHOTTERS}
        for name in plane.names():
            plane.restart(name)
        for name in SNAPSHOTTERS:
            text = (plane.log_dir / f"{name}.log").read_bytes()[sizes[name]:]
            assert b"compacted since" in text, (name, text[-2000:])

        second = [f"second-{i}" for i in range(16)]
        reply = await apply(plane.url, whole_card_pods("second", 16, 1))
        assert {r.outcome for r in reply.results} == {"accepted"}, reply
        await wait_until(lambda: _all(phases, second, "Succeeded"), timeout=90,
                         what="16 new whole-card pods placed on the 16 cards the ended ones freed")  # fmt: skip
    finally:
        await log.close()


async def _all(phases: Callable[[], Awaitable[dict[str, str]]], names: list[str], phase: str) -> bool:
    now = await phases()
    return all(now.get(n) == phase for n in names)


async def _at_least(seq_of: Callable[[str], Awaitable[int]], name: str, seq: int) -> bool:
    return await seq_of(name) >= seq
