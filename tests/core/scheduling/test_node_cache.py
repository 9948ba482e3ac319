"""The per-node result cache (`Session.node_cache`, actions/nodes.py) must never change a decision.

A seeded generator builds clusters (template and hami-core nodes, labels, taints, busy cards,
running and releasing pods) and workloads (whole cards, vNPU templates, soft slices, gangs,
selectors, tolerations, two queues); every session is run with the cache and with the
straightforward evaluation, and the decisions — placements with their cards and scores,
evictions, unschedulable reasons with per-node reasons — must be equal.
"""

from __future__ import annotations

import dataclasses
import random

import msgspec
import pytest

from contracts.devices import CardUsage, MigInstance, OwnedSlice, SliceSpec
from contracts.workloads import DeviceRequest, JobSpec, QueueSpec, TaskSpec, Toleration
from services.core.devices import build_vendors
from services.core.devices.mig import MIG_INFEASIBLE
from services.core.scheduling import snapshot as st
from services.core.scheduling.actions.nodes import (
    FIT_FAILS,
    FIT_IDLE,
    _outcome,
    _state_key,
    shape_of,
)
from services.core.scheduling.config import PluginConf, SchedulerConf, default_conf, parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.decisions import ENQUEUE_REFUSED, GANG_LINE, Decisions
from services.core.scheduling.registry import build_plugins
from services.core.scheduling.session import Session
from services.core.simulate.inventory import load_inventory
from services.core.workload.admission import min_resources
from tests.core.devices.test_mig_carve import a100

CARD = "Ascend910B3"
WHOLE = DeviceRequest(vendor="huawei", type=CARD, count=1, memory_pct=100, exclusive=True)
VIR05 = DeviceRequest(vendor="huawei", type=CARD, count=1, memory=16384, cores=5,
                      template="vir05_1c_16g")  # fmt: skip
VIR10 = DeviceRequest(vendor="huawei", type=CARD, count=1, memory=32768, cores=10,
                      template="vir10_3c_32g")  # fmt: skip
SOFT = DeviceRequest(vendor="huawei", type=CARD, count=1, memory=8192, cores=20, mode="hami-core")
TWO_WHOLE = DeviceRequest(vendor="huawei", type=CARD, count=2, memory_pct=100, exclusive=True)

FULL_CONF = """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.AscendHAMiVNPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 5
"""


def _nodes(rng: random.Random, count: int) -> tuple[st.NodeSnap, ...]:
    """Most nodes are stock (equal but for their names, as in a real pool), so outcomes are
    often shared between nodes; some are stock with 7 of 8 cards taken and a cordon naming card
    7 of n00 (so only n00, one of them, is full); the rest vary in size, labels, taints, mode and
    card usage."""
    inv, kinds = [], []
    for n in range(count):
        roll = 0.0 if n == 0 else rng.random()
        kind = "cordon" if roll < 0.15 else "stock" if roll < 0.6 else "random"
        node: dict[str, object] = {"name": f"n{n:02d}", "cpu": 64, "memory": "512Gi",
                                   "labels": {"zone": "a"}, "devices": [{"type": CARD, "count": 8}]}  # fmt: skip
        if kind == "cordon":
            node["annotations"] = {"hami.io/device-cordon": f"n00-{CARD}-7"}
        if kind == "random":
            node.update({
                "cpu": rng.choice([8, 16, 64]), "memory": rng.choice(["32Gi", "128Gi", "512Gi"]),
                "pods": rng.choice([3, 8, 110]), "labels": {"zone": rng.choice("ab")},
                "devices": [{"type": CARD, "count": rng.choice([0, 2, 4, 8])}],
            })  # fmt: skip
            if rng.random() < 0.3:
                node["annotations"] = {"hami-vnpu-core": "true"}
            if rng.random() < 0.2:
                node["taints"] = ["dedicated=train:NoSchedule"]
        inv.append(node)
        kinds.append(kind)
    out = []
    for ev, kind in zip(
        load_inventory({"nodes": inv}, build_vendors().catalogue), kinds, strict=True
    ):
        cards = []
        for c in ev.cards:
            if kind == "cordon":
                full = c.index < 7
                usage = CardUsage(memory_used=c.memory if full else 0, cores_used=c.cores if full else 0,
                                  slices_used=int(full), exclusive=full)  # fmt: skip
            else:
                used = 0 if kind == "stock" else rng.choice([0, 0, 0, 1, 2, 3])
                usage = CardUsage(memory_used=min(used * 16384, c.memory), cores_used=min(used * 5, c.cores),
                                  slices_used=used)  # fmt: skip
            cards.append(st.CardSnap(c, usage, seq=rng.randint(1, 99)))
        out.append(st.NodeSnap(ev.node, ev.cpu_milli, ev.memory_mib, ev.pods, dict(ev.labels),
                               dict(ev.annotations), tuple(ev.taints), tuple(cards)))  # fmt: skip
    return tuple(out)


def _task(rng: random.Random, name: str, replicas: int) -> TaskSpec:
    device = rng.choice([None, WHOLE, VIR05, VIR05, VIR10, SOFT, SOFT, TWO_WHOLE, VIR05])
    if device is VIR05 and rng.random() < 0.1:  # pinned to cards of a few nodes
        pinned = tuple(f"n{rng.randint(0, 9):02d}-{CARD}-{rng.randint(0, 7)}" for _ in range(3))
        device = msgspec.structs.replace(VIR05, use_uuids=pinned)
    devices = () if device is None else (device,)
    scalars = {f"huawei.com/{CARD}": 1000 * device.count} if device else {}
    annotations = {"huawei.com/vnpu-mode": "hami-core"} if device is SOFT else {}
    if device is not None and rng.random() < 0.15:
        annotations["hami.io/node-scheduler-policy"] = "spread"
    annotations["tessera.io/duration"] = str(rng.randint(1, 10**6))  # differs pod to pod
    return TaskSpec(
        name=name, replicas=replicas, cpu_milli=rng.choice([0, 500, 2000, 8000]),
        memory_mib=rng.choice([0, 1024, 16384]), devices=devices, scalars=scalars,
        annotations=annotations,
        node_selector={"zone": rng.choice("ab")} if rng.random() < 0.2 else {},
        tolerations=(Toleration(key="dedicated", operator="Exists"),) if rng.random() < 0.3 else (),
        priority=rng.choice([0, 0, 10]),
    )  # fmt: skip


def _jobs(rng: random.Random, nodes: tuple[st.NodeSnap, ...], count: int) -> tuple[st.JobSnap, ...]:
    jobs = []
    for j in range(count):
        replicas = rng.choice([1, 1, 1, 2, 4])
        spec = JobSpec(
            namespace="ns", name=f"j{j:02d}", queue=rng.choice(["default", "q2"]),
            kind="Job" if replicas > 1 else "Pod",
            min_available=rng.randint(1, replicas), priority=rng.choice([0, 0, 100]),
            tasks=(_task(rng, "w", replicas),),
        )  # fmt: skip
        phase = rng.choice(["Pending", "Inqueue", "Inqueue", "Running"])
        tasks = []
        for pod, role, i, t in st.task_names(spec):
            status, node = st.PENDING, ""
            if phase == "Running" and rng.random() < 0.6 and not t.devices:
                status = rng.choice([st.RUNNING, st.RUNNING, st.BOUND, st.RELEASING])
                node = rng.choice(nodes).name
            tasks.append(st.TaskSnap(pod, role, i, t, status, node))
        jobs.append(st.JobSnap(spec, created=j + 1, phase=phase, tasks=tuple(tasks)))
    return tuple(jobs)


def random_snapshot(seed: int, large: bool = False) -> st.Snapshot:
    """Small clusters search every node; large ones (> 100 nodes) only a sample, from a start
    that rotates and wraps around."""
    rng = random.Random(seed)
    nodes = _nodes(rng, rng.randint(101, 250) if large else rng.randint(3, 30))
    jobs = _jobs(rng, nodes, rng.randint(100, 200) if large else rng.randint(5, 60))
    queues = (
        st.QueueSnap(QueueSpec(name="default", weight=1), created=0),
        st.QueueSnap(QueueSpec(name="q2", weight=rng.choice([1, 3])), created=0),
    )
    return st.Snapshot(seq=1000 + seed, now=0.0, nodes=nodes, queues=queues, jobs=jobs)


def refusing(snap: st.Snapshot) -> st.Snapshot:
    """Every job asking its first minAvailable pods' requests as its minResources (as Volcano's
    job controller sets them) and each queue capped at 16 cores: `enqueue` then refuses some,
    and the trial placements that explain those refusals (trial.py) search the nodes too."""
    jobs = tuple(dataclasses.replace(j, spec=msgspec.structs.replace(
        j.spec, min_resources=min_resources(j.spec.min_available, j.spec.tasks))) for j in snap.jobs)  # fmt: skip
    queues = tuple(dataclasses.replace(q, spec=msgspec.structs.replace(q.spec, capability={"cpu": 16_000}))
                   for q in snap.queues)  # fmt: skip
    return dataclasses.replace(snap, jobs=jobs, queues=queues)


def run(snapshot: st.Snapshot, conf: SchedulerConf, node_cache: bool) -> Decisions:
    return decide(snapshot, conf, node_cache=node_cache)


def _conf(name: str) -> SchedulerConf:
    if name == "default":
        return default_conf()
    full = parse_conf(FULL_CONF)
    if name == "placement":  # deviceshare scores by the placement policy, ties by node order
        return parse_conf(FULL_CONF.replace("SchedulePolicy: binpack", "SchedulePolicy: tessera"))
    if name == "allocate-twice":  # the second allocate sees nodes changed by evictions
        actions = ("enqueue", "allocate", "preempt", "reclaim", "allocate", "backfill")
        return SchedulerConf(actions, full.tiers)
    return full


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("conf_name", ["default", "full", "allocate-twice", "placement"])
def test_cached_session_decides_like_the_straightforward_one(seed: int, conf_name: str) -> None:
    conf = _conf(conf_name)
    snap = random_snapshot(seed)
    cached = run(snap, conf, node_cache=True)
    assert cached == run(snap, conf, node_cache=False)


@pytest.mark.parametrize("seed", range(6))
def test_cached_session_decides_alike_when_only_a_sample_of_nodes_is_searched(seed: int) -> None:
    snap = random_snapshot(seed, large=True)
    conf = _conf(("default", "full", "placement")[seed % 3])
    assert run(snap, conf, node_cache=True) == run(snap, conf, node_cache=False)


@pytest.mark.parametrize("seed", range(20))
def test_cached_session_explains_refused_gangs_like_the_straightforward_one(seed: int) -> None:
    snap = refusing(random_snapshot(seed))
    conf = _conf(("default", "full")[seed % 2])
    assert run(snap, conf, node_cache=True) == run(snap, conf, node_cache=False)


def test_generator_refuses_gangs_whose_trials_search_the_nodes() -> None:
    """Guard: the refusing case's sessions do try refused gangs on the nodes."""
    tried = 0
    for seed in range(20):
        d = run(refusing(random_snapshot(seed)), _conf(("default", "full")[seed % 2]), node_cache=True)
        tried += sum(1 for u in d.unschedulable if u.reason.startswith(ENQUEUE_REFUSED) and GANG_LINE in u.reason)
    assert tried > 10


def test_generator_exercises_the_interesting_paths() -> None:
    """Guard against a generator that only ever produces trivial sessions."""
    conf = parse_conf(FULL_CONF)
    placed = pipelined = unschedulable = evicted = node_reasons = 0
    for seed in range(20):
        d = run(random_snapshot(seed), conf, node_cache=True)
        placed += sum(len(p.placements) for p in d.placements if not p.pipelined)
        pipelined += sum(len(p.placements) for p in d.placements if p.pipelined)
        unschedulable += len(d.unschedulable)
        node_reasons += sum(len(u.node_reasons) for u in d.unschedulable)
        evicted += len(d.evictions)
    assert placed > 100 and unschedulable > 20 and node_reasons > 50
    assert pipelined > 0 and evicted > 0


def test_cache_is_off_when_a_predicate_plugin_is_not_node_local() -> None:
    """A plugin outside NODE_LOCAL_PLUGINS may read session state: no caching then."""

    class LookAround:
        name = "lookaround"

        def __init__(self, conf: PluginConf) -> None:
            pass

        def on_session_open(self, ssn: Session) -> None:
            pass

        def predicate(self, task: object, node: object) -> None:
            return None

    conf = parse_conf(FULL_CONF)
    assert open_session(random_snapshot(0), conf).node_cache  # decide's default: cached
    assert not open_session(random_snapshot(0), conf, node_cache=False).node_cache
    extra = SchedulerConf(conf.actions, (*conf.tiers, (PluginConf("lookaround"),)))
    plugins = {**build_plugins(), "lookaround": LookAround}
    assert Session(random_snapshot(0), conf, plugins).node_cache
    assert not Session(random_snapshot(0), extra, plugins).node_cache  # type: ignore[arg-type]


def test_outcomes_are_not_shared_between_nodes_when_scores_depend_on_the_node() -> None:
    snap = random_snapshot(0)
    assert Session(snap, _conf("full"), build_plugins()).share_outcomes
    placement = Session(snap, _conf("placement"), build_plugins())
    assert placement.node_cache and not placement.share_outcomes


@pytest.mark.parametrize("node_cache", [True, False])
def test_every_node_change_is_seen_by_the_next_scan(node_cache: bool) -> None:
    """Evict, un-evict, allocate and deallocate each change what fits; a cached outcome from
    before the change must not be served after it."""
    from services.core.scheduling.actions.nodes import predicate_nodes

    busy = TaskSpec(name="w", cpu_milli=8000, memory_mib=1024)
    running = st.JobSnap(JobSpec(namespace="ns", name="old", tasks=(busy,)), created=1,
                         phase="Running", tasks=(st.TaskSnap("old-w-0", "w", 0, busy, st.RUNNING, "n0"),))  # fmt: skip
    want = st.JobSnap(JobSpec(namespace="ns", name="new", tasks=(busy,)), created=2,
                      phase="Inqueue", tasks=(st.TaskSnap("new-w-0", "w", 0, busy),))  # fmt: skip
    snap = st.Snapshot(seq=1, nodes=(st.NodeSnap("n0", 8000, 4096),),
                       queues=(st.QueueSnap(QueueSpec(name="default"), created=0),),
                       jobs=(running, want))  # fmt: skip
    ssn = Session(snap, default_conf(), build_plugins(), node_cache=node_cache)
    old, new = ssn.jobs["ns/old"].tasks["old-w-0"], ssn.jobs["ns/new"].tasks["new-w-0"]
    node = ssn.nodes["n0"]

    def outcome() -> str:
        fit = predicate_nodes(ssn, new, ssn.node_list)
        return "idle" if fit.idle else "future" if fit.future else fit.errors["n0"]

    assert outcome() == "Insufficient cpu"
    ssn.evict_task(old, "preempt")
    assert outcome() == "future"
    ssn.unevict_task(old, st.RUNNING)
    assert outcome() == "Insufficient cpu"
    ssn.deallocate_task(old, st.PENDING)
    assert outcome() == "idle"
    ssn.allocate_task(old, node, (), pipelined=False)
    assert outcome() == "Insufficient cpu"


def test_nodes_whose_mig_instances_lie_apart_do_not_share_an_outcome() -> None:
    """Two A100-80GB nodes with one 1g.10gb each, equal in every total, at placement 5 on `a`
    and 6 on `b`: a 20000 MB ask (a 2g.20gb) fits only `b` (group2 holds a 1g at 6, none at 5).
    Their states used to be keyed alike, so `b` was given `a`'s CardMigTopologyInfeasible."""
    def node(name: str, start: int) -> st.NodeSnap:
        card = msgspec.structs.replace(a100(f"{name}-gpu0"), node=name)
        held = SliceSpec(kind="soft", memory=10240, cores=14,
                         mig=(MigInstance(profile="1g.10gb", start=start, size=1),))  # fmt: skip
        usage = CardUsage(memory_used=10240, cores_used=14, slices_used=1,
                          slices=(OwnedSlice(owner="other/o/o", slice=held),))  # fmt: skip
        return st.NodeSnap(name, 32000, 65536, 110, cards=(st.CardSnap(card, usage, 1),))

    ask = DeviceRequest(vendor="nvidia", type="NVIDIA", count=1, memory=20000)
    task = TaskSpec(name="w", cpu_milli=1000, memory_mib=1024, devices=(ask,),
                    scalars={"nvidia.com/gpu": 1000})  # fmt: skip
    spec = JobSpec(namespace="ns", name="p", queue="default", min_available=1, tasks=(task,))
    tasks = tuple(st.TaskSnap(pod, role, i, ts) for pod, role, i, ts in st.task_names(spec))
    snap = st.Snapshot(seq=5, now=5.0, nodes=(node("a", 5), node("b", 6)),
                       queues=(st.QueueSnap(QueueSpec(name="default", weight=1), created=0),),
                       jobs=(st.JobSnap(spec, created=1, phase="Inqueue", tasks=tasks),))  # fmt: skip

    def outcomes(names: str) -> dict[str, tuple[int, str | float]]:
        ssn = open_session(snap, parse_conf(FULL_CONF))
        assert ssn.share_outcomes
        info = next(iter(ssn.jobs["ns/p"].tasks.values()))
        return {n: _outcome(ssn, info, ssn.nodes[n], shape_of(info)) for n in names}

    alone = {n: outcomes(n)[n] for n in "ab"}  # each node in a session of its own
    assert alone["a"][0] == FIT_FAILS and MIG_INFEASIBLE in str(alone["a"][1])
    assert alone["b"][0] == FIT_IDLE
    assert outcomes("ab") == alone and outcomes("ba") == alone
    ssn = open_session(snap, parse_conf(FULL_CONF))
    assert _state_key(ssn, ssn.nodes["a"]) != _state_key(ssn, ssn.nodes["b"])
