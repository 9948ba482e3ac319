"""preempt and reclaim for pods that request cards: the future card view (the slices of tasks
evicted in the session free, pipelined ones taken) through the pure core.

The scenario table `tests/fixtures/scenarios/preempt_devices.yaml` holds the one-session cases
(and the e2e table's H4 the whole simulation); here: a discarded statement leaves the session
byte for byte as it was, the two views of a card after an eviction, the audit of H4's log, and
seeded random clusters of running card pods where, after every session, no card holds more than
it can — neither what the ledger will hold (running, bound, releasing and allocated tasks) nor
what the future view promises (everything but the releasing, pipelined included).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import msgspec
import pytest

from contracts.devices import CardSpec, CardUsage, MigInstance, SliceSpec
from contracts.events import SliceAssignment, SliceReleased, SliceReserved
from contracts.owners import owner_key
from contracts.workloads import DeviceRequest, JobSpec, QueueSpec, TaskSpec
from services.core import ledger
from services.core.audit import audit
from services.core.devices import build_vendors
from services.core.scheduling import snapshot as st
from services.core.scheduling.actions.preempt import _other_job_same_queue, preempt
from services.core.scheduling.actions.reclaim import reclaim_for
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.model import ALLOCATED_STATUSES, CardInfo, NodeInfo, TaskInfo
from services.core.scheduling.record import configured
from services.core.scheduling.registry import build_actions
from services.core.scheduling.session import Session
from services.core.scheduling.statement import Statement
from services.core.simulate.engine import load_simulation
from services.core.simulate.inventory import load_inventory
from services.core.simulate.report import build_report
from services.runtime.eventlog.model import StoredMessage
from tests.core.scheduling.scenarios import PREEMPT_CONF as CONF
from tests.core.scheduling.scenarios import Scenario, _simulation, engine_log, load_table

TABLE = {sc.name: sc for sc in load_table("preempt_devices")}
CARD = "Ascend910B3"


def session_of(sc: Scenario) -> Session:
    sim = _simulation(sc, cycles=0)
    sim.run()
    return open_session(sim.projection.snapshot(), parse_conf(sc.conf))


def _resource(r: object) -> object:
    if isinstance(r, dict):  # the queue plugins keep theirs as maps
        return sorted(r.items())
    return (r.cpu, r.memory, r.pods, sorted(r.scalars.items()))  # type: ignore[attr-defined]


def state_bytes(ssn: Session) -> bytes:
    """Everything a statement may change (nodes' resources and cards, tasks, jobs, the queue
    plugins' shares, eviction reasons), canonically encoded; caches left out."""
    nodes = [
        (n.name, _resource(n.idle), _resource(n.used), _resource(n.releasing),
         _resource(n.pipelined), list(n.tasks),
         [(c.spec.uuid, c.usage, c.exclusive, c.releasing) for c in n.cards])
        for n in ssn.node_list
    ]  # fmt: skip
    tasks = [
        (t.uid, t.status, t.node, t.slices)
        for j in ssn.jobs.values() for t in j.tasks.values()
    ]  # fmt: skip
    jobs = [(j.key, _resource(j.allocated), j.ready_task_num()) for j in ssn.jobs.values()]
    shares = []
    for name in ("proportion", "drf", "capacity"):
        plugin = ssn.plugins.get(name)
        for key, attr in sorted(getattr(plugin, "attrs", {}).items()):
            shares.append((name, key, _resource(attr.allocated), attr.share))
    state = (nodes, tasks, jobs, shares, sorted(ssn.eviction_reasons.items()))
    return msgspec.msgpack.Encoder(order="deterministic").encode(state)


def _task(ssn: Session, pod: str) -> TaskInfo:
    return next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.pod == pod)


@pytest.mark.parametrize("name", ["P1", "P2", "P4", "P6"])
def test_discarding_a_preemption_restores_the_session_byte_for_byte(name: str) -> None:
    ssn = session_of(TABLE[name])
    before = state_bytes(ssn)
    task = _task(ssn, "preemptor-a" if name == "P4" else "preemptor")
    stmt = Statement(ssn)
    queue = ssn.queues[ssn.jobs[task.job].queue]
    assert preempt(ssn, stmt, task, queue, _other_job_same_queue(ssn, task))
    assert [op for op, _, _ in stmt.ops] == ["evict", "pipeline"]
    assert task.status == st.PIPELINED and task.slices
    assert state_bytes(ssn) != before
    stmt.discard()
    assert state_bytes(ssn) == before


def test_discarding_a_reclaim_restores_the_session_byte_for_byte() -> None:
    ssn = session_of(TABLE["R1"])
    before = state_bytes(ssn)
    task = _task(ssn, "want-0")
    stmt = Statement(ssn)
    assert reclaim_for(ssn, stmt, ssn.queues["q2"], task)
    assert [op for op, _, _ in stmt.ops] == ["evict", "pipeline"]
    stmt.discard()
    assert state_bytes(ssn) == before


def test_an_evicted_slice_is_still_held_now_and_free_in_the_future_view() -> None:
    """The allocator's ledger holds the victim's card until it is released: an allocation now
    must not get it, the pipelined preemptor does; two exclusive bookings on one card undo to
    an exclusive card."""
    ssn = session_of(TABLE["P1"])
    node = ssn.nodes["n1"]
    victim, task = _task(ssn, "victim"), _task(ssn, "preemptor")
    stmt = Statement(ssn)
    assert preempt(ssn, stmt, task, ssn.queues["default"], _other_job_same_queue(ssn, task))
    assert victim.status == st.RELEASING
    (spec, now), = ssn.card_view(node)
    (_, future), = ssn.card_view(node, future=True)
    assert (now.slices_used, now.memory_used, now.exclusive) == (2, 2 * spec.memory, True)
    assert (future.slices_used, future.memory_used, future.exclusive) == (1, spec.memory, True)
    assert ssn.predicate(task, node) is not None  # nothing fits the card now
    stmt.ops.pop()  # undo only the pipelined booking: the card is the victim's, exclusive
    ssn.deallocate_task(task, st.PENDING)
    (_, now), = ssn.card_view(node)
    (_, future), = ssn.card_view(node, future=True)
    assert (now.slices_used, now.exclusive) == (1, True)
    assert (future.slices_used, future.exclusive) == (0, False)


def test_the_preemption_log_audits_clean_and_releases_before_it_reserves() -> None:
    """H4 through the simulation: the victim's slice is released, then the preemptor's is
    reserved on the same card; no card is over committed at any sequence."""
    sc = next(s for s in load_table("e2e") if s.name == "H4")
    messages = engine_log(sc)
    events = list(_decoded(messages))
    report = build_report(messages)
    findings = audit(events, report["pods"])
    assert findings.clean, (findings.broken, findings.unsettled)
    card = f"n1-{CARD}-0"
    ledger_steps = [(type(e).__name__, e.owner) for _, e in events
                    if isinstance(e, SliceReserved | SliceReleased) and e.card == card]  # fmt: skip
    assert ledger_steps == [
        ("SliceReserved", owner_key("default", "victim", "victim")),
        ("SliceReleased", owner_key("default", "victim", "victim")),
        ("SliceReserved", owner_key("default", "urgent", "preemptor")),
    ]


def _decoded(messages: list[StoredMessage]) -> Iterator[tuple[int, object]]:
    from contracts.registry import default_registry

    registry = default_registry()
    for m in messages:
        yield m.seq, registry.decode(m.headers["Tessera-Type"], m.data)


# --- seeded random clusters of running card pods -----------------------------------------------

WHOLE = DeviceRequest(vendor="huawei", type=CARD, count=1, memory_pct=100, exclusive=True)
VIR05 = DeviceRequest(vendor="huawei", type=CARD, count=1, memory=16384, cores=5,
                      template="vir05_1c_16g")  # fmt: skip
VIR10 = DeviceRequest(vendor="huawei", type=CARD, count=1, memory=32768, cores=10,
                      template="vir10_3c_32g")  # fmt: skip
TWO = DeviceRequest(vendor="huawei", type=CARD, count=2, memory_pct=100, exclusive=True)
SLICE_OF = {
    id(WHOLE): SliceSpec(kind="whole", memory=65536, cores=20, exclusive=True),
    id(VIR05): SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g"),
    id(VIR10): SliceSpec(kind="template", memory=32768, cores=10, template="vir10_3c_32g"),
}


def random_cluster(seed: int) -> st.Snapshot:
    """Nodes of 1-4 cards, most of them taken by running pods of low or middle priority
    (preemptable or not, in two queues, q1 reclaimable; some releasing) whose slices are on the
    ledgers, beside cpu-only ones; pending pods of every priority asking for whole cards, two
    cards or template slices."""
    rng = random.Random(seed)
    inv = [{"name": f"n{i}", "cpu": rng.choice([4, 8, 64]), "memory": "256Gi",
            "devices": [{"type": CARD, "count": rng.randint(1, 4)}]}
           for i in range(rng.randint(1, 4))]  # fmt: skip
    registered = load_inventory({"nodes": inv}, build_vendors().catalogue)
    cards = {c.uuid: ledger.CardState(uuid=c.uuid, spec=c) for ev in registered for c in ev.cards}
    jobs: list[st.JobSnap] = []
    for j in range(rng.randint(6, 20)):
        running = j < 10 and rng.random() < 0.8
        device = rng.choice([WHOLE, VIR05, VIR10, None] if running else [WHOLE, VIR05, VIR10, TWO])
        devices = (device,) if device else ()
        scalars = {f"huawei.com/{CARD}": 1000 * device.count} if device else {}
        task = TaskSpec(name="w", cpu_milli=rng.choice([1000, 4000] if device is None else [0, 1000]),
                        devices=devices, scalars=scalars, preemptable=rng.random() < 0.7)  # fmt: skip
        spec = JobSpec(namespace="ns", name=f"j{j:02d}", queue=rng.choice(["q1", "q2"]),
                       priority=rng.choice([0, 10] if running else [0, 10, 100]), tasks=(task,))  # fmt: skip
        pod = st.task_names(spec)[0][0]
        snap = st.TaskSnap(pod, "w", 0, task)
        if running and device is None:  # holds cpu only, beside the card pods
            snap = dataclasses.replace(snap, status=st.RUNNING, node=rng.choice(registered).node)
        elif running:
            snap = _booked(rng, cards, registered, spec, snap, SLICE_OF[id(device)])
        phase = "Running" if snap.status == st.RUNNING else "Inqueue"
        if snap.status == st.RUNNING and rng.random() < 0.15:  # being deleted, its slice booked
            snap = dataclasses.replace(snap, status=st.RELEASING)
        jobs.append(st.JobSnap(spec, created=j + 1, phase=phase, tasks=(snap,)))
    nodes = tuple(
        st.NodeSnap(ev.node, ev.cpu_milli, ev.memory_mib, ev.pods,
                    cards=tuple(st.CardSnap(c, cards[c.uuid].usage, 1) for c in ev.cards))
        for ev in registered
    )  # fmt: skip
    queues = (st.QueueSnap(QueueSpec(name="q1", weight=1, reclaimable=True), created=0),
              st.QueueSnap(QueueSpec(name="q2", weight=1), created=0))  # fmt: skip
    return st.Snapshot(seq=100 + seed, nodes=nodes, queues=queues, jobs=tuple(jobs))


def _booked(rng: random.Random, cards: dict[str, ledger.CardState], registered: list,
            spec: JobSpec, snap: st.TaskSnap, piece: SliceSpec) -> st.TaskSnap:  # fmt: skip
    """The pod running on a random card the ledger takes its slice on (else left pending)."""
    ev = rng.choice(registered)
    card = rng.choice(ev.cards)
    owner = owner_key(spec.namespace, spec.name, snap.pod)
    got = ledger.decide(cards[card.uuid], ledger.ReserveSlice(owner, piece))
    if isinstance(got, ledger.Rejection):
        return snap
    for e in got:
        cards[card.uuid] = ledger.evolve(cards[card.uuid], e)
    assignment = SliceAssignment(card=card.uuid, node=ev.node, slice=piece)
    return dataclasses.replace(snap, status=st.RUNNING, node=ev.node, slices=(assignment,))


def overcommitted(ssn: Session) -> list[str]:
    """Cards whose holders do not fit them: in the ledger's view (running, bound, releasing and
    allocated tasks) or in the future view (all but the releasing, pipelined ones included)."""
    problems = []
    for node in ssn.node_list:
        for card in node.cards:
            for view, statuses in (("now", ALLOCATED_STATUSES | {st.RELEASING}),
                                   ("future", ALLOCATED_STATUSES | {st.PIPELINED})):  # fmt: skip
                held = [s.slice for t in node.tasks.values() if t.status in statuses
                        for s in t.slices if s.card == card.spec.uuid]  # fmt: skip
                problems += [f"{card.spec.uuid} {view}: {p}" for p in _unfit(card.spec, held)]
            problems += _view_mismatch(ssn, node, card)
    return problems


def _unfit(spec: CardSpec, held: list[SliceSpec]) -> list[str]:
    out = []
    if sum(s.memory for s in held) > spec.memory:
        out.append("memory")
    if sum(s.cores for s in held) > spec.cores:
        out.append("cores")
    if len(held) > spec.split_count:
        out.append("slices")
    if any(ledger.is_exclusive(s) for s in held) and len(held) > 1:
        out.append("exclusive slice not alone")
    return out


def _view_mismatch(ssn: Session, node: NodeInfo, card: CardInfo) -> list[str]:
    """The session's future view of a card must count exactly its non-releasing holders."""
    held = [s.slice for t in node.tasks.values() if t.status != st.RELEASING
            for s in t.slices if s.card == card.spec.uuid]  # fmt: skip
    u = card.future_usage()
    got = (u.memory_used, u.cores_used, u.slices_used, u.exclusive)
    want = (sum(s.memory for s in held), sum(s.cores for s in held), len(held),
            any(ledger.is_exclusive(s) for s in held))  # fmt: skip
    return [] if got == want else [f"{card.spec.uuid} future view {got}, holders {want}"]


def _run(snap: st.Snapshot) -> Session:
    conf = parse_conf(CONF)
    ssn = open_session(snap, conf)
    actions = build_actions()
    for name in conf.actions:
        actions[name].execute(ssn)
    return ssn


@pytest.mark.parametrize("seed", range(100))
def test_no_card_is_over_committed_after_preempt_and_reclaim(seed: int) -> None:
    snap = random_cluster(seed)
    ssn = _run(snap)
    assert overcommitted(ssn) == []
    assert decide(snap, parse_conf(CONF)) == decide(snap, parse_conf(CONF))  # deterministic


def test_random_clusters_preempt_and_reclaim_for_cards() -> None:
    """Guard against a generator whose sessions never evict for a card pod."""
    evicted = pipelined = 0
    for seed in range(100):
        d = decide(random_cluster(seed), parse_conf(CONF))
        evicted += len(d.evictions)
        pipelined += sum(1 for p in d.placements if p.pipelined for tp in p.placements if tp.slices)
    assert evicted >= 30 and pipelined >= 20, (evicted, pipelined)


# --- a carved MIG card (HAMi's chart geometries) -------------------------------------------------

MIG_WORKLOAD = """
{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high-priority}, value: 100000}
---
{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low-priority}, value: 10}
---
{apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup, metadata: {name: low, namespace: default}, spec: {minMember: 1, priorityClassName: low-priority}, status: {phase: Running}}
---
{apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup, metadata: {name: high, namespace: default}, spec: {minMember: 1, priorityClassName: high-priority}, status: {phase: Inqueue}}
---
{apiVersion: v1, kind: Pod, metadata: {name: victim, namespace: default, annotations: {scheduling.k8s.io/group-name: low}}, spec: {nodeName: n1, containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: '1', nvidia.com/gpumem: '40000'}}}]}, status: {phase: Running}}
---
{apiVersion: v1, kind: Pod, metadata: {name: preemptor, namespace: default, annotations: {scheduling.k8s.io/group-name: high}}, spec: {containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: '1', nvidia.com/gpumem: '70000'}}}]}}
"""
MIG_CONF = CONF.replace("deviceshare.AscendHAMiVNPUEnable: true", "deviceshare.VGPUEnable: true")


def _mig_session(mode: str) -> Session:
    """The victim holds 40000 MB of an A100-80GB (a 3g.40gb instance when carved), the
    preemptor asks 70000 MB (only a 7g.79gb holds it: the whole card)."""
    from services.core.devices.catalogue import load_catalogue
    from services.core.workload import admit, load_documents
    from services.core.workload.devicerequests import hami_parser
    from tests.core.devices.test_mig_carve import CHART

    reg = build_vendors(load_catalogue(CHART))
    card = {"type": "NVIDIA-A100-SXM4-80GB", "count": 1, "memory": 81920, "splitCount": 7}
    if mode:
        card["mode"] = mode
    inventory = {"nodes": [{"name": "n1", "cpu": 64, "memory": "512Gi", "devices": [card]}]}
    workload = admit(load_documents(MIG_WORKLOAD), hami_parser(reg), reg.resource_names())
    assert not workload.rejections
    sim = load_simulation(parse_conf(MIG_CONF), reg, load_inventory(inventory, reg.catalogue),
                          workload, cycles=0,
                          config=configured(MIG_CONF, scheduler="simulate", mode="simulate"))  # fmt: skip
    sim.run()
    return open_session(sim.projection.snapshot(), parse_conf(MIG_CONF))


@pytest.mark.parametrize("mode", ["", "mig"])
def test_a_preemption_frees_a_mig_instance_as_it_frees_a_soft_slice(mode: str) -> None:
    """The victim's MIG instance is free in the future view once it is evicted (it stayed
    taken there: the preemptor never fit, nothing was evicted on a carved card); now, while
    the allocator's ledger still holds it, it is taken."""
    ssn = _mig_session(mode)
    node, victim, task = ssn.nodes["n1"], _task(ssn, "victim"), _task(ssn, "preemptor")
    assert bool(victim.slices[0].slice.mig) == (mode == "mig")
    stmt = Statement(ssn)
    assert preempt(ssn, stmt, task, ssn.queues["default"], _other_job_same_queue(ssn, task))
    assert victim.status == st.RELEASING and task.status == st.PIPELINED
    (got,) = task.slices
    assert got.card == victim.slices[0].card and got.slice.memory >= 70000
    if mode == "mig":
        assert [(i.profile, i.start) for i in got.slice.mig] == [("7g.79gb", 0)]
    (card,) = node.cards
    def instances(u: CardUsage) -> list[tuple[MigInstance, ...]]:
        return [o.slice.mig for o in u.slices if o.slice.mig]

    # now both instances are held (the victim's until its release); in the future view only
    # the pipelined one
    assert instances(card.usage) == ([victim.slices[0].slice.mig, got.slice.mig] if mode else [])
    assert instances(card.future_usage()) == ([got.slice.mig] if mode else [])
    stmt.discard()
    assert card.future_usage() == card.usage  # undone: the victim's instance taken again
