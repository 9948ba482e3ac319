"""Inter-pod affinity and the node caches (issue 22): a task whose outcome reads pods on other
nodes is evaluated afresh, the others keep their caches — so the cached session still decides
exactly like the straightforward one on random clusters where some pods carry terms (required
and preferred, affinity and anti-affinity, by hostname and by zone) and others are selected
by them."""

from __future__ import annotations

import random
from dataclasses import replace

import msgspec
import pytest

from contracts.workloads import LabelRequirement, PodAffinity, PodAffinityTerm, SpreadConstraint
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.interpod import index_of
from tests.core.scheduling.test_node_cache import FULL_CONF, _conf, random_snapshot

APPS = ("web", "db", "cache")


def _term(rng: random.Random, weight: int = 0) -> PodAffinityTerm:
    app = rng.choice(APPS)
    return PodAffinityTerm(
        topology_key=rng.choice(["kubernetes.io/hostname", "zone"]),
        selector=(LabelRequirement(key="app", operator="In", values=(app,)),),
        namespaces=("ns",), weight=weight,
    )  # fmt: skip


def _terms(rng: random.Random) -> PodAffinity | None:
    kind = rng.random()
    if kind < 0.5:
        return None
    if kind < 0.65:
        return PodAffinity(anti_affinity=(_term(rng),))
    if kind < 0.75:
        return PodAffinity(affinity=(_term(rng),))
    return PodAffinity(preferred=(_term(rng, rng.randint(1, 100)),),
                       preferred_anti=(_term(rng, rng.randint(1, 100)),))  # fmt: skip


def _spread(rng: random.Random) -> tuple[SpreadConstraint, ...]:
    if rng.random() < 0.7:
        return ()
    return (SpreadConstraint(
        max_skew=rng.randint(1, 2), topology_key=rng.choice(["kubernetes.io/hostname", "zone"]),
        when_unsatisfiable=rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
        selector=(LabelRequirement(key="app", operator="In", values=(rng.choice(APPS),)),),
        min_domains=rng.choice([0, 0, 3]) if rng.random() < 0.5 else 0,
    ),)  # fmt: skip


def with_terms(snap: st.Snapshot, seed: int) -> st.Snapshot:
    """`snap` with every pod labelled by an app, about half of the jobs carrying terms and a
    third spread constraints."""
    rng = random.Random(seed)
    jobs = []
    for j in snap.jobs:
        specs = {}
        for t in j.spec.tasks:
            labels = {**t.labels, "app": rng.choice(APPS)}
            specs[t.name] = msgspec.structs.replace(
                t, labels=labels, pod_affinity=_terms(rng), spread=_spread(rng)
            )
        spec = msgspec.structs.replace(j.spec, tasks=tuple(specs[t.name] for t in j.spec.tasks))
        tasks = tuple(replace(t, spec=specs[t.role]) for t in j.tasks)
        jobs.append(replace(j, spec=spec, tasks=tasks))
    return replace(snap, jobs=tuple(jobs))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("conf_name", ["default", "full", "allocate-twice"])
def test_cached_session_decides_like_the_straightforward_one_with_pod_terms(
    seed: int, conf_name: str
) -> None:
    conf = _conf(conf_name)
    snap = with_terms(random_snapshot(seed), seed)
    assert decide(snap, conf, node_cache=True) == decide(snap, conf, node_cache=False)


@pytest.mark.parametrize("seed", range(3))
def test_alike_when_only_a_sample_of_nodes_is_searched_with_pod_terms(seed: int) -> None:
    snap = with_terms(random_snapshot(seed, large=True), seed)
    conf = parse_conf(FULL_CONF)
    assert decide(snap, conf, node_cache=True) == decide(snap, conf, node_cache=False)


def test_the_terms_change_decisions_in_the_generated_sessions() -> None:
    """Guard: the generator's terms do bite (else the test above proves nothing)."""
    conf = parse_conf(FULL_CONF)
    changed = 0
    for seed in range(12):
        plain = random_snapshot(seed)
        changed += decide(plain, conf) != decide(with_terms(plain, seed), conf)
    assert changed >= 6


def test_nothing_is_indexed_when_no_pod_has_a_term() -> None:
    ssn = open_session(random_snapshot(3), parse_conf(FULL_CONF))
    idx = index_of(ssn)
    assert not idx.active and not idx.groups
