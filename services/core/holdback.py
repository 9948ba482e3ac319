"""A pod that already runs but whose requests do not fit its node's free cards (issue 22): it
runs anyway, on cards nobody can name, so every card of its vendors on its node is kept out of
use (its free remainder booked for the pod) until the pod ends — the safe side: a newcomer
waits rather than sharing a card the running pod may be using. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from contracts.devices import SliceSpec
from contracts.workloads import DeviceRequest
from services.core.devices import DeviceConfig, NodeFit, VendorRegistry, fit_task
from services.core.ledger import CardState


def book_running(
    here: Sequence[CardState], requests: Sequence[DeviceRequest], *, registry: VendorRegistry,
    config: DeviceConfig | None, node_annotations: Mapping[str, str] | None,
    pod_annotations: Mapping[str, str] | None = None,
) -> tuple[list[tuple[str, SliceSpec]], str | None]:
    """A running pod's (card, slice) on its node's cards, fitted in the node's real mode (its
    annotations), else the held-back cards and why the fit failed. One rule for simulate and
    the allocator."""
    fit = fit_task([(c.spec, c.usage) for c in here if c.spec is not None], requests,
                   registry=registry, config=config, node_annotations=node_annotations,
                   pod_annotations=pod_annotations)  # fmt: skip
    if isinstance(fit, NodeFit):
        return [(a.card, a.slice) for a in fit.assignments], None
    return holdback_slices(here, requests), fit.message


def holdback_slices(
    cards: Sequence[CardState], requests: Sequence[DeviceRequest]
) -> list[tuple[str, SliceSpec]]:
    """(card, slice) for each card of the requests' vendors with room left: what is free of it,
    exclusive where the card is otherwise empty (so no slice can join it)."""
    vendors = {r.vendor for r in requests}
    out: list[tuple[str, SliceSpec]] = []
    for state in cards:
        spec, u = state.spec, state.usage
        if spec is None or spec.vendor not in vendors or u.retired:
            continue
        if u.exclusive or u.slices_used >= spec.split_count:
            continue  # nobody else can join it anyway
        memory = max(0, spec.memory - u.memory_used)
        cores = max(0, state.core_capacity - u.cores_used)
        out.append((state.uuid, SliceSpec(kind="soft", memory=memory, cores=cores,
                                          exclusive=not u.slices_used)))  # fmt: skip
    return out


class Unfitted(NamedTuple):
    """A running pod that did not fit its node's free cards: who and where, for the Warning
    Event a cluster shows on the pod (`kubectl describe pod`), and the line every log gets."""

    namespace: str
    pod: str
    node: str
    text: str


def unfitted_warning(namespace: str, pod: str, node: str, reason: str, held: Sequence[str]) -> str:
    """The one wording for simulate, the services and the cluster."""
    cards = ", ".join(held) or "none free"
    return (f"running pod {namespace}/{pod} on node {node} does not fit the node's free cards "
            f"({reason}): its cards are unknown, so {cards} stay out of use until it ends")  # fmt: skip
