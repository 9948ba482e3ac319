"""explain's words for the booking table's refusals (issue 22): the init container's card
memory refused per card (CardInsufficientMemory), and a newcomer kept off the cards an
unfittable running pod holds (each full for it), from the same rows as the tables."""

from __future__ import annotations

from dataclasses import replace

from services.core.scheduling.config import DEFAULT_CONF
from tests.core.scheduling.scenarios import load_table, run_core

ROWS = {sc.name: sc for sc in load_table("booking")}


def test_an_init_containers_card_memory_is_refused_per_card() -> None:
    (u,) = [u for u in run_core(ROWS["init-container-card-memory"]).decisions.unschedulable
            if u.name == "new"]  # fmt: skip
    assert "CardInsufficientMemory" in u.node_reasons["n1"], u.node_reasons


def test_the_cards_an_unfittable_running_pod_holds_are_full_for_a_newcomer() -> None:
    """Its booking runs the pre-existing job (Running from its commit on): with proportion the
    queue, holding both cards, is overused before any node is tried, so the nodes' words are
    read without it."""
    sc = ROWS["running-unfittable-held"]
    full = run_core(sc)
    assert full.initial_phases["default/pre"] == "Running"
    (u,) = [u for u in full.decisions.unschedulable if u.name == "new"]
    assert u.plugin == "proportion" and "overused" in u.why, u
    sc = replace(sc, conf=DEFAULT_CONF.replace("  - name: proportion\n", ""))
    (u,) = [u for u in run_core(sc).decisions.unschedulable if u.name == "new"]
    assert u.node_reasons == {"n1": "2/2 CardInsufficientMemory"}
