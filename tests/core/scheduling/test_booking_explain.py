"""explain's words for the booking table's refusals (issue 22): the init container's card
memory refused per card (CardInsufficientMemory), and a newcomer kept off the cards an
unfittable running pod holds (each full for it), from the same rows as the tables."""

from __future__ import annotations

from tests.core.scheduling.scenarios import load_table, run_core

ROWS = {sc.name: sc for sc in load_table("booking")}


def test_an_init_containers_card_memory_is_refused_per_card() -> None:
    (u,) = [u for u in run_core(ROWS["init-container-card-memory"]).decisions.unschedulable
            if u.name == "new"]  # fmt: skip
    assert "CardInsufficientMemory" in u.node_reasons["n1"], u.node_reasons


def test_the_cards_an_unfittable_running_pod_holds_are_full_for_a_newcomer() -> None:
    (u,) = [u for u in run_core(ROWS["running-unfittable-held"]).decisions.unschedulable
            if u.name == "new"]  # fmt: skip
    assert u.node_reasons == {"n1": "2/2 CardInsufficientMemory"}
