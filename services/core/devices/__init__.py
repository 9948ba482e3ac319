"""The pure device layer (HAMi rules): catalogue, request parsing, per-card fit, scores, policies.

Scheduler / allocator entry points:

* :func:`build_vendors` (``registry``) once at start, from :func:`load_catalogue` or defaults;
* :func:`parse_container` (admission) → ``DeviceRequest``s or :class:`RequestRejected`;
* :func:`prepare_task` once per pod, :func:`fit_node` per node → :class:`NodeFit` (slices +
  node score) or :class:`NodeMisfit` (``"2/2 CardInsufficientMemory"``); :func:`choose_node`.

No I/O, no clock, no randomness.
"""

from services.core.devices.catalogue import (
    AscendChip,
    Catalogue,
    NvidiaConfig,
    VnpuTemplate,
    catalogue_from_mapping,
    default_catalogue,
    load_catalogue,
)
from services.core.devices.fit import (
    CardAssignment,
    DeviceConfig,
    FitResult,
    NodeFit,
    NodeMisfit,
    TaskDevices,
    choose_node,
    fit_node,
    fit_task,
    prepare_task,
)
from services.core.devices.policies import CardPolicy, CardRanker, order_cards, parse_card_policy
from services.core.devices.registry import VendorRegistry, build_vendors
from services.core.devices.requests import check_container, parse_container
from services.core.devices.score import (
    PolicyError,
    ScoreWeights,
    device_score,
    node_score,
    parse_weights,
)
from services.core.devices.templates import trim_memory
from services.core.devices.vendor import DeviceVendor
from services.core.devices.violations import CatalogueError, RequestRejected, Violation

__all__ = [
    "AscendChip",
    "CardAssignment",
    "CardPolicy",
    "CardRanker",
    "Catalogue",
    "CatalogueError",
    "DeviceConfig",
    "DeviceVendor",
    "FitResult",
    "NodeFit",
    "NodeMisfit",
    "NvidiaConfig",
    "PolicyError",
    "RequestRejected",
    "ScoreWeights",
    "TaskDevices",
    "VendorRegistry",
    "Violation",
    "VnpuTemplate",
    "build_vendors",
    "catalogue_from_mapping",
    "check_container",
    "choose_node",
    "default_catalogue",
    "device_score",
    "fit_node",
    "fit_task",
    "load_catalogue",
    "node_score",
    "order_cards",
    "parse_card_policy",
    "parse_container",
    "parse_weights",
    "prepare_task",
    "trim_memory",
]
