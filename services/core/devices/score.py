"""HAMi device and node scores (``pkg/scheduler/policy/gpu_policy.go``, ``score.go``).

Device score (``ComputeScore``), *including* the request::

    10 * (wSlot*(req + Used)/Count + wCore*(Σcore + Usedcores)/Totalcore + wMem*(Σmem + Usedmem)/Totalmem)

where ``req`` counts the requests whose ``type`` *equals* the card type (so NVIDIA requests,
typed ``NVIDIA``, drop out on cards typed ``NVIDIA-<model>``, exactly as in HAMi), ``Σmem`` uses
``Totalmem*pct/100`` for a set percentage and ``Memreq`` otherwise; 0 if any total is 0.

Node score (``ComputeDefaultScore``) on usage *before* the pod::

    10 * (ΣUsed/ΣCount + ΣUsedcores/ΣTotalcore + ΣUsedmem/ΣTotalmem)

Weights come from the pod annotation ``hami.io/device-scoring-weights: "slot=1,core=1,memory=3"``
(all three keys, non-negative integers, at least one > 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from contracts.devices import CardSpec, CardUsage
from contracts.workloads import DeviceRequest

WEIGHTS_ANNOTATION = "hami.io/device-scoring-weights"
PCT_UNSET = 101


class PolicyError(ValueError):
    """A pod annotation or config value that names an unknown policy or bad weights."""


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    slot: int = 1
    core: int = 1
    memory: int = 1


DEFAULT_WEIGHTS = ScoreWeights()


def parse_weights(text: str | None) -> ScoreWeights:
    """``slot=1,core=1,memory=3`` → weights; None/empty → the default 1,1,1."""
    if not text:
        return DEFAULT_WEIGHTS
    values: dict[str, int] = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in ("slot", "core", "memory"):
            raise PolicyError(
                f"{WEIGHTS_ANNOTATION}={text!r}: expected slot=<n>,core=<n>,memory=<n>"
            )
        try:
            value = int(raw.strip())
        except ValueError:
            raise PolicyError(f"{WEIGHTS_ANNOTATION}={text!r}: {key} is not an integer") from None
        if value < 0:
            raise PolicyError(f"{WEIGHTS_ANNOTATION}={text!r}: {key} must be >= 0")
        values[key] = value
    if set(values) != {"slot", "core", "memory"}:
        raise PolicyError(f"{WEIGHTS_ANNOTATION}={text!r}: slot, core and memory are all required")
    if not any(values.values()):
        raise PolicyError(f"{WEIGHTS_ANNOTATION}={text!r}: at least one weight must be > 0")
    return ScoreWeights(values["slot"], values["core"], values["memory"])


def request_memory_on(total_memory: int, request: DeviceRequest) -> int:
    if request.memory_pct not in (0, PCT_UNSET):
        return total_memory * request.memory_pct // 100
    return request.memory


def device_score(
    card: CardSpec,
    used: int,
    used_cores: int,
    used_memory: int,
    requests: Sequence[DeviceRequest],
    weights: ScoreWeights = DEFAULT_WEIGHTS,
) -> float:
    """HAMi ``ComputeScore`` of one card for the requests of one container (see module doc)."""
    if card.split_count == 0 or card.cores == 0 or card.memory == 0:
        return 0.0
    n = cores = mem = 0
    for r in requests:
        if r.type == card.type:
            n += 1
            cores += r.cores
            mem += request_memory_on(card.memory, r)
    return 10.0 * (
        weights.slot * (n + used) / card.split_count
        + weights.core * (cores + used_cores) / card.cores
        + weights.memory * (mem + used_memory) / card.memory
    )


def usage_score(
    card: CardSpec,
    usage: CardUsage,
    requests: Sequence[DeviceRequest] = (),
    weights: ScoreWeights = DEFAULT_WEIGHTS,
) -> float:
    """:func:`device_score` from a ledger usage."""
    return device_score(
        card, usage.slices_used, usage.cores_used, usage.memory_used, requests, weights
    )


def node_score(cards: Iterable[tuple[CardSpec, CardUsage]]) -> float:
    """HAMi ``ComputeDefaultScore`` on the node's usage before the pod; 0 if any total is 0."""
    count = total_cores = total_mem = used = used_cores = used_mem = 0
    for spec, usage in cards:
        count += spec.split_count
        total_cores += spec.cores
        total_mem += spec.memory
        used += usage.slices_used
        used_cores += usage.cores_used
        used_mem += usage.memory_used
    if count == 0 or total_cores == 0 or total_mem == 0:
        return 0.0
    return 10.0 * (used / count + used_cores / total_cores + used_mem / total_mem)
