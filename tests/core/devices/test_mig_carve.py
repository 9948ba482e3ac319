"""MIG-mode GPUs carved as HAMi carves them (rev-gpu finding 2, second step): with the device
config's ``knownMigGeometries`` (HAMi's chart values for the A100-80GB below) the fit gives a
pod the smallest profile holding its memory with a free placement in a geometry compatible with
the card's instances, the slice records profile + placement, the allocator's ledger refuses any
instance that overlaps another or breaks the card's geometry, and the binding carries
``hami.io/vgpu-mig-allocations`` as HAMi's ``EncodeMigAllocations`` writes it."""

from __future__ import annotations

import json

import pytest

from contracts.devices import CardSpec, CardUsage, MigInstance, SliceSpec
from contracts.events import SliceAssignment, TaskPlacement
from contracts.workloads import DeviceRequest, TaskSpec
from services.core.devices import NodeFit, NodeMisfit, build_vendors, fit_task
from services.core.devices.catalogue import load_catalogue
from services.core.devices.mig import MIG_ALLOCATIONS, MIG_INFEASIBLE, card_note, layouts, pick
from services.core.devices.violations import CatalogueError
from services.core.ledger import (
    CardState,
    RegisterCard,
    Rejection,
    ReleaseSlice,
    ReserveSlice,
    check_invariants,
    decide,
    evolve,
    initial_state,
)
from services.kube.pods import binding_annotations

#: HAMi's chart (charts/hami/templates/scheduler/device-configmap.yaml), Volcano's group form
#: for the A100-80GB and HAMi's list form for the A30
CHART = """nvidia:
  knownMigGeometries:
    - models: ["A30"]
      allowedGeometries:
        - - {name: 1g.6gb, memory: 6144, count: 4}
        - - {name: 2g.12gb, memory: 12288, count: 2}
        - - {name: 4g.24gb, memory: 24576, count: 1}
    - models: ["A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"]
      allowedGeometries:
        - group: group1
          geometries:
            - {name: 1g.10gb, memory: 10240, count: 7}
        - group: group2
          geometries:
            - {name: 2g.20gb, memory: 20480, count: 3}
            - {name: 1g.10gb, memory: 10240, count: 1}
        - group: group3
          geometries:
            - {name: 3g.40gb, memory: 40960, count: 2}
        - group: group4
          geometries:
            - {name: 7g.79gb, memory: 80896, count: 1}
"""
CAT = load_catalogue(CHART)
REG = build_vendors(CAT)


def a100(uuid: str = "a100-0") -> CardSpec:
    ctype = "NVIDIA-A100-SXM4-80GB"
    return CardSpec(uuid=uuid, node="g1", index=0, type=ctype, vendor="nvidia", memory=81920,
                    cores=100, split_count=7, mode="mig", mig_geometries=CAT.nvidia.mig_geometries(ctype))  # fmt: skip


def ask(memory: int, count: int = 1) -> DeviceRequest:
    return DeviceRequest(vendor="nvidia", type="NVIDIA", count=count, memory=memory, cores=0)


def registered(card: CardSpec) -> CardState:
    events = decide(initial_state(card.uuid), RegisterCard(spec=card))
    assert isinstance(events, list)
    return evolve(initial_state(card.uuid), events[0])


def book(state: CardState, owner: str, s: SliceSpec) -> CardState:
    events = decide(state, ReserveSlice(owner=owner, slice=s))
    assert isinstance(events, list) and events, events
    return evolve(state, events[0])


def fit_one(state: CardState, memory: int) -> SliceSpec | str:
    assert state.spec is not None
    result = fit_task([(state.spec, state.usage)], [ask(memory)], registry=REG)
    if isinstance(result, NodeMisfit):
        return result.message
    assert isinstance(result, NodeFit)
    return result.assignments[0].slice


def test_the_chart_geometries_load_with_their_placements() -> None:
    """Each geometry lays its instances side by side; sizes in the model's smallest profile's
    memory: the placements NVML reports for these A100-80GB profiles."""
    geos = a100().mig_geometries
    assert [g.group for g in geos] == ["group1", "group2", "group3", "group4"]
    laid = [[(s.profile, s.start, s.size, s.cores) for s in lay] for lay in layouts(geos)]
    assert laid[0] == [("1g.10gb", i, 1, 14) for i in range(7)]
    assert laid[1] == [("2g.20gb", 0, 2, 28), ("2g.20gb", 2, 2, 28), ("2g.20gb", 4, 2, 28), ("1g.10gb", 6, 1, 14)]
    assert laid[2] == [("3g.40gb", 0, 4, 42), ("3g.40gb", 4, 4, 42)]
    assert laid[3] == [("7g.79gb", 0, 8, 100)]
    assert CAT.nvidia.mig_geometries("NVIDIA-A100-SXM4-40GB") == ()  # no entry for that model
    assert [p.name for g in CAT.nvidia.mig_geometries("NVIDIA A30") for p in g.profiles] == [
        "1g.6gb", "2g.12gb", "4g.24gb"]  # fmt: skip
    assert not [line for line in CAT.not_acted_on if "knownMigGeometries" in line]


@pytest.mark.parametrize(("text", "path"), [
    ("nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: [[{name: big, memory: 1, count: 1}]]}]}",
     "nvidia.knownMigGeometries[0].allowedGeometries[0][0].name"),
    ("nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: [[{name: 1g.6gb, memory: 6144}]]}]}",
     "nvidia.knownMigGeometries[0].allowedGeometries[0][0].count"),
    ("nvidia: {knownMigGeometries: [{models: [A30]}]}", "nvidia.knownMigGeometries[0].allowedGeometries"),
])  # fmt: skip
def test_a_bad_geometry_is_refused_naming_its_path(text: str, path: str) -> None:
    with pytest.raises(CatalogueError) as err:
        load_catalogue(text)
    assert err.value.path == path, err.value


def test_nine_12000_mb_asks_get_three_2g_20gb_instances() -> None:
    """The reviewer's case: HAMi's chart geometries carve an A100-80GB into at most three
    2g.20gb (the smallest profile holding 12000 MB; 1g.10gb holds 10240); the 4th waits."""
    state = registered(a100())
    got = []
    for i in range(9):
        s = fit_one(state, 12000)
        if isinstance(s, str):
            got.append(s)
            continue
        got.append((s.memory, s.cores, s.mig))
        state = book(state, f"default/m{i}/m{i}", s)
    assert got[:3] == [(20480, 28, (MigInstance(profile="2g.20gb", start=st, size=2),)) for st in (0, 2, 4)]
    assert got[3:] == [f"1/1 {MIG_INFEASIBLE}"] * 6
    assert (state.usage.memory_used, state.usage.cores_used) == (61440, 84)
    assert check_invariants(state) == []
    # the geometry's fourth instance, a 1g.10gb at 6, still takes a small ask
    s = fit_one(state, 4000)
    assert isinstance(s, SliceSpec) and s.mig == (MigInstance(profile="1g.10gb", start=6, size=1),)
    assert card_note(a100(), state.usage) == "MIG: 2g.20gb@0, 2g.20gb@2, 2g.20gb@4"


def test_mixed_profiles_follow_the_geometry_the_first_instances_chose() -> None:
    """A 1g ask takes the highest 1g placement (HAMi's order), which group1 and group2 share,
    so a 2g ask still fits beside it; a 30000 MB ask gets a 3g.40gb only on an empty card."""
    state = registered(a100())
    small = fit_one(state, 5000)
    assert isinstance(small, SliceSpec) and small.mig == (MigInstance(profile="1g.10gb", start=6, size=1),)
    assert (small.memory, small.cores) == (10240, 14)
    assert fit_one(state, 30000) != f"1/1 {MIG_INFEASIBLE}"  # empty card: a 3g.40gb
    state = book(state, "default/s/s", small)
    assert fit_one(state, 30000) == f"1/1 {MIG_INFEASIBLE}"  # no 3g geometry holds 1g at 6
    mid = fit_one(state, 15000)
    assert isinstance(mid, SliceSpec) and mid.mig == (MigInstance(profile="2g.20gb", start=0, size=2),)
    state = book(state, "default/m/m", mid)
    # group2 now: its one 1g is taken, so a further small ask gets the next profile up (as
    # HAMi's selectMigCandidate falls through to larger profiles)
    nxt = fit_one(state, 5000)
    assert isinstance(nxt, SliceSpec) and nxt.mig == (MigInstance(profile="2g.20gb", start=2, size=2),)
    big = registered(a100())
    whole = fit_one(big, 70000)
    assert isinstance(whole, SliceSpec) and whole.mig == (MigInstance(profile="7g.79gb", start=0, size=8),)
    assert (whole.memory, whole.cores, whole.exclusive) == (80896, 100, True)


def test_two_containers_of_a_pod_get_two_instances_booked_as_one_slice() -> None:
    card = a100()
    result = fit_task([(card, CardUsage())], [ask(12000), ask(12000)], registry=REG)
    assert isinstance(result, NodeFit)
    assert [a.slice.mig[0].start for a in result.assignments] == [0, 2]


def test_a_release_frees_the_placement() -> None:
    state = registered(a100())
    for i in range(3):
        s = fit_one(state, 12000)
        assert isinstance(s, SliceSpec)
        state = book(state, f"default/m{i}/m{i}", s)
    assert fit_one(state, 12000) == f"1/1 {MIG_INFEASIBLE}"
    events = decide(state, ReleaseSlice(owner="default/m1/m1"))
    assert isinstance(events, list) and events
    state = evolve(state, events[0])
    again = fit_one(state, 12000)
    assert isinstance(again, SliceSpec) and again.mig == (MigInstance(profile="2g.20gb", start=2, size=2),)
    # all released: the card is whole again and any geometry may be chosen
    for owner in ("default/m0/m0", "default/m2/m2"):
        out = decide(state, ReleaseSlice(owner=owner))
        assert isinstance(out, list)
        state = evolve(state, out[0])
    assert state.usage.slices == ()
    whole = fit_one(state, 70000)
    assert isinstance(whole, SliceSpec) and whole.mig[0].profile == "7g.79gb"


def mig_slice(profile: str, start: int, size: int, memory: int, cores: int) -> SliceSpec:
    return SliceSpec(kind="soft", memory=memory, cores=cores, mig=(MigInstance(profile=profile, start=start, size=size),))


def test_the_ledger_refuses_what_would_over_commit_the_card() -> None:
    """A proposal made on a stale view (two schedulers' sessions, a racing retry) names a
    placement already taken, one of another geometry, or the wrong amounts: refused, by rule."""
    state = book(registered(a100()), "default/a/a", mig_slice("2g.20gb", 0, 2, 20480, 28))

    def refused(s: SliceSpec) -> str:
        out = decide(state, ReserveSlice(owner="default/b/b", slice=s))
        assert isinstance(out, Rejection), out
        return out.reason

    assert "overlaps 2g.20gb at 0+2" in refused(mig_slice("2g.20gb", 0, 2, 20480, 28))
    assert "overlaps 2g.20gb at 0+2" in refused(mig_slice("1g.10gb", 1, 1, 10240, 14))
    assert "no MIG geometry" in refused(mig_slice("3g.40gb", 4, 4, 40960, 42))  # group3 vs group2
    assert "not a placement" in refused(mig_slice("2g.20gb", 1, 2, 20480, 28))
    assert "names no MIG instance" in refused(SliceSpec(kind="soft", memory=12000))
    assert "books 12000 MB/0 cores" in refused(mig_slice("2g.20gb", 2, 2, 12000, 0))
    ok = decide(state, ReserveSlice(owner="default/b/b", slice=mig_slice("2g.20gb", 2, 2, 20480, 28)))
    assert isinstance(ok, list) and ok
    # a MIG instance on a card that is not in MIG mode is refused too
    soft = registered(CardSpec(uuid="t4", node="g1", index=0, type="NVIDIA-T4", vendor="nvidia",
                               memory=15360, cores=100, split_count=10, mode="hami-core"))  # fmt: skip
    bad = decide(soft, ReserveSlice(owner="default/c/c", slice=mig_slice("1g.10gb", 0, 1, 10240, 14)))
    assert isinstance(bad, Rejection) and "not in MIG mode" in bad.reason


def test_older_slice_and_card_records_decode_and_re_encode_unchanged() -> None:
    import msgspec

    old_slice = b'{"kind":"soft","memory":1000,"cores":30}'
    s = msgspec.json.decode(old_slice, type=SliceSpec)
    assert s.mig == () and msgspec.json.encode(s) == old_slice
    old_card = (b'{"uuid":"u","node":"n","index":0,"type":"NVIDIA-T4","vendor":"nvidia","memory":15360,'
                b'"cores":100,"split_count":10,"mode":"hami-core"}')  # fmt: skip
    c = msgspec.json.decode(old_card, type=CardSpec)
    assert c.mig_geometries == () and msgspec.json.encode(c) == old_card


def decode_like_hami(raw: str) -> list[dict]:
    """HAMi's ``DecodeMigAllocations`` rules: complete entries, runtime identity all or none,
    no duplicate (container, device) pair."""
    out = json.loads(raw)
    assert isinstance(out, list)
    seen = set()
    for a in out:
        assert set(a) <= {"containerIndex", "deviceIndex", "gpuUUID", "profile", "placement",
                          "migUUID", "gpuInstanceID", "computeInstanceID"}, a  # fmt: skip
        assert a["containerIndex"] >= 0 and a["deviceIndex"] >= 0 and a["gpuUUID"] and a["profile"]
        assert isinstance(a["placement"], dict) and set(a["placement"]) == {"start", "size"}
        assert a["placement"]["size"] != 0
        assert sum(k in a for k in ("migUUID", "gpuInstanceID", "computeInstanceID")) in (0, 3)
        key = (a["containerIndex"], a["deviceIndex"])
        assert key not in seen
        seen.add(key)
    return out


def test_the_binding_carries_hamis_mig_allocations() -> None:
    """One entry per MIG device, indexed as `vgpu-devices-to-allocate` lists them (init
    containers first): here the pod's second container holds two instances on two cards."""
    one, two = a100("a100-0"), a100("a100-1")
    task = TaskSpec(name="t", containers=2, devices=(
        DeviceRequest(vendor="nvidia", type="NVIDIA", count=1, memory=5000, container=0),
        DeviceRequest(vendor="nvidia", type="NVIDIA", count=2, memory=12000, container=1)))  # fmt: skip
    result = fit_task([(one, CardUsage()), (two, CardUsage())], task.devices, registry=REG)
    assert isinstance(result, NodeFit)
    placement = TaskPlacement(task="t", node="g1", slices=tuple(
        SliceAssignment(card=a.card, node="g1", slice=a.slice) for a in result.assignments))  # fmt: skip
    cards = {c.uuid: c for c in (one, two)}
    annos = binding_annotations(placement, task, cards, 1_796_000_000.0)
    entries = decode_like_hami(annos[MIG_ALLOCATIONS])
    assert [(e["containerIndex"], e["deviceIndex"], e["profile"]) for e in entries] == [
        (0, 0, "1g.10gb"), (1, 0, "2g.20gb"), (1, 1, "2g.20gb")]  # fmt: skip
    assert {e["gpuUUID"] for e in entries[1:]} == {"a100-0", "a100-1"}
    assert annos[MIG_ALLOCATIONS].startswith('[{"containerIndex":0,"deviceIndex":0,"gpuUUID":')
    # the memory HAMi's plugin reads per device is the profile's
    assert annos["hami.io/vgpu-devices-to-allocate"].split(";")[0].split(",")[2] == "10240"
    # a soft card's binding has no such annotation
    soft = CardSpec(uuid="t4", node="g1", index=0, type="NVIDIA-T4", vendor="nvidia", memory=15360,
                    cores=100, split_count=10, mode="hami-core")  # fmt: skip
    plain = TaskPlacement(task="t", node="g1",
                          slices=(SliceAssignment(card="t4", node="g1", slice=SliceSpec(kind="soft", memory=1000)),))  # fmt: skip
    assert MIG_ALLOCATIONS not in binding_annotations(plain, None, {"t4": soft}, 1_796_000_000.0)


def test_pick_is_deterministic_and_prefers_the_smallest_profile() -> None:
    card = a100()
    assert pick(card, (), 10240).profile == "1g.10gb"  # type: ignore[union-attr]
    assert pick(card, (), 10241).profile == "2g.20gb"  # type: ignore[union-attr]
    assert pick(card, (), 80897) is None
    assert [pick(card, (), 5000) for _ in range(3)] == [pick(card, (), 5000)] * 3


def test_a_cluster_node_registering_a_mig_gpu_gets_its_models_geometries() -> None:
    """HAMi's registration with `"mode":"mig"` on a cluster whose device config gives the
    model's geometries: the card carries them and no problem is named (it is served)."""
    from contracts import hami
    from services.kube import nodes

    reg = json.dumps([{"id": "GPU-bbbb", "index": 0, "count": 7, "devmem": 81920, "devcore": 100,
                       "type": "NVIDIA-A100-SXM4-80GB", "mode": "mig", "health": True}])  # fmt: skip
    node = {"metadata": {"name": "g1", "annotations": {hami.NVIDIA_REGISTER: reg}}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "7"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    view = nodes.node_view(node, CAT, 1_796_000_000.0)
    (card,) = view.registered.cards
    assert card.mig_geometries == a100().mig_geometries and view.problems == ()
    assert isinstance(fit_task([(card, CardUsage())], [ask(12000)], registry=REG), NodeFit)
