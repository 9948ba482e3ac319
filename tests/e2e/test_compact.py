"""`tessera compact` (issue 12 item 7): finished jobs' subjects and card history go, a running
pod's job and every card's state stay, and every service — killed and restarted on the
compacted log — keeps the running pod's booking and goes on scheduling, with DESIGN §9 holding
on what is left of the log."""

from __future__ import annotations

import yaml

from benchmarks.chaos import slice_pod
from services.cli.get import fetch_report
from services.cli.up import ControlPlane
from services.core.audit import audit
from services.core.retention import ended
from services.runtime.compaction import compact
from services.runtime.eventlog.jetstream import JetStreamLog
from services.runtime.service import decode_stored
from tests.e2e.test_system import apply
from tests.processes import wait_until


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
