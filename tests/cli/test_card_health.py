"""rev-topo findings 2 and 5, as an operator sees them: a node agent fed `npu-smi info` runs two
4-card pods; it is restarted with NPU k `Critical`, then with NPU k missing. The scheduler always
knew (`1/8 CardNotHealth`), but `get cards`, `describe card|node|pod`, `get cards -o json` and
the registration's event line looked as if nothing had happened, and `get nodes` read 8/7 once
the chip dropped out under its pod. The log here is a simulation's, followed by the node's
re-registrations and the ledger events the allocator writes for them (the pure ledger's
`decide`, as `allocator.service._registration_writes` calls it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from contracts.base import Event
from contracts.events import NodeRegistered
from contracts.registry import default_registry
from contracts.subjects import Subjects, subject_of
from services.cli import kubeobjects as ko
from services.cli.describe import describe
from services.cli.events import event_line
from services.cli.get import columns_of, listing_of, node_events, node_row, with_notes
from services.core.ledger import CardState, RegisterCard, RetireCard, decide, fold
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.simulate.engine import load_simulation
from services.core.simulate.report import build_report
from services.core.workload import admit, load_documents
from services.core.workload.devicerequests import hami_parser
from services.nodeagent.inventory import discovered_node
from services.runtime.eventlog.memory import MemoryLog
from services.runtime.eventlog.model import Entry, StoredMessage
from tests.core.scheduling.scenarios import vendors

NPU_SMI = Path(__file__).resolve().parents[1] / "fixtures" / "discovery" / "npu-smi-910b3x8.txt"
SUBJECTS = Subjects("tessera")
#: when the re-registrations were stored (JetStream's header on a direct get)
STAMP = "2026-12-07T22:55:01.123456789Z"
PODS = "".join(f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{limits: {{huawei.com/Ascend910B3: "4"}}}}}}]
""" for name in ("a", "b"))  # fmt: skip


def npu_smi(critical: int | None = None, dropped: int | None = None) -> str:
    """The recorded 8 × 910B3 output with every chip OK but `critical`, and without `dropped`."""
    lines = NPU_SMI.read_text().replace("Critical", "OK      ").splitlines()
    out: list[str] = []
    skip = 0
    for line in lines:
        cells = line.strip("|").split()
        if skip:
            skip -= 1
            continue
        if cells[:2] == [str(dropped), "910B3"]:
            skip = 2  # its second line and the rule after it
            continue
        if cells[:2] == [str(critical), "910B3"]:
            line = line.replace("OK      ", "Critical", 1)
        out.append(line)
    return "\n".join(out) + "\n"


def real1(text: str) -> NodeRegistered:
    return discovered_node("real1", 192_000, 1_572_864, npu_smi=text)


def running() -> list[StoredMessage]:
    """Pods a and b on real1, 4 cards each: the node full."""
    reg = vendors()
    work = admit(load_documents(PODS), hami_parser(reg), reg.resource_names())
    sim = load_simulation(parse_conf(DEFAULT_CONF), reg, [real1(npu_smi())], work)
    sim.run()
    return list(sim.log.messages())


def reregister(messages: list[StoredMessage], node: NodeRegistered) -> list[StoredMessage]:
    """The node agent's new registration and the allocator's ledger events for it: each card
    registered anew (its spec changed), each card it no longer lists retired."""
    registry = default_registry()
    decoded = [(m.subject, registry.decode(m.headers["Tessera-Type"], m.data)) for m in messages
               if m.headers.get("Tessera-Type") in ("CardRegistered", "SliceReserved", "SliceReleased",
                                                    "CardHealthChanged", "CardRetired")]  # fmt: skip
    uuids = sorted({SUBJECTS.parse(s)[1][1] for s, _ in decoded})
    states = {u: fold(u, [e for s, e in decoded if s == SUBJECTS.card("real1", u)]) for u in uuids}  # type: ignore[misc]
    events: list[Event] = [node]
    listed = {c.uuid for c in node.cards}
    for spec in node.cards:
        got = decide(states.get(spec.uuid) or CardState(uuid=spec.uuid), RegisterCard(spec=spec))
        assert isinstance(got, list)
        events += got
    for uuid in uuids:
        if uuid not in listed:
            got = decide(states[uuid], RetireCard())
            assert isinstance(got, list)
            events += got
    out = list(messages)
    for ev in events:
        headers = {**registry.envelope(ev).to_headers(), ko.TIME_HEADER: STAMP}
        out.append(StoredMessage(out[-1].seq + 1, subject_of(SUBJECTS, ev), registry.encode(ev), headers))
    return out


def memory_log(messages: list[StoredMessage]) -> MemoryLog:
    log = MemoryLog(SUBJECTS)

    async def fill() -> None:
        for m in messages:
            await log.append(Entry(m.subject, m.data, dict(m.headers)))

    asyncio.run(fill())
    return log


def b_card(messages: list[StoredMessage]) -> tuple[int, str]:
    """One of pod b's cards: its NPU id and uuid."""
    b = next(p for p in build_report(messages)["pods"] if p["name"] == "b")
    assert b["phase"] == "Running", b
    device = b["devices"][0]
    return device["index"], device["uuid"]


def test_a_critical_chip_is_unhealthy_in_every_view_with_when_and_why() -> None:
    before = running()
    k, uuid = b_card(before)
    messages = reregister(before, real1(npu_smi(critical=k)))
    report = build_report(messages)
    card = next(c for c in report["cards"] if c["uuid"] == uuid)
    registered = next(m for m in messages[len(before):] if m.headers["Tessera-Type"] == "CardRegistered"
                      and uuid in m.data.decode())  # fmt: skip
    assert (card["health"], card["health_since"], card["health_reason"]) == (
        "Unhealthy", registered.seq, "npu-smi Health: Critical")
    assert all("health" not in c for c in report["cards"] if c["uuid"] != uuid)  # their records as they were

    # get cards: a HEALTH column, every row saying its card's state
    cards, _ = listing_of(messages, "cards", None)
    columns = with_notes(columns_of("cards", "table"), cards.rows)
    assert "health" in columns
    assert {r["uuid"]: r["health"] for r in cards.rows} == {c["uuid"]: "Unhealthy" if c["uuid"] == uuid else "Healthy"
                                                            for c in report["cards"]}  # fmt: skip
    # get cards -o json: a field a program can test, on every card
    statuses = {o["metadata"]["name"]: o["status"] for o in cards.objects}
    assert statuses[uuid]["health"] == "Unhealthy" and statuses[uuid]["healthReason"] == "npu-smi Health: Critical"
    assert statuses[uuid]["healthSinceEvent"] == registered.seq
    assert {s["health"] for u, s in statuses.items() if u != uuid} == {"Healthy"}

    # describe card: when (the event and its time) and why; its registration line says so too
    lines = describe("cards", uuid, "default", report, messages, SUBJECTS)
    assert lines is not None
    health = next(line for line in lines if line.startswith("Health:"))
    assert f"Unhealthy since #{registered.seq} 2026-12-07T22:55:01Z (" in health, health
    assert health.endswith("npu-smi Health: Critical"), health
    assert "unhealthy: npu-smi Health: Critical" in event_line(registered)
    assert f"(unhealthy: {uuid})" in event_line(messages[len(before)])  # the node's registration

    # describe pod: the pod on it says so; a pod on healthy cards says nothing new
    pod = describe("pods", "b", "default", report, messages, SUBJECTS)
    assert pod is not None and any(line.startswith("Card health:") and f"{uuid} Unhealthy since" in line
                                   for line in pod), pod  # fmt: skip
    other = describe("pods", "a", "default", report, messages, SUBJECTS)
    assert other is not None and not any(line.startswith("Card health:") for line in other)

    # describe node / get nodes: which card of the node is bad
    nodes = asyncio.run(node_events(memory_log(messages)))
    assert node_row(*nodes[0])["note"] == f"unhealthy: {uuid}"
    node = describe("nodes", "real1", "default", report, messages, SUBJECTS, nodes)
    assert node is not None and any(line.startswith("Card health:") and f"{uuid} Unhealthy since" in line
                                    for line in node), node  # fmt: skip


def test_an_all_healthy_cluster_reads_as_it_did() -> None:
    messages = running()
    report = build_report(messages)
    assert all("health" not in c for c in report["cards"])
    cards, _ = listing_of(messages, "cards", None)
    assert "health" not in with_notes(columns_of("cards", "table"), cards.rows)
    nodes = asyncio.run(node_events(memory_log(messages)))
    assert "note" not in node_row(*nodes[0]) and node_row(*nodes[0])["cards_in_use"] == "8/8"


def test_a_chip_that_drops_out_under_its_pod_is_retired_not_an_overcommit() -> None:
    before = running()
    k, uuid = b_card(before)
    messages = reregister(reregister(before, real1(npu_smi(critical=k))), real1(npu_smi(dropped=k)))
    retired = next(m for m in messages if m.headers["Tessera-Type"] == "CardRetired")

    # get nodes: 7 cards reported, all 7 in use, and the retired one pod b still holds named
    (node,) = asyncio.run(node_events(memory_log(messages)))
    row = node_row(*node)
    assert (row["cards"], row["cards_in_use"]) == ("7×Ascend910B3", "7/7")  # was 8/7
    assert row["note"] == f"retired, still held by pods: {uuid}"

    report = build_report(messages)
    card = next(c for c in report["cards"] if c["uuid"] == uuid)
    assert (card["health"], card["health_since"], card["slices_used"]) == ("Retired", retired.seq, 1)

    cards, _ = listing_of(messages, "cards", None)
    assert next(r for r in cards.rows if r["uuid"] == uuid)["health"] == "Retired"
    pod = describe("pods", "b", "default", report, messages, SUBJECTS)
    assert pod is not None and any(line.startswith("Card health:") and
                                   f"{uuid} Retired since #{retired.seq}" in line and "no longer reports it" in line
                                   for line in pod), pod  # fmt: skip
