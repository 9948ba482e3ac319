"""Cards asked for by init containers: what a pod's booking must hold for them.

HAMi fits each init container on its own copy of the node's cards before the app containers
and keeps the peak: per card, usage is `max(init peak, app sum)` (hami.md §3.3 step 7, §4.1).
Tessera books one set of slices per pod for its whole life, so:

* an init container whose request the app containers' requests cover (same card model, no more
  cards, no more memory or cores per card) runs inside their slices: nothing more to book;
* init containers asking for cards where the app containers ask for none (an init step that
  prepares a model on the card, then a cpu-only app): per card model the largest ask (one that
  holds every other init container's ask of that model) is booked for the pod,
  in its own container slot (init containers come first in HAMi's pod annotations), so every
  init container fits when they run one after another — a 4,000 MB init container on cards with
  500 MB free is refused with HAMi's CardInsufficientMemory, never placed without its card
  (issue 27: such a pod was placed with no card at all, and its proposal looped);
* anything else — an init container asking for more of a model than the app containers ask
  for, or two init asks of one model neither of which holds the other — is refused with the rule,
  rather than booked in a way that could over-commit the card while the init container runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from contracts.workloads import DeviceRequest


@dataclass(frozen=True, slots=True)
class InitDeviceError:
    path: str
    value: str
    rule: str


def _whole(r: DeviceRequest) -> bool:
    return r.memory == 0 and r.memory_pct == 100


def covers(app: DeviceRequest, init: DeviceRequest) -> bool:
    """Whether `init` runs inside the slices booked for `app` (same model, ≤ per card)."""
    if app.vendor != init.vendor or app.type != init.type or app.count < init.count:
        return False
    if _whole(app):
        return True
    if _whole(init) or init.memory == 0 or init.memory > app.memory:
        return False  # a percentage or a whole card is not held inside a MB slice
    return init.cores <= app.cores or app.cores == 0


def _covered(apps: Sequence[DeviceRequest], inits: Sequence[DeviceRequest]) -> bool:
    return all(any(covers(a, r) for a in apps) for r in inits)


def _what(r: DeviceRequest) -> str:
    size = "whole card" if _whole(r) else f"{r.memory} MB" if r.memory else f"{r.memory_pct}%"
    return f"{r.count} × {r.type} ({size}{f', {r.cores} cores' if r.cores else ''})"


def covered_inits(apps: Sequence[DeviceRequest], inits: Sequence[DeviceRequest]) -> tuple[DeviceRequest, ...]:
    """The init containers' asks the app containers' requests hold (`covers`): booked nothing
    more, but each still gets its own slot in the binding (`TaskSpec.init_devices`)."""
    return tuple(r for _i, reqs in _by_container(inits) if _covered(apps, reqs) for r in reqs)


def _by_container(inits: Sequence[DeviceRequest]) -> list[tuple[int, list[DeviceRequest]]]:
    """The init containers' asks, grouped by container, in container order."""
    by_container: dict[int, list[DeviceRequest]] = {}
    for r in inits:
        by_container.setdefault(r.container, []).append(r)
    return sorted(by_container.items())


def with_init_devices(
    apps: tuple[DeviceRequest, ...], inits: tuple[DeviceRequest, ...], init_containers: int,
    path: str,
) -> tuple[tuple[DeviceRequest, ...], list[InitDeviceError]]:  # fmt: skip
    """The pod's device requests once its init containers' are accounted for (module doc).
    `inits[*].container` indexes spec.initContainers; the booked ones get slot
    `container - init_containers` (negative: before the app containers' slots)."""
    if not inits:
        return apps, []
    families = {(a.vendor, a.type) for a in apps}
    errors: list[InitDeviceError] = []
    loose: dict[int, list[DeviceRequest]] = {}
    for i, reqs in _by_container(inits):
        if _covered(apps, reqs):
            continue
        for r in reqs:
            if (r.vendor, r.type) in families and not any(covers(a, r) for a in apps):
                errors.append(InitDeviceError(
                    f"{path}.initContainers[{i}].resources.limits.{r.resource}", _what(r),
                    "an init container's cards must fit within the app containers' requests of "
                    "the same card model (Tessera books the app containers' slices for the whole "
                    f"pod): the app containers ask for {' + '.join(_what(a) for a in apps if a.type == r.type)}"))  # fmt: skip
        loose[i] = reqs
    if errors or not loose:
        return apps, errors
    families: dict[tuple[str, str], list[DeviceRequest]] = {}
    for reqs in loose.values():
        for r in reqs:
            families.setdefault((r.vendor, r.type), []).append(r)
    booked: list[DeviceRequest] = []
    for asks in families.values():  # per card model the largest ask, if one holds the others
        largest = next((r for r in asks if all(covers(r, other) for other in asks)), None)
        if largest is None:
            first, second = asks[0], next(r for r in asks if not covers(asks[0], r))
            errors.append(InitDeviceError(
                f"{path}.initContainers[{second.container}].resources.limits.{second.resource}",
                _what(second), f"init containers asking for {second.type} cards must be coverable "
                f"by one of them (Tessera books the largest for the pod): initContainers"
                f"[{first.container}] asks for {_what(first)}, which does not hold this one or "
                "the reverse"))  # fmt: skip
            continue
        booked.append(msgspec.structs.replace(largest, container=largest.container - init_containers))
    if errors:
        return apps, errors
    return tuple(booked) + apps, []
