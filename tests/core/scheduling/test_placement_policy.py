"""`deviceshare.SchedulePolicy: tessera | fgd` drives the scheduler with the placement package.

The claim checked here: a scheduling session configured with a placement policy binds every pod
to the node *and card* that the benchmark's `Placer` (the openb replay's engine) chooses for the
same cluster, the same pods in the same order and the same target workload. The cluster mixes
card counts, card models and CPU per card so that the policies actually disagree with HAMi's
default order (checked too).
"""

from __future__ import annotations

import random

import pytest

from benchmarks.openb_trace import (
    arrival_sequence,
    capacity_milli,
    data_dir,
    load_nodes,
    load_trace,
)
from contracts.devices import CardSpec
from contracts.workloads import DeviceRequest, JobSpec, QueueSpec, TaskSpec
from services.core.placement import (
    POLICIES,
    NodeView,
    Placer,
    Request,
    TargetWorkload,
    cards_by_model,
)
from services.core.scheduling import snapshot as st
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.plugins.deviceshare import DeviceSharePlugin
from services.core.scheduling.plugins.placementrank import ClusterCards, card_free_milli, node_view

CARD_MEMORY = 10_000  # MB: a multiple of 100 keeps HAMi's percent memory exact

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: {policy}
      deviceshare.ScheduleWeight: 1
"""

#: (name, cpu milli, memory MiB, model, cards)
NODES = [
    ("n0", 16_000, 64_000, "NVIDIA-T4", 2),
    ("n1", 24_000, 96_000, "NVIDIA-V100", 4),
    ("n2", 96_000, 256_000, "NVIDIA-T4", 2),
    ("n3", 32_000, 128_000, "NVIDIA-V100", 8),
    ("n4", 64_000, 128_000, "NVIDIA-A10", 4),
    ("n5", 8_000, 32_000, "NVIDIA-V100", 1),
]

#: openb-like shapes: (cpu milli, memory MiB, cards, per-card milli)
SHAPES = [
    (4_000, 8_000, 1, 1000),
    (3_000, 8_000, 1, 810),
    (8_000, 16_000, 1, 470),
    (4_000, 8_000, 1, 320),
    (6_000, 16_000, 0, 0),
    (4_000, 8_000, 1, 160),
    (12_000, 32_000, 2, 1000),
    (2_000, 4_000, 1, 650),
]


def pods(n: int, seed: int) -> list[tuple[int, int, int, int]]:
    rng = random.Random(seed)
    return [rng.choice(SHAPES) for _ in range(n)]


def card(node: str, i: int, model: str) -> st.CardSnap:
    """A soft-sliceable NVIDIA card; HAMi matches the request type "NVIDIA" in the card type."""
    kind = model if model.startswith("NVIDIA") else f"NVIDIA-{model}"
    spec = CardSpec(uuid=f"{node}-c{i}", node=node, index=i, type=kind, vendor="nvidia",
                    memory=CARD_MEMORY, cores=100, split_count=10)  # fmt: skip
    return st.CardSnap(spec)


def cluster() -> list[NodeView]:
    return [NodeView(n, cpu, mem, model, (1000,) * k) for n, cpu, mem, model, k in NODES]


def requests(sequence: list[tuple[int, int, int, int]]) -> list[Request]:
    return [Request(cpu, mem, k, milli) for cpu, mem, k, milli in sequence]


def snapshot(nodes: list[NodeView], pods: list[Request]) -> st.Snapshot:
    """Empty nodes in inventory order and one single-pod job per request, created in order."""
    snaps = tuple(
        st.NodeSnap(n.name, n.cpu_milli, n.memory_mib, 1001,
                    cards=tuple(card(n.name, i, n.model) for i in range(len(n.cards))))
        for n in nodes
    )  # fmt: skip
    jobs = []
    for i, r in enumerate(pods):
        pct = r.card_milli // 10
        devices = (
            (DeviceRequest("nvidia", "NVIDIA", r.num_cards, memory_pct=pct, cores=pct),)
            if r.num_cards
            else ()
        )
        task = TaskSpec(
            name="main", cpu_milli=r.cpu_milli, memory_mib=r.memory_mib, devices=devices
        )
        spec = JobSpec("default", f"pod-{i:03d}", tasks=(task,))
        pod = st.TaskSnap(f"pod-{i:03d}-main-0", "main", 0, task)
        jobs.append(st.JobSnap(spec, created=i + 1, phase="Inqueue", tasks=(pod,)))
    queue = st.QueueSnap(QueueSpec("default"), created=0)
    return st.Snapshot(seq=1, nodes=snaps, queues=(queue,), jobs=tuple(jobs))


def scheduler_choices(snap: st.Snapshot, policy: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    decisions = decide(snap, parse_conf(CONF.format(policy=policy)))
    out = {}
    for jp in decisions.placements:
        assert not jp.pipelined
        for p in jp.placements:
            cards = tuple(sorted(int(s.card.rsplit("-c", 1)[1]) for s in p.slices))
            out[jp.name] = (p.node, cards)
    return out


def placer_choices(
    nodes: list[NodeView], pods: list[Request], policy: str
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The benchmark's engine (what `benchmarks.openb.replay` runs), nodes in inventory order."""
    workload = TargetWorkload.from_requests(pods)
    placer = Placer(nodes, POLICIES[policy](workload, cards_by_model(nodes)))
    out = {}
    for i, r in enumerate(pods):
        placement = placer.place(r)
        if placement is not None:
            out[f"pod-{i:03d}"] = (placement.node, tuple(sorted(placement.cards)))
    return out


@pytest.mark.parametrize("policy", ["tessera", "fgd"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scheduler_binds_where_the_benchmark_placer_places(policy: str, seed: int) -> None:
    sequence = requests(pods(40, seed))
    want = placer_choices(cluster(), sequence, policy)
    got = scheduler_choices(snapshot(cluster(), sequence), policy)
    assert len(want) >= 20  # the cluster fills up: some pods do not fit anywhere
    assert got == want


def test_placement_policy_differs_from_hami_default_order() -> None:
    snap = snapshot(cluster(), requests(pods(40, 1)))
    assert scheduler_choices(snap, "tessera") != scheduler_choices(snap, "binpack")


def test_session_workload_is_the_shape_histogram_of_all_session_tasks() -> None:
    sequence = requests(pods(40, 2))
    ssn = open_session(snapshot(cluster(), sequence), parse_conf(CONF.format(policy="tessera")))
    plugin = ssn.plugins["deviceshare"]
    assert isinstance(plugin, DeviceSharePlugin) and plugin.policy is not None
    assert plugin.policy.frag.workload == TargetWorkload.from_requests(sequence)


def test_request_translation_percent_absolute_memory_and_type_filters() -> None:
    ssn = open_session(snapshot(cluster(), []), parse_conf(CONF.format(policy="tessera")))
    cards = ClusterCards(ssn.node_list)
    # 47 % cores and memory -> 470 milli per card; no type filter
    soft = DeviceRequest("nvidia", "NVIDIA", 1, memory_pct=47, cores=47)
    assert cards.card_milli(soft, frozenset({"NVIDIA-T4"})) == 470
    # 2,500 MB on 10,000 MB cards, 10 % cores -> memory dominates: 250 milli
    absolute = DeviceRequest("nvidia", "NVIDIA", 1, memory=2_500, cores=10)
    assert cards.card_milli(absolute, frozenset({"NVIDIA-T4"})) == 250
    # a bare card count is a whole card
    assert cards.card_milli(DeviceRequest("nvidia", "NVIDIA", 1), frozenset()) == 1000
    only_v100 = DeviceRequest("nvidia", "NVIDIA", 1, use_types=("V100",), cores=30)
    assert cards.types_for(only_v100) == frozenset({"NVIDIA-V100"})


def test_card_free_milli_is_the_scarcer_of_memory_and_cores() -> None:
    from contracts.devices import CardUsage

    spec = CardSpec(uuid="u", node="n", index=0, type="T", vendor="nvidia", memory=10_000,
                    cores=100, split_count=4)  # fmt: skip
    assert card_free_milli(spec, CardUsage(memory_used=2_000, cores_used=50, slices_used=1)) == 500
    assert card_free_milli(spec, CardUsage(memory_used=9_000, cores_used=10, slices_used=1)) == 100
    assert card_free_milli(spec, CardUsage(slices_used=4)) == 0  # slots exhausted
    assert card_free_milli(spec, CardUsage(exclusive=True, slices_used=1)) == 0


@pytest.mark.skipif(
    not (data_dir() / "openb_node_list_gpu_node.csv").exists(), reason="openb data not present"
)
@pytest.mark.parametrize("policy", ["tessera", "fgd"])
def test_scheduler_matches_the_openb_replay_on_real_trace_pods(policy: str) -> None:
    """31 real openb nodes and a seeded `default` arrival sequence to 130 % of card capacity (model-
    constrained pods left out: the small cluster lacks most models)."""
    nodes = load_nodes()[::40]
    trace = [r for r in load_trace("default") if r.models is None]
    pods = arrival_sequence(trace[:200], capacity_milli(nodes), 42)
    want = placer_choices(nodes, pods, policy)
    assert len(want) < len(pods)  # some pods found no room
    assert scheduler_choices(snapshot(nodes, pods), policy) == want


def test_cluster_inventory_counts_cards_per_model_as_node_views_name_them() -> None:
    ssn = open_session(snapshot(cluster(), []), parse_conf(CONF.format(policy="tessera")))
    cards = ClusterCards(ssn.node_list).cards
    assert cards == {"NVIDIA-T4": 4, "NVIDIA-V100": 13, "NVIDIA-A10": 4}
    assert set(cards) == {node_view(n).model for n in ssn.node_list}
