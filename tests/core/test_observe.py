"""HAMi's card gauges from ledger states: names, labels and values as HAMi's scheduler has them."""

from __future__ import annotations

from contracts.devices import CardSpec, SliceSpec
from services.core.ledger import CardState, RegisterCard, ReserveSlice, decide, evolve
from services.core.observe import hami
from tests.allocator.scenario import VIR05, ascend_node

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
    assert got["hami_gpu_core_allocated_ratio"][0] == hami.Series("hami_gpu_core_allocated_ratio", device, cores)
    assert got["hami_gpu_core_limit_ratio"][0].value == spec.cores  # AI cores in template mode
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
