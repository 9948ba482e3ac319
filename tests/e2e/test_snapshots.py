"""Restart from snapshots, with retention (issue 12 item 7), through the service processes.

Every service that used to replay the log from #1 writes a snapshot of its projection; the
state rebuilt from a snapshot plus the log after it is byte-identical to a replay from #1 (per
service, on snapshots the processes wrote and on an older one with a longer tail), finished
jobs beyond `--keep-finished` are forgotten in both, and each service killed with -9 starts
from its snapshot and goes on scheduling."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchmarks.chaos import NAMESPACE, slice_pod
from services.admission.service import AdmissionService
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.core.retention import ended
from services.nodeagent.inventory import nodes_from_inventory
from services.nodeagent.service import NodeAgent
from services.queue.recovery import QueueFold
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import decode_stored
from services.runtime.snapshot import (
    MemoryStore,
    ObjectStoreSnapshots,
    Projection,
    Retention,
    Snapshots,
)
from services.scheduler.view import ViewFold
from tests.e2e.test_system import apply
from tests.processes import ROOT, wait_until

KEEP = 2
INVENTORY = ROOT / "examples" / "inventory.yaml"


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[ControlPlane]:
    env = {"TESSERA_SNAPSHOT_EVERY": "10", "TESSERA_KEEP_FINISHED": str(KEEP)}
    cp = ControlPlane(tmp_path / "state", inventory=str(INVENTORY), env=env)
    cp.start(report=lambda _line: None)
    try:
        yield cp
    finally:
        cp.stop()


def pods(*names: str) -> str:
    return yaml.safe_dump_all([slice_pod(name, 8192, 1) for name in names])


async def run_to_completion(url: str, *names: str) -> None:
    reply = await apply(url, pods(*names))
    assert {r.outcome for r in reply.results} == {"accepted"}, reply

    log = await JetStreamLog.connect(url)

    async def done() -> bool:  # the pods Succeeded and the queue ended their jobs in the log
        phases = {p["name"]: p["phase"] for p in (await fetch_report(url, "tessera"))["pods"]}
        if not all(phases.get(n) == "Succeeded" for n in names):
            return False
        for n in names:
            events = [await decode_stored(m) async for m in log.replay(1, log.subjects.job(NAMESPACE, n))]
            if not any(e is not None and ended(e) for e in events):
                return False
        return True

    try:
        await wait_until(done, timeout=60, what=f"{', '.join(names)} Succeeded, their jobs ended")
    finally:
        await log.close()


def projections(log: JetStreamLog) -> dict[str, Projection]:
    """The folds the processes run, configured as the plane's (retention `KEEP`)."""
    keep = Retention(None, 0, KEEP)
    admission = AdmissionService(log)
    admission.retain(keep)
    agent = NodeAgent(log, nodes_from_inventory(INVENTORY))
    agent.retain(keep)
    return {
        "admission": admission.snapshots.projection,
        "queue": QueueFold(log.subjects, KEEP),
        "nodeagent": agent.snapshots.projection,
        "scheduler": ViewFold(log.subjects.events),
    }


async def test_snapshot_plus_tail_equals_a_full_replay_and_restarts_start_from_it(
    snapshotting: ControlPlane,
) -> None:
    plane = snapshotting
    log = await JetStreamLog.connect(plane.url)
    store = ObjectStoreSnapshots(log)
    folds = projections(log)
    try:
        await run_to_completion(plane.url, "a-0", "a-1", "a-2", "a-3")

        async def all_written() -> bool:
            return all([await store.load(name) for name in folds])

        await wait_until(all_written, timeout=30, what="every service's first snapshot")
        older = MemoryStore(await store.identity())  # kept: a longer tail to fold later
        for name in folds:
            older.objects[name] = await store.load(name)  # type: ignore[assignment]
        await run_to_completion(plane.url, "b-0", "b-1", "b-2")

        until = await log.last_sequence()
        for name, fold in folds.items():
            full = await Snapshots(log, fold).recover(until)
            expected = fold.encode(full)
            for source in (store, older):
                rebuilt = Snapshots(log, fold, source)
                state = await rebuilt.recover(until)
                assert 0 < rebuilt.used <= until, (name, rebuilt.why)
                assert source is store or rebuilt.used < until  # the older one has a tail
                assert fold.encode(state) == expected, f"{name}: snapshot #{rebuilt.used} + tail ≠ replay"
            assert await Snapshots(log, fold, older).recover(until) is not None

        # retention: 7 pods finished, each service remembers KEEP of them (in both states)
        known = await Snapshots(log, folds["admission"], store).recover(until)
        assert sum(not j.live for j in known.jobs.values()) == KEEP
        queue = await Snapshots(log, folds["queue"], store).recover(until)
        assert len(queue.flow.finished.order) == KEEP and len(queue.flow.submitted) == KEEP
        runtime = await Snapshots(log, folds["nodeagent"], store).recover(until)
        assert len(runtime.ended) == KEEP and len(runtime.profiles) == KEEP
        assert {k[1] for k in runtime.runs} == {k[1] for k in runtime.ended}
        view = await Snapshots(log, folds["scheduler"], store).recover(until)
        assert view.projection.jobs == {} and view.unschedulable == {}

        for name in folds:
            path = plane.log_dir / f"{name}.log"
            before = path.stat().st_size
            plane.kill(name)
            plane.restart(name)
            assert b"from the snapshot at #" in path.read_bytes()[before:], name
        await run_to_completion(plane.url, "c-0")
    finally:
        await log.close()
