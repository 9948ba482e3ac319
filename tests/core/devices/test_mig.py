"""A GPU HAMi's plugin registered in MIG mode is kept off (rev-gpu finding 2): it was booked as
soft slices by memory and cores (6 × 12000 MB on an A100-80GB where HAMi's MIG profiles fit 3
`2g.20gb`), and bound with no `hami.io/vgpu-mig-allocations`, which HAMi's plugin needs to
carve the instance. Until Tessera carves MIG instances, the fit, the allocator's ledger and the
node read all refuse such a card, with the same words."""

from __future__ import annotations

import json

from contracts import hami
from contracts.devices import CardSpec, CardUsage, OwnedSlice, SliceSpec
from contracts.events import SliceReleased
from contracts.workloads import DeviceRequest
from services.core.devices import NodeFit, NodeMisfit, build_vendors, default_catalogue, fit_task
from services.core.devices.mig import CARD_IN_MIG_MODE, MIG_WORDS
from services.core.ledger import (
    CardState,
    RegisterCard,
    Rejection,
    ReleaseSlice,
    ReserveSlice,
    decide,
    initial_state,
    usage_of,
)
from services.core.scheduling import podreasons
from services.kube import nodes

REG = build_vendors()


def a100(uuid: str = "a100-0", mode: str = "mig") -> CardSpec:
    return CardSpec(uuid=uuid, node="g1", index=0, type="NVIDIA-A100-SXM4-80GB", vendor="nvidia",
                    memory=81920, cores=100, split_count=7, mode=mode)  # fmt: skip


def ask(memory: int = 12000, mode: str = "") -> DeviceRequest:
    return DeviceRequest(vendor="nvidia", type="NVIDIA", count=1, memory=memory, cores=0, mode=mode)


def test_no_pod_lands_on_a_mig_card_however_much_memory_it_has() -> None:
    """The reviewer's case: 12000 MB asks on an empty A100-80GB in MIG mode. Before: each fitted
    as a 12000 MB soft slice (6 did, one after another); now none does, with the MIG code."""
    card = a100()
    result = fit_task([(card, CardUsage())], [ask()], registry=REG)
    assert isinstance(result, NodeMisfit)
    assert result.message == f"1/1 {CARD_IN_MIG_MODE}"
    # asking MIG mode outright changes nothing: no instance would be carved
    asked_mig = fit_task([(card, CardUsage())], [ask(mode="mig")], registry=REG)
    assert isinstance(asked_mig, NodeMisfit) and asked_mig.message == f"1/1 {CARD_IN_MIG_MODE}"


def test_a_node_with_a_mig_card_and_a_shared_card_places_on_the_shared_one() -> None:
    mig, soft = a100("a100-0"), a100("a100-1", mode="hami-core")
    result = fit_task([(mig, CardUsage()), (soft, CardUsage())], [ask()], registry=REG)
    assert isinstance(result, NodeFit)
    assert [a.card for a in result.assignments] == ["a100-1"]


def test_the_type_check_comes_first_so_a_pod_asking_another_model_reads_a_type_mismatch() -> None:
    other = DeviceRequest(vendor="nvidia", type="T4", count=1, memory=1000)
    result = fit_task([(a100(), CardUsage())], [other], registry=REG)
    assert isinstance(result, NodeMisfit) and result.message == "1/1 CardTypeMismatch"


def _registered(card: CardSpec) -> CardState:
    events = decide(initial_state(card.uuid), RegisterCard(card))
    assert isinstance(events, list) and events
    return CardState(uuid=card.uuid, spec=card, usage=events[0].usage)


def test_the_ledger_books_no_slice_on_a_mig_card() -> None:
    """A proposal from a scheduler that did not keep the card off (an older one) is refused by
    the allocator with the rule, so the card is never over-packed."""
    state = _registered(a100())
    got = decide(state, ReserveSlice("default/m0/m0", SliceSpec(kind="soft", memory=12000)))
    assert isinstance(got, Rejection)
    assert got.reason.startswith(CARD_IN_MIG_MODE) and MIG_WORDS in got.reason
    # the same card registered for sharing takes it
    shared = _registered(a100(mode="hami-core"))
    assert isinstance(decide(shared, ReserveSlice("default/m0/m0", SliceSpec(kind="soft", memory=12000))), list)


def test_a_slice_booked_on_a_mig_card_before_is_still_released() -> None:
    held = OwnedSlice(owner="default/m0/m0", slice=SliceSpec(kind="soft", memory=12000))
    card = a100()
    state = CardState(uuid=card.uuid, spec=card, usage=usage_of((held,), healthy=True, retired=False))
    (event,) = decide(state, ReleaseSlice("default/m0/m0"))  # type: ignore[misc]
    assert isinstance(event, SliceReleased) and event.usage.memory_used == 0


def test_the_waiting_words_name_mig_mode() -> None:
    one = podreasons.nodes_line({"g1": f"1/1 {CARD_IN_MIG_MODE}"}, 1, None)
    assert one == f"0/1 nodes are available: 1 has its matching cards in {MIG_WORDS}.", one


def test_a_cluster_node_registering_a_mig_gpu_says_it_is_kept_off() -> None:
    """nodeview.py's case: HAMi's registration with `"mode":"mig"` was read as a healthy
    schedulable card and no problem named."""
    reg = json.dumps([
        {"id": "GPU-aaaa", "count": 10, "devmem": 15360, "devcore": 100, "type": "NVIDIA-Tesla T4",
         "mode": "hami-core", "health": True},
        {"id": "GPU-bbbb", "index": 1, "count": 7, "devmem": 81920, "devcore": 100,
         "type": "NVIDIA-A100-SXM4-80GB", "mode": "mig", "health": True},
    ])  # fmt: skip
    node = {"metadata": {"name": "g1", "annotations": {hami.NVIDIA_REGISTER: reg}}, "spec": {},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "17"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    view = nodes.node_view(node, default_catalogue(), 1_796_000_000.0)
    assert [(c.uuid, c.mode) for c in view.registered.cards] == [("GPU-aaaa", "hami-core"), ("GPU-bbbb", "mig")]
    assert view.problems == (f"{hami.NVIDIA_REGISTER}: card GPU-bbbb is in {MIG_WORDS} (no knownMigGeometries "
                             "for NVIDIA-A100-SXM4-80GB in the device config); no pod is placed on it",)
