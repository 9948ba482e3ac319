"""HAMi's card gauges from ledger states: names, labels and values as HAMi's scheduler has them."""

from __future__ import annotations

from contracts.devices import CardSpec, SliceSpec
from services.core.ledger import CardState, RegisterCard, ReserveSlice, decide, evolve
from services.core.observe import hami
from tests.allocator.scenario import VIR05, WHOLE, ascend_node

MIB = 2**20


def run(state: CardState, *commands: object) -> CardState:
    for command in commands:
        events = decide(state, command)  # type: ignore[arg-type]
        assert isinstance(events, list), events
        for e in events:
            state = evolve(state, e)
    return state


def by_name(series: list[hami.Series]) -> dict[str, list[hami.Series]]:
    out: dict[str, list[hami.Series]] = {}
    for s in series:
        out.setdefault(s.name, []).append(s)
    return out


def test_a_template_card_with_two_slices() -> None:
    spec = ascend_node("n1", cards=1).cards[0]
    state = run(CardState(uuid=spec.uuid), RegisterCard(spec),
                ReserveSlice("default/a/a-0", VIR05), ReserveSlice("default/b/b-0", VIR05))  # fmt: skip
    got = by_name(hami.card_series([state]))
    assert set(got) == {s.name for s in hami.SPECS}
    device = ("n1", spec.uuid, "0", "Ascend910B3")
    used, cores = 2 * VIR05.memory, 2 * VIR05.cores
    assert got["hami_gpu_memory_allocated_bytes"] == [
        hami.Series("hami_gpu_memory_allocated_bytes", ("n1", spec.uuid, "0", str(cores), "Ascend910B3"), used * MIB)]
    assert got["hami_gpu_memory_limit_bytes"][0].value == spec.memory * MIB
    # HAMi's normalizeCoreMetrics: % of the card (10 of 20 AI cores: 50), the limit 100
    assert got["hami_gpu_core_allocated_ratio"][0] == hami.Series("hami_gpu_core_allocated_ratio", device, 50)
    assert got["hami_gpu_core_limit_ratio"][0].value == 100
    assert got["hami_gpu_shared_count"][0].value == 2
    assert got["hami_node_gpu_memory_allocated_ratio"][0].value == used / spec.memory
    (overview,) = got["hami_node_gpu_overview"]
    assert overview.labels[3:6] == (str(cores), "2", str(spec.memory)) and overview.value == used * MIB
    for spec_ in hami.SPECS:  # every sample has a value for each of its family's labels
        assert all(len(s.labels) == len(spec_.labels) for s in got[spec_.name])


def test_a_hami_core_card_counts_cores_in_percent_and_an_unregistered_one_nothing() -> None:
    spec = CardSpec(uuid="c1", node="n2", index=3, type="Ascend910B3", vendor="huawei",
                    memory=65536, cores=20, split_count=8, mode="hami-core")  # fmt: skip
    soft = SliceSpec(kind="soft", memory=8192, cores=30)
    state = run(CardState(uuid="c1"), RegisterCard(spec), ReserveSlice("default/p/p", soft))
    got = by_name(hami.card_series([state, CardState(uuid="ghost")]))
    assert got["hami_gpu_core_limit_ratio"][0].value == 100
    assert got["hami_gpu_core_allocated_ratio"][0].value == 30
    assert {s.labels[1] for s in got["hami_gpu_memory_limit_bytes"]} == {"c1"}


def test_a_full_template_card_reads_100_on_both_core_gauges_as_hamis_does() -> None:
    """HAMi's scheduler normalizes the core gauges to 0–100 on every card (cmd/scheduler/
    metrics.go `normalizeCoreMetrics`): a full Ascend card in template mode read 20 and 20 (its
    AI cores), where HAMi's dashboards and alerts expect 100 and 100."""
    spec = ascend_node("n1", cards=1).cards[0]
    assert spec.mode != "hami-core" and spec.cores == 20
    full = run(CardState(uuid=spec.uuid), RegisterCard(spec), ReserveSlice("default/w/w-0", WHOLE))
    got = by_name(hami.card_series([full]))
    assert got["hami_gpu_core_limit_ratio"][0].value == 100
    assert got["hami_gpu_core_allocated_ratio"][0].value == 100
    empty = by_name(hami.card_series([run(CardState(uuid=spec.uuid), RegisterCard(spec))]))
    assert empty["hami_gpu_core_allocated_ratio"][0].value == 0 and empty["hami_gpu_core_limit_ratio"][0].value == 100


def test_core_ratios_round_up_as_hamis_float_arithmetic_does() -> None:
    """`math.Ceil(float64(allocated) / float64(total) * 100)`: 1 of 20 cores is 5, 1 of 24 is
    5 (4.17 up), and the float order's quirks are HAMi's too (7 of 100 reads 8)."""
    assert hami.core_ratios(20, 1) == (100, 5)
    assert hami.core_ratios(24, 1) == (100, 5)
    assert hami.core_ratios(100, 7) == (100, 8)
    assert hami.core_ratios(0, 0) == (0, 0)
