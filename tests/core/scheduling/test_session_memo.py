"""A session memo (memo.py) must never change a decision, nor a session's input digests.

A seeded generator evolves a cluster session after session the way the projection does:
placements are committed (cards booked), pods finish and are evicted (cards released), nodes
change (labels, card health, other schedulers' pods, lost and back) and jobs arrive, while
every node and job nothing touched keeps its frozen snapshot object (and every card spec nothing
touched keeps its own: the queue shares take the last session's cluster-wide part over). Each session is decided
with the memo carried from the last one and from scratch, and the two must be equal; some
snapshots are decided twice in a row, so a node a session changed without its decisions being
applied (a gang it could not complete, a pipelined pod) must not be taken over as it was left.
The simulator's own run is held to the same: every session's snapshot equals one frozen afresh
and its decisions equal a from-scratch session's.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from pathlib import Path

import msgspec
import pytest

from contracts.devices import CardUsage, SliceSpec
from contracts.events import SchedulerConfigured, SliceAssignment
from services.core.scheduling import record
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import SchedulerConf, default_conf, parse_conf
from services.core.scheduling.decide import decide
from services.core.scheduling.decisions import Decisions
from services.core.scheduling.memo import SessionMemo
from services.core.scheduling.plugins import shares
from tests.core.scheduling.test_node_cache import FULL_CONF, _jobs, _nodes

CONFIG = SchedulerConfigured(scheduler="test", conf="", device_config="", mode="simulate")


def _book(usage: CardUsage, piece: SliceSpec, sign: int, whole: bool) -> CardUsage:
    return msgspec.structs.replace(
        usage, memory_used=max(0, usage.memory_used + sign * piece.memory),
        cores_used=max(0, usage.cores_used + sign * piece.cores),
        slices_used=max(0, usage.slices_used + sign), exclusive=whole and sign > 0,
    )  # fmt: skip


class Cluster:
    """Frozen snapshots of an evolving cluster: a changed node or job gets a new object, the
    others keep theirs (as `ClusterProjection.snapshot` hands them out)."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.nodes = {n.name: n for n in _nodes(rng, rng.randint(4, 24))}
        self.jobs = {j.key: j for j in _jobs(rng, tuple(self.nodes.values()), rng.randint(5, 30))}
        self.created = len(self.jobs)
        self.seq = 1000

    def snapshot(self) -> st.Snapshot:
        self.seq += 1
        queues = (st.QueueSnap(st.QueueSpec(name="default", weight=1), created=0),
                  st.QueueSnap(st.QueueSpec(name="q2", weight=2), created=0))  # fmt: skip
        return st.Snapshot(seq=self.seq, now=float(self.seq), nodes=tuple(self.nodes.values()),
                           queues=queues, jobs=tuple(self.jobs.values()))  # fmt: skip

    def _cards(self, node: str, slices: tuple[SliceAssignment, ...], sign: int) -> None:
        n = self.nodes.get(node)
        if n is None or not slices:
            return
        by_uuid = {s.card: s for s in slices}
        cards = tuple(
            dataclasses.replace(c, usage=_book(c.usage, by_uuid[c.spec.uuid].slice, sign,
                                               by_uuid[c.spec.uuid].slice.kind == "whole"))
            if c.spec.uuid in by_uuid else c
            for c in n.cards
        )  # fmt: skip
        self.nodes[node] = dataclasses.replace(n, cards=cards)

    def _task(self, key: str, pod: str, **change: object) -> st.TaskSnap:
        job = self.jobs[key]
        old = next(t for t in job.tasks if t.pod == pod)
        new = dataclasses.replace(old, **change)  # type: ignore[arg-type]
        self.jobs[key] = dataclasses.replace(job, tasks=tuple(new if t.pod == pod else t for t in job.tasks))
        return old

    def apply(self, d: Decisions) -> None:
        """Commit the placements (not the pipelined ones), evict the victims."""
        for jp in d.placements:
            key = f"{jp.namespace}/{jp.name}"
            if jp.pipelined or key not in self.jobs:
                continue
            for p in jp.placements:
                self._task(key, p.task, status=st.RUNNING, node=p.node, slices=p.slices)
                self._cards(p.node, p.slices, +1)
            if self.jobs[key].phase != "Running":
                self.jobs[key] = dataclasses.replace(self.jobs[key], phase="Running")
        for phase in d.phases:
            key = f"{phase.namespace}/{phase.name}"
            if key in self.jobs and self.jobs[key].phase == "Pending":
                self.jobs[key] = dataclasses.replace(self.jobs[key], phase=phase.phase)
        for e in d.evictions:
            key = f"{e.namespace}/{e.name}"
            old = self._task(key, e.task, status=st.PENDING, node="", slices=())
            self._cards(old.node, old.slices, -1)

    def churn(self) -> None:
        """Some pods end, some nodes change, some jobs arrive."""
        rng = self.rng
        for key, job in list(self.jobs.items()):
            for t in job.tasks:
                if t.status in (st.RUNNING, st.BOUND) and rng.random() < 0.15:
                    end = rng.choice([st.SUCCEEDED, st.PENDING, st.RELEASING])
                    self._task(key, t.pod, status=end, node=t.node if end == st.RELEASING else "",
                               slices=t.slices if end == st.RELEASING else ())  # fmt: skip
                    if end != st.RELEASING:
                        self._cards(t.node, t.slices, -1)
        for name, n in list(self.nodes.items()):
            roll = rng.random()
            if roll < 0.04:
                self.nodes[name] = dataclasses.replace(n, labels={**n.labels, "zone": rng.choice("ab")})
            elif roll < 0.07:
                self.nodes[name] = dataclasses.replace(n, ready=not n.ready)
            elif roll < 0.10:
                self.nodes[name] = dataclasses.replace(n, held=(rng.choice([0, 4000]), 0, rng.choice([0, 2])))
            elif roll < 0.13 and n.cards:
                i = rng.randrange(len(n.cards))
                c = n.cards[i]
                if rng.random() < 0.5:  # the device plugin's health (a new usage)
                    card = dataclasses.replace(c, usage=msgspec.structs.replace(c.usage, healthy=not c.usage.healthy))
                else:  # HAMi's (CardHealthChanged: a new spec), or registered again smaller
                    card = dataclasses.replace(c, spec=msgspec.structs.replace(
                        c.spec, healthy=not c.spec.healthy, memory=c.spec.memory // rng.choice([1, 2])))  # fmt: skip
                self.nodes[name] = dataclasses.replace(n, cards=(*n.cards[:i], card, *n.cards[i + 1:]))
        for job in _jobs(rng, tuple(self.nodes.values()), rng.randint(0, 4)):
            self.created += 1
            spec = msgspec.structs.replace(job.spec, name=f"a{self.created:03d}")
            self.jobs[f"{spec.namespace}/{spec.name}"] = dataclasses.replace(
                job, spec=spec, created=self.created)


def scratch(snap: st.Snapshot, conf: SchedulerConf) -> Decisions:
    """A session that takes nothing over: no memo, and no queue shares of the last session
    (shares.py `_LAST`, whose cluster-wide part a session takes over for the same card specs)."""
    shares._LAST.clear()
    return decide(snap, conf)


def _conf(name: str) -> SchedulerConf:
    if name == "default":
        return default_conf()
    if name == "binpack-placement":
        return parse_conf(FULL_CONF.replace("SchedulePolicy: binpack", "SchedulePolicy: tessera"))
    return parse_conf(FULL_CONF)  # preempt and reclaim: evictions


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("conf_name", ["default", "full", "binpack-placement"])
def test_a_session_with_the_memo_decides_like_one_from_scratch(seed: int, conf_name: str) -> None:
    conf = _conf(conf_name)
    cluster = Cluster(seed)
    memo = SessionMemo()
    kept = 0
    for _step in range(12):
        snap = cluster.snapshot()
        for _again in range(2 if cluster.rng.random() < 0.3 else 1):
            before = memo.kept
            got = decide(snap, conf, memo=memo)
            assert got == scratch(snap, conf), f"step {_step}: the memo changed the decisions"
            kept += memo.kept - before
            assert record.input_digests(snap, CONFIG, memo) == record.input_digests(snap, CONFIG)
        cluster.apply(got)
        cluster.churn()
    assert kept, "no node was ever taken over: the test exercises nothing"


def test_a_node_the_last_session_changed_is_built_afresh() -> None:
    """The same snapshot twice: the first session booked pods on nodes (a gang it could not
    complete is put back, a pipelined pod stays booked in the session); the second must not
    take those nodes over as the first left them."""
    for seed in range(40):
        cluster = Cluster(seed)
        conf = _conf("full")
        snap = cluster.snapshot()
        memo = SessionMemo()
        first = decide(snap, conf, memo=memo)
        assert decide(snap, conf, memo=memo) == first == scratch(snap, conf)


def test_input_digests_from_kept_encodings_equal_the_whole_encoding() -> None:
    """msgpack's array header before the elements' encodings is the list's encoding, for the
    three sizes of header."""
    for n in (0, 1, 15, 16, 17, 65535, 65536):
        items = [(i, "x") for i in range(n)]
        parts = [record._ENCODER.encode(x) for x in items]
        assert record._digest_of_list(n, parts) == record._digest(items)


def _trace(rng: random.Random, pods: int) -> str:
    """Pods arriving over time on a small GPU cluster, some of a higher priority (they evict)."""
    docs = ["apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: qa}\nspec: {weight: 1, reclaimable: true}\n",
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: qb}\nspec: {weight: 3, reclaimable: true}\n"]  # fmt: skip
    for i in range(pods):
        gpu = rng.choice(['"nvidia.com/gpu": "1"', '"nvidia.com/gpu": "2"',
                          '"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "30"', ""])  # fmt: skip
        limits = ", ".join(x for x in (f'"cpu": "{rng.choice([1000, 4000, 16000])}m"', '"memory": "4096Mi"', gpu) if x)
        docs.append(
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i:03d}\n  annotations: "
            f'{{"tessera.io/arrive-at": "{rng.randint(0, 400)}", "tessera.io/duration": "{rng.randint(5, 200)}", '
            f'"scheduling.volcano.sh/queue-name": "{rng.choice(["qa", "qb"])}"}}\n'
            f"spec:\n  priority: {rng.choice([0, 0, 100])}\n  containers:\n  - name: c\n    image: x\n"
            f"    resources: {{limits: {{{limits}}}}}\n"
        )  # fmt: skip
    return "---\n".join(docs)


INVENTORY = """nodes:
  - {name: gpu, count: 6, cpu: 32000m, memory: 131072Mi, devices: [{type: NVIDIA-A100, count: 4, memory: 40960}]}
  - {name: big, count: 2, cpu: 64000m, memory: 262144Mi, devices: [{type: NVIDIA-A100, count: 8, memory: 81920}]}
  - {name: cpu, count: 3, cpu: 16000m, memory: 65536Mi}
"""


@pytest.mark.parametrize("seed", range(3))
def test_the_simulators_sessions_with_the_memo_decide_like_sessions_from_scratch(
    seed: int, tmp_path: Path
) -> None:
    """Through the projection's own fold: every session's snapshot keeps the objects of the
    nodes and jobs nothing changed, equals one frozen afresh, and the memo's decisions equal
    a from-scratch session's."""
    from services.cli.simulate import _build
    from services.core.simulate import engine

    (tmp_path / "inv.yaml").write_text(INVENTORY)
    (tmp_path / "wl.yaml").write_text(_trace(random.Random(seed), 60))
    args = argparse.Namespace(inventory=str(tmp_path / "inv.yaml"), workload=[str(tmp_path / "wl.yaml")],
                              scheduler_conf=None, device_config=None, cycles=None, until=None)  # fmt: skip
    sim = _build(args)
    sessions = 0
    real = engine.decide

    def checked(snap: st.Snapshot, conf: SchedulerConf, *, memo: SessionMemo | None = None) -> Decisions:
        nonlocal sessions
        p = sim.projection
        again = p.snapshot()
        assert all(a is b for a, b in zip(snap.nodes, again.nodes, strict=True))
        kept = p._node_snaps, p._job_snaps
        p._node_snaps, p._job_snaps = {}, {}
        assert dataclasses.replace(p.snapshot(), now=snap.now) == snap  # as frozen afresh
        p._node_snaps, p._job_snaps = kept
        got = real(snap, conf, memo=memo)
        assert got == scratch(snap, conf)
        sessions += 1
        return got

    engine.decide, saved = checked, engine.decide  # type: ignore[assignment]
    try:
        sim.run()
    finally:
        engine.decide = saved
    assert sessions > 10 and sim.memo.kept
