"""The per-card ledger: decide/evolve tables, and properties no command order can break."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.devices import CardSpec, SliceSpec
from contracts.events import SliceReleased, SliceReserved
from services.core.ledger import (
    CardState,
    ChangeHealth,
    Command,
    LedgerEvent,
    RegisterCard,
    Rejection,
    ReleaseSlice,
    ReserveSlice,
    RetireCard,
    check_invariants,
    decide,
    encode_state,
    evolve,
    fold,
    initial_state,
    state_from_last_event,
)

NPU = CardSpec(
    uuid="npu-0",
    node="n1",
    index=0,
    type="Ascend910B3",
    vendor="huawei",
    memory=65536,
    cores=20,
    split_count=4,
)
GPU = CardSpec(
    uuid="gpu-0",
    node="n1",
    index=0,
    type="NVIDIA-A100",
    vendor="nvidia",
    memory=40000,
    cores=100,
    split_count=10,
)
SOFT_NPU = CardSpec(
    uuid="npu-s",
    node="n1",
    index=0,
    type="Ascend910B3",
    vendor="huawei",
    memory=65536,
    cores=20,
    split_count=8,
    mode="hami-core",
)

T16 = SliceSpec(kind="template", memory=16384, cores=5, template="vir05_1c_16g")
T32 = SliceSpec(kind="template", memory=32768, cores=10, template="vir10_3c_32g")
WHOLE = SliceSpec(kind="whole", memory=65536, cores=20, exclusive=True)


def run(
    spec: CardSpec, commands: list[Command]
) -> tuple[CardState, list[LedgerEvent], list[Rejection]]:
    state = initial_state(spec.uuid)
    events: list[LedgerEvent] = []
    rejections: list[Rejection] = []
    for cmd in [RegisterCard(spec), *commands]:
        out = decide(state, cmd)
        if isinstance(out, Rejection):
            rejections.append(out)
            continue
        for e in out:
            state = evolve(state, e)
            events.append(e)
    return state, events, rejections


@dataclass(frozen=True)
class Case:
    name: str
    spec: CardSpec
    commands: list[Command]
    memory: int
    cores: int
    owners: tuple[str, ...]
    rejected: tuple[str, ...] = ()


CASES = [
    Case(
        "two templates",
        NPU,
        [ReserveSlice("a", T16), ReserveSlice("b", T32)],
        49152,
        15,
        ("a", "b"),
    ),
    Case(
        "memory full",
        NPU,
        [ReserveSlice("a", T32), ReserveSlice("b", T32), ReserveSlice("c", T16)],
        65536,
        20,
        ("a", "b"),
        ("CardInsufficientMemory",),
    ),
    Case("whole on empty", NPU, [ReserveSlice("a", WHOLE)], 65536, 20, ("a",)),
    Case(
        "nothing next to whole",
        NPU,
        [ReserveSlice("a", WHOLE), ReserveSlice("b", SliceSpec(kind="soft", memory=0))],
        65536,
        20,
        ("a",),
        ("ExclusiveDeviceAllocateConflict",),
    ),
    Case(
        "whole needs empty card",
        NPU,
        [ReserveSlice("a", T16), ReserveSlice("b", WHOLE)],
        16384,
        5,
        ("a",),
        ("ExclusiveDeviceAllocateConflict",),
    ),
    Case(
        "split count",
        GPU.__class__(**{**{f: getattr(GPU, f) for f in GPU.__struct_fields__}, "split_count": 2}),
        [ReserveSlice(o, SliceSpec(kind="soft", memory=10, cores=1)) for o in "abc"],
        20,
        2,
        ("a", "b"),
        ("CardTimeSlicingExhausted",),
    ),
    Case(
        "cores",
        GPU,
        [
            ReserveSlice("a", SliceSpec(kind="soft", memory=1, cores=70)),
            ReserveSlice("b", SliceSpec(kind="soft", memory=1, cores=40)),
        ],
        1,
        70,
        ("a",),
        ("CardInsufficientCore",),
    ),
    Case(
        "soft card counts cores in %",
        SOFT_NPU,
        [
            ReserveSlice("a", SliceSpec(kind="soft", memory=1000, cores=60)),
            ReserveSlice("b", SliceSpec(kind="soft", memory=1000, cores=40)),
        ],
        2000,
        100,
        ("a", "b"),
    ),
    Case(
        # deviceCoreScaling 2: HAMi registers Devcore 200 and fits against it; the ledger
        # capped every hami-core card at 100 and refused the second 60-core pod
        "an NVIDIA hami-core card books against its registered cores",
        msgspec.structs.replace(GPU, cores=200, mode="hami-core"),
        [ReserveSlice(o, SliceSpec(kind="soft", memory=1000, cores=60)) for o in "abcd"],
        3000,
        180,
        ("a", "b", "c"),
        ("CardInsufficientCore: 180+60 > 200",),
    ),
    Case(
        "an NVIDIA hami-core card of 100 cores books as before",
        msgspec.structs.replace(GPU, mode="hami-core"),
        [ReserveSlice(o, SliceSpec(kind="soft", memory=1000, cores=60)) for o in "ab"],
        1000,
        60,
        ("a",),
        ("CardInsufficientCore: 60+60 > 100",),
    ),
    Case(
        "release then reuse",
        NPU,
        [ReserveSlice("a", WHOLE), ReleaseSlice("a"), ReserveSlice("b", T16)],
        16384,
        5,
        ("b",),
    ),
    Case("release unknown owner: no event", NPU, [ReleaseSlice("ghost")], 0, 0, ()),
    Case(
        "release twice",
        NPU,
        [ReserveSlice("a", T16), ReleaseSlice("a"), ReleaseSlice("a")],
        0,
        0,
        (),
    ),
    Case(
        "redelivered reserve is a no-op",
        NPU,
        [ReserveSlice("a", T16), ReserveSlice("a", T16)],
        16384,
        5,
        ("a",),
    ),
    Case(
        "same owner other slice",
        NPU,
        [ReserveSlice("a", T16), ReserveSlice("a", T32)],
        16384,
        5,
        ("a",),
        ("already holds",),
    ),
    Case(
        "unhealthy takes nothing",
        NPU,
        [ChangeHealth(False), ReserveSlice("a", T16)],
        0,
        0,
        (),
        ("not healthy",),
    ),
    Case(
        "healthy again",
        NPU,
        [ChangeHealth(False), ChangeHealth(True), ReserveSlice("a", T16)],
        16384,
        5,
        ("a",),
    ),
    Case(
        "retired takes nothing, keeps slices",
        NPU,
        [ReserveSlice("a", T16), RetireCard(), ReserveSlice("b", T16)],
        16384,
        5,
        ("a",),
        ("retired",),
    ),
    Case(
        "template needs a name",
        NPU,
        [ReserveSlice("a", SliceSpec(kind="template", memory=1))],
        0,
        0,
        (),
        ("template name",),
    ),
    Case(
        "owners sorted",
        GPU,
        [ReserveSlice(o, SliceSpec(kind="soft", memory=1)) for o in ("c", "a", "b")],
        3,
        0,
        ("a", "b", "c"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ledger_table(case: Case) -> None:
    state, events, rejections = run(case.spec, case.commands)
    u = state.usage
    assert (u.memory_used, u.cores_used, u.owners) == (case.memory, case.cores, case.owners)
    assert len(rejections) == len(case.rejected)
    for r, want in zip(rejections, case.rejected, strict=True):
        assert want in r.reason
    assert check_invariants(state) == []
    assert events[-1].usage == u  # every event carries the usage after it


def test_release_of_unknown_owner_emits_nothing() -> None:
    state, _, _ = run(NPU, [])
    assert decide(state, ReleaseSlice("nobody")) == []


def test_unregistered_card_rejects_everything_but_registration() -> None:
    s = initial_state("x")
    assert isinstance(decide(s, ReserveSlice("a", T16)), Rejection)
    assert isinstance(decide(s, ChangeHealth(False)), Rejection)
    assert isinstance(decide(s, RetireCard()), Rejection)
    assert isinstance(decide(s, RegisterCard(NPU)), Rejection)  # uuid mismatch


def test_reregistration_cannot_shrink_below_usage() -> None:
    state, _, _ = run(NPU, [ReserveSlice("a", T32), ReserveSlice("b", T16)])
    smaller = CardSpec(**{**{f: getattr(NPU, f) for f in NPU.__struct_fields__}, "memory": 32768})
    out = decide(state, RegisterCard(smaller))
    assert isinstance(out, Rejection) and "over-committed" in out.reason
    assert decide(state, RegisterCard(NPU)) == []


def test_events_carry_card_and_node() -> None:
    _, events, _ = run(
        NPU, [ReserveSlice("ns/j/t-0", T16), ReleaseSlice("ns/j/t-0", reason="finished")]
    )
    reserved, released = events[1], events[2]
    assert (
        isinstance(reserved, SliceReserved) and reserved.card == "npu-0" and reserved.node == "n1"
    )
    assert (
        isinstance(released, SliceReleased)
        and released.reason == "finished"
        and released.usage.owners == ()
    )


# --- properties ------------------------------------------------------------------------------

SPECS = [NPU, GPU, SOFT_NPU]
OWNERS = [f"ns/job/t-{i}" for i in range(6)]
slices = st.one_of(
    st.sampled_from([T16, T32, WHOLE]),
    st.builds(
        SliceSpec,
        kind=st.sampled_from(["soft", "whole", "template"]),
        memory=st.integers(0, 70000),
        cores=st.integers(0, 120),
        template=st.sampled_from([None, "vir05_1c_16g"]),
        exclusive=st.booleans(),
    ),
)
commands = st.one_of(
    st.builds(ReserveSlice, owner=st.sampled_from(OWNERS), slice=slices),
    st.builds(ReleaseSlice, owner=st.sampled_from(OWNERS)),
    st.builds(ChangeHealth, healthy=st.booleans()),
    st.just(RetireCard()),
    st.sampled_from([RegisterCard(s) for s in SPECS]),
    st.just("crash"),
)


@settings(max_examples=300, deadline=None)
@given(spec=st.sampled_from(SPECS), script=st.lists(commands, max_size=40))
def test_no_command_order_breaks_an_invariant_and_replay_is_byte_identical(
    spec: CardSpec, script: list[object]
) -> None:
    state = initial_state(spec.uuid)
    history: list[LedgerEvent] = []
    for out in [decide(state, RegisterCard(spec))]:
        assert isinstance(out, list)
        for e in out:
            state = evolve(state, e)
            history.append(e)
    latest_spec = spec
    for cmd in script:
        if cmd == "crash":
            # crash and recover from the last event only, as the allocator does at start
            recovered = state_from_last_event(
                spec.uuid, latest_spec, history[-1] if history else None
            )
            assert encode_state(recovered) == encode_state(state)
            state = recovered
            continue
        if isinstance(cmd, RegisterCard) and cmd.spec.uuid != spec.uuid:
            cmd = RegisterCard(
                cmd.spec.__class__(
                    **{
                        **{f: getattr(cmd.spec, f) for f in cmd.spec.__struct_fields__},
                        "uuid": spec.uuid,
                    }
                )
            )
        out = decide(state, cmd)  # type: ignore[arg-type]
        if isinstance(out, Rejection):
            continue
        for e in out:
            state = evolve(state, e)
            assert e.usage == state.usage, "carried usage must equal the recomputed one"
            history.append(e)
            if isinstance(cmd, RegisterCard):
                latest_spec = cmd.spec
        assert check_invariants(state) == []
        # idempotence: applying the same command again changes nothing
        if isinstance(cmd, ReserveSlice | ReleaseSlice):
            assert decide(state, cmd) == [] or isinstance(decide(state, cmd), Rejection)
    full = fold(spec.uuid, history)
    last = state_from_last_event(spec.uuid, latest_spec, history[-1])
    assert encode_state(full) == encode_state(last) == encode_state(state)
