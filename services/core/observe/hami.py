"""HAMi's per-card gauges from the allocator's ledgers (HAMi `cmd/scheduler/metrics.go`).

HAMi's scheduler exports what it has *allocated* on each device (not what the device uses:
that is the node monitor's job, and Tessera's node agent measures nothing). The names, label
names and units are HAMi's, so its Grafana dashboard and HAMi-WebUI queries read Tessera:

* memory in bytes (the ledger's MB are MiB, as HAMi's device plugins register them: × 2²⁰);
* the core ratios as HAMi exports them (`normalizeCoreMetrics`): limit 100 on every card
  with cores, allocated `ceil(used / total × 100)` — % of the card on a hami-core card as it
  counts, and the AI cores of Ascend template mode (total aiCore, `CardState.core_capacity`)
  as a % of the card's, not as a count (a full 20-core card: 100, not 20). Computed in HAMi's
  float order, so the value is HAMi's to the unit (7 % of 100 reads 8 there, and here);
* `device_cores` on the allocated-memory gauge is the cores allocated, as a label (HAMi's
  quirk, kept so its queries match);
* every series carries HAMi's constant `zone="vGPU"` (its collector is registered with it).

A card with no registration (a ledger event before its `CardRegistered`) exports nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from services.core.ledger import CardState
from services.core.observe.series import MetricSpec, Series

MIB = 1024 * 1024
ZONE = ("zone", "vGPU")  # HAMi: prometheus.WrapRegistererWith({"zone": "vGPU"}, reg)

_DEVICE = ("node", "device_uuid", "device_index", "device_type")

MEMORY_LIMIT = MetricSpec("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", _DEVICE)
CORE_LIMIT = MetricSpec("hami_gpu_core_limit_ratio", "Device core limit for a certain GPU", _DEVICE)
MEMORY_ALLOCATED = MetricSpec(
    "hami_gpu_memory_allocated_bytes", "Device memory allocated for a certain GPU",
    ("node", "device_uuid", "device_index", "device_cores", "device_type"),
)  # fmt: skip
SHARED = MetricSpec("hami_gpu_shared_count", "Number of containers sharing this GPU", _DEVICE)
CORE_ALLOCATED = MetricSpec("hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", _DEVICE)
OVERVIEW = MetricSpec(
    "hami_node_gpu_overview", "GPU overview on a certain node",
    ("node", "device_uuid", "device_index", "device_cores", "shared_containers",
     "device_memory_limit", "device_type"),
)  # fmt: skip
MEMORY_RATIO = MetricSpec(
    "hami_node_gpu_memory_allocated_ratio", "GPU Memory Allocated Percentage on a certain GPU",
    ("node", "device_uuid", "device_index"),
)  # fmt: skip

SPECS: tuple[MetricSpec, ...] = (MEMORY_LIMIT, CORE_LIMIT, MEMORY_ALLOCATED, SHARED,
                                 CORE_ALLOCATED, OVERVIEW, MEMORY_RATIO)  # fmt: skip


def core_ratios(total: int, used: int) -> tuple[float, float]:
    """HAMi's `normalizeCoreMetrics`: (limit, allocated) in % of the card; (0, 0) without cores."""
    if total <= 0:
        return 0.0, 0.0
    return 100.0, float(math.ceil(used / total * 100))  # (float64(used) / float64(total) * 100)


def card_series(cards: Iterable[CardState]) -> list[Series]:
    """Every HAMi scheduler gauge of every registered card, in the order given."""
    out: list[Series] = []
    for state in cards:
        spec = state.spec
        if spec is None:
            continue
        u = state.usage
        index, cores = str(spec.index), str(u.cores_used)
        device = (spec.node, state.uuid, index, spec.type)
        used = u.memory_used * MIB
        core_limit, core_allocated = core_ratios(state.core_capacity, u.cores_used)
        overview = (spec.node, state.uuid, index, cores, str(u.slices_used), str(spec.memory), spec.type)
        out += [
            Series(MEMORY_LIMIT.name, device, spec.memory * MIB),
            Series(CORE_LIMIT.name, device, core_limit),
            Series(MEMORY_ALLOCATED.name, (spec.node, state.uuid, index, cores, spec.type), used),
            Series(SHARED.name, device, u.slices_used),
            Series(CORE_ALLOCATED.name, device, core_allocated),
            Series(OVERVIEW.name, overview, used),
            Series(MEMORY_RATIO.name, device[:3], u.memory_used / spec.memory if spec.memory else 0.0),
        ]
    return out
