"""Whole cards of the vendor's own device plugin (no HAMi registration): a node serving
`nvidia.com/gpu: 2` or `huawei.com/Ascend910: 2` has two cards of mode `plugin` that fit only a
whole-card request of that very name; what other schedulers' pods hold of the count is kept
from Tessera's pods in the session."""

from __future__ import annotations

from contracts.devices import CardSpec, CardUsage
from contracts.events import NodeUsage
from services.core.devices import (
    NodeFit,
    NodeMisfit,
    build_vendors,
    default_catalogue,
    fit_task,
    parse_container,
)
from services.core.devices import registration as reg
from services.core.scheduling.config import parse_conf
from services.core.scheduling.decide import decide
from services.core.workload.cardroom import largest_cards
from tests.core.scheduling.scenarios import _simulation, bound_of, load_table

VENDORS = build_vendors()
CAT = default_catalogue()


def _cards(counts: dict[str, int], labels: dict[str, str] | None = None, registered: set[str] | None = None):
    return reg.plugin_cards("n1", counts, labels or {}, registered or set(), CAT)


def _free(cards: list[CardSpec]) -> list[tuple[CardSpec, CardUsage]]:
    return [(c, CardUsage()) for c in cards]


def _ask(limits: dict[str, str], annotations: dict[str, str] | None = None):
    return parse_container(limits, annotations=annotations, registry=VENDORS)


def test_a_served_count_is_that_many_whole_cards_named_by_the_catalogue_or_the_labels() -> None:
    cards = _cards({"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910": 1, "nvidia.com/gpu": 1,
                    "example.com/fpga": 4},
                   {reg.GFD_PRODUCT: "NVIDIA-A100-SXM4-80GB", reg.GFD_MEMORY: "81920"})  # fmt: skip
    got = [(c.uuid, c.type, c.vendor, c.memory, c.mode, c.resource) for c in cards]
    assert got == [
        ("n1/huawei.com/Ascend910/0", "Ascend910", "huawei", 0, "plugin", "huawei.com/Ascend910"),
        ("n1/huawei.com/Ascend910B3/0", "Ascend910B3", "huawei", 65536, "plugin", "huawei.com/Ascend910B3"),
        ("n1/huawei.com/Ascend910B3/1", "Ascend910B3", "huawei", 65536, "plugin", "huawei.com/Ascend910B3"),
        ("n1/nvidia.com/gpu/0", "NVIDIA-A100-SXM4-80GB", "nvidia", 81920, "plugin", "nvidia.com/gpu"),
    ]
    # a family HAMi registers on the node books from the registration alone, never twice
    assert _cards({"nvidia.com/gpu": 2, "huawei.com/Ascend910B3": 1}, registered={"nvidia"})[0].vendor == "huawei"
    assert len(_cards({"nvidia.com/gpu": 2}, registered={"nvidia"})) == 0
    # no slice goes there: they bound no request's memory at admission
    assert largest_cards(cards) == {}


def test_a_whole_card_request_of_the_served_name_fits_and_books_the_whole_card() -> None:
    cards = _cards({"nvidia.com/gpu": 2, "huawei.com/Ascend910": 2})
    gpu = fit_task(_free(cards), _ask({"nvidia.com/gpu": "2"}), registry=VENDORS)
    assert isinstance(gpu, NodeFit)
    assert sorted(a.card for a in gpu.assignments) == ["n1/nvidia.com/gpu/0", "n1/nvidia.com/gpu/1"]
    assert all(a.slice.kind == "whole" and a.slice.exclusive for a in gpu.assignments)
    npu = fit_task(_free(cards), _ask({"huawei.com/Ascend910": "1"}), registry=VENDORS)
    assert isinstance(npu, NodeFit) and npu.assignments[0].card.startswith("n1/huawei.com/Ascend910/")
    # one more than the node serves
    assert isinstance(fit_task(_free(cards), _ask({"nvidia.com/gpu": "3"}), registry=VENDORS), NodeMisfit)


def test_only_the_name_the_card_is_served_under_and_only_whole_cards() -> None:
    cards = _cards({"huawei.com/Ascend910": 2})
    other = fit_task(_free(cards), _ask({"huawei.com/Ascend910B3": "1"}), registry=VENDORS)
    assert isinstance(other, NodeMisfit) and other.reasons == ("2/2 CardTypeMismatch",)
    template = fit_task(_free(cards), _ask({"huawei.com/Ascend910": "1", "huawei.com/Ascend910-memory": "8192"}),
                        registry=VENDORS)  # fmt: skip
    assert isinstance(template, NodeMisfit) and template.reasons == ("2/2 SliceNeedsRegistration",)
    soft = fit_task(_free(cards), _ask({"huawei.com/Ascend910": "1"}, {"huawei.com/vnpu-mode": "hami-core"}),
                    registry=VENDORS, node_annotations={"hami-vnpu-core": "true"})  # fmt: skip
    assert isinstance(soft, NodeMisfit) and soft.reasons == ("2/2 SliceNeedsRegistration",)
    gpus = _cards({"nvidia.com/gpu": 1})
    for limits in ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"},
                   {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}, {"volcano.sh/vgpu-number": "1"}):  # fmt: skip
        assert isinstance(fit_task(_free(gpus), _ask(limits), registry=VENDORS), NodeMisfit), limits


def test_a_held_plugin_card_says_it_is_in_use_not_that_a_split_count_ran_out() -> None:
    cards = _cards({"nvidia.com/gpu": 2})
    held = [(c, reg.held_usage(c, CardUsage())) for c in cards]
    got = fit_task(held, _ask({"nvidia.com/gpu": "1"}), registry=VENDORS)
    assert isinstance(got, NodeMisfit)
    assert got.explained(held, 0) == ("2/2 CardTimeSlicingExhausted: every nvidia.com/gpu card the node's device "
                                      "plugin serves is in use (2 of 2; 2 by other schedulers' pods)",)  # fmt: skip


def test_other_schedulers_pods_counts_of_the_name_leave_the_rest_to_tessera() -> None:
    """NodeUsage says another scheduler's pods hold 1 nvidia.com/gpu on gpu-1 (2 served): one of
    Tessera's two whole-card pods runs, the other waits saying who holds the card."""
    sc = next(s for s in load_table("served") if s.name == "vendor-plugins-whole-cards")
    sim = _simulation(sc, cycles=0)
    sim.run()
    sim.projection.apply(sim.projection.seq + 1, NodeUsage(node="gpu-1", cpu_milli=1000, pods=1,
                                                           scalars={"nvidia.com/gpu": 1000}))  # fmt: skip
    snap = sim.projection.snapshot()
    assert next(n for n in snap.nodes if n.name == "gpu-1").held_devices == {"nvidia.com/gpu": 1000}
    decisions = decide(snap, parse_conf(sc.conf))
    gpus = {k: v for k, v in bound_of(decisions).items() if "gpu" in k}
    assert list(gpus.values()) == ["gpu-1"], gpus
    # the card Tessera took is the one no other pod holds (the last in index order is theirs)
    taken = [s.card for jp in decisions.placements for p in jp.placements for s in p.slices if s.node == "gpu-1"]
    assert taken == ["gpu-1/nvidia.com/gpu/0"], taken
    waiting = {f"{u.namespace}/{u.name}": u.reason for u in decisions.unschedulable}
    assert any("in use (2 of 2; 1 by other schedulers' pods)" in waiting.get(f"default/gpu-{i}", "")
               for i in range(3)), waiting  # fmt: skip


def test_a_booking_on_a_card_the_shrunk_count_no_longer_lists_still_holds_a_card() -> None:
    """gpu-1 served 2: gpu-0 and gpu-1 run on cards 0 and 1. A device fails, the count is 1 and
    card 1 leaves the listing while its pod runs on; then the pod on card 0 ends. The kubelet
    has one device and one pod on it: no card is free — card 0 looked free, and gpu-2 was
    placed there, one pod more than the node has devices (the kubelet refused it)."""
    import dataclasses

    sc = next(s for s in load_table("served") if s.name == "vendor-plugins-whole-cards")
    sim = _simulation(sc, cycles=None)
    sim.run()
    snap = sim.projection.snapshot()
    on = {s.card: (j.spec.name, t.pod) for j in snap.jobs for t in j.tasks for s in t.slices}
    assert {"gpu-1/nvidia.com/gpu/0", "gpu-1/nvidia.com/gpu/1"} <= set(on), on
    ended = on["gpu-1/nvidia.com/gpu/0"]

    def shrunk(n):  # type: ignore[no-untyped-def]
        if n.name != "gpu-1":
            return n
        card0 = next(c for c in n.cards if c.spec.uuid.endswith("/0"))
        return dataclasses.replace(n, cards=(dataclasses.replace(card0, usage=CardUsage()),))

    def finished(j):  # type: ignore[no-untyped-def]
        if j.spec.name != ended[0]:
            return j
        return dataclasses.replace(j, tasks=tuple(dataclasses.replace(t, status="Succeeded", slices=())
                                                  for t in j.tasks))  # fmt: skip

    later = dataclasses.replace(snap, nodes=tuple(shrunk(n) for n in snap.nodes),
                                jobs=tuple(finished(j) for j in snap.jobs))  # fmt: skip
    decisions = decide(later, parse_conf(sc.conf))
    placed = [s.card for jp in decisions.placements for p in jp.placements for s in p.slices if s.node == "gpu-1"]
    assert placed == [], placed
    assert reg.plugin_resource("gpu-1", "gpu-1/nvidia.com/gpu/1") == "nvidia.com/gpu"
    assert reg.plugin_resource("gpu-1", "GPU-5f2a") == "" == reg.plugin_resource("gpu-1", "gpu-2/nvidia.com/gpu/1")


def test_time_sliced_replicas_count_their_gpus_memory_once() -> None:
    """GFD on a time-sliced node: `nvidia.com/gpu: 8` is 2 T4s × 4 replicas. Each replica is a
    card placed by count (as kube-scheduler places it), holding a quarter of its GPU's memory:
    the 8 cards each said 15360 MB, 122880 MB of card memory for 30720 MB of hardware."""
    labels = {"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.memory": "15360",
              "nvidia.com/gpu.count": "2", "nvidia.com/gpu.replicas": "4"}  # fmt: skip
    cards = _cards({"nvidia.com/gpu": 8}, labels)
    assert len(cards) == 8 and {c.memory for c in cards} == {3840}
    assert sum(c.memory for c in cards) == 2 * 15360
    got = fit_task(_free(cards), _ask({"nvidia.com/gpu": "8"}), registry=VENDORS)
    assert isinstance(got, NodeFit) and len(got.assignments) == 8  # placement by count stays
    plain = _cards({"nvidia.com/gpu": 2}, {**labels, "nvidia.com/gpu.replicas": "1"})
    assert [c.memory for c in plain] == [15360, 15360]  # no time-slicing: a GPU each
