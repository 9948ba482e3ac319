"""One bad message in the log must not stop anything from starting again (issue 12 item 4).

Two poison messages go into a running system with a raw nats-py publish — a `JobSubmitted` whose
body is `{"spec": 5}` on a job subject, and a `SliceReleased` `{"card": 1}` as the LAST message
of a card that holds a running pod's slice — then every service is killed and restarted. Each
must start (its replay parks the message, once, and goes on), keep the running pod's booking,
and keep scheduling; `get pods` must still read the log and say what it skipped.
"""

from __future__ import annotations

import yaml

from contracts.envelope import DLQ_SOURCE, TYPE, VERSION
from services.cli.get import fetch_cards, fetch_report
from services.cli.up import ControlPlane
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.e2e.test_system import apply
from tests.processes import wait_until

#: Who reads what: the job subject poison reaches every service folding JobSubmitted; the card
#: subject poison the scheduler (it folds everything) and the allocator (card ledgers).
PARKED_BY = {"admission": 1, "queue": 1, "scheduler": 2, "nodeagent": 1, "allocator": 1}


def pod(name: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "serve"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {
            "huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"}}}]},
    })  # fmt: skip


async def test_every_service_restarts_over_poison_and_keeps_scheduling(plane: ControlPlane) -> None:
    report: dict = {}

    async def running(*names: str) -> bool:
        nonlocal report
        report = await fetch_report(plane.url, "tessera")
        phases = {p["name"]: p["phase"] for p in report["pods"]}
        return all(phases.get(n) == "Running" for n in names)

    assert {r.outcome for r in (await apply(plane.url, pod("before"))).results} == {"accepted"}
    await wait_until(lambda: running("before"), timeout=60, what="the first pod to run")
    card = next(p for p in report["pods"] if p["name"] == "before")["devices"][0]["uuid"]
    node = next(p for p in report["pods"] if p["name"] == "before")["node"]

    log = await JetStreamLog.connect(plane.url)
    try:
        s = log.subjects
        for subject, kind, body in [
            (s.job("default", "poison"), "JobSubmitted", b'{"spec": 5}'),
            (s.card(node, card), "SliceReleased", b'{"card": 1}'),
        ]:
            await log.js.publish(subject, body, headers={TYPE: kind, VERSION: "1"})
        for name in plane.names():
            plane.kill(name)
        for name in plane.names():
            plane.restart(name)  # raises if the service exits before it says "ready"

        assert {r.outcome for r in (await apply(plane.url, pod("after"))).results} == {"accepted"}
        await wait_until(lambda: running("before", "after"), timeout=60, what="a new pod to run")
        owners = {c["uuid"]: c["owners"] for c in await fetch_cards(plane.url, "tessera")}
        assert "serve/before/before" in owners[card]  # the poisoned card kept its booking
        skipped = report.get("undecodable", [])
        assert sorted(x["type"] for x in skipped) == ["JobSubmitted", "SliceReleased"]

        async def parked() -> bool:  # the live consumers park too; never twice
            letters = {n: await log.dead_letters(n) for n in PARKED_BY}
            return {n: len(m) for n, m in letters.items()} == PARKED_BY

        await wait_until(parked, timeout=30, what="each poison message parked once per reader")
        for name in PARKED_BY:
            sources = [m.headers[DLQ_SOURCE] for m in await log.dead_letters(name)]
            assert len(sources) == len(set(sources)), (name, sources)
    finally:
        await log.close()
