"""`deviceshare` (Volcano `plugins/deviceshare`, volcano.md §3): accelerator sharing through the
device layer (`services.core.devices`: HAMi per-card fit, reasons, card policies, node score).

Predicate: the task's device requests must fit the node's cards (HAMi reasons aggregated per
node, e.g. `"2/2 CardInsufficientMemory"`). NodeOrder: only when `deviceshare.ScheduleWeight`
> 0 (Volcano), the device layer's node score under the node policy × weight. The card choice
made by the predicate is what the session books (Volcano books it in the predicates plugin's
allocate handler). Arguments: `deviceshare.SchedulePolicy` (card policy: binpack | spread |
HAMi chains; `fgd`/`tessera` select the placement package's rankers), `deviceshare.ScheduleWeight`,
`deviceshare.NodeSchedulePolicy` (Tessera: HAMi's node policy, default binpack),
`deviceshare.VGPUEnable` / `deviceshare.AscendHAMiVNPUEnable` (vendor switches),
`deviceshare.HamiVnpuCore`. Per-pod `hami.io/gpu-scheduler-policy` and
`hami.io/node-scheduler-policy` override them for that pod.
"""

from __future__ import annotations

from functools import cache

from contracts.devices import CardSpec, CardUsage
from contracts.events import SliceAssignment
from services.core.devices import (
    DeviceConfig,
    NodeFit,
    PolicyError,
    TaskDevices,
    VendorRegistry,
    build_vendors,
    fit_node,
    prepare_task,
)
from services.core.devices.policies import node_preference
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.session import Session
from services.core.scheduling.status import Status, unresolvable, unschedulable


@cache
def default_vendors() -> VendorRegistry:
    return build_vendors()


def _flag(v: object, default: bool = False) -> bool:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    return str(v).lower() == "true"


class DeviceSharePlugin:
    name = "deviceshare"

    def __init__(self, conf: PluginConf, vendors: VendorRegistry | None = None) -> None:
        args = conf.arguments
        self.vendors = vendors or default_vendors()
        self.weight = float(args.get("deviceshare.ScheduleWeight", 0) or 0)
        policy = str(args.get("deviceshare.SchedulePolicy") or "spread")
        self.enabled_vendors = set()
        if _flag(args.get("deviceshare.VGPUEnable")):
            self.enabled_vendors.add("nvidia")
        if _flag(args.get("deviceshare.AscendHAMiVNPUEnable")):
            self.enabled_vendors.add("huawei")
        ranker = None
        if policy in ("fgd", "tessera", "fgd-exact"):
            from services.core.scheduling.plugins.placementrank import placement_ranker

            ranker = placement_ranker(policy)
            policy = "spread"
        self.config = DeviceConfig(
            card_policy=policy,
            node_policy=str(args.get("deviceshare.NodeSchedulePolicy") or "binpack"),
            hami_vnpu_core=_flag(args.get("deviceshare.HamiVnpuCore")),
            card_ranker=ranker,
        )
        self._prepared: dict[str, TaskDevices | str] = {}
        self._fits: dict[tuple[str, str], NodeFit] = {}

    def on_session_open(self, ssn: Session) -> None:
        ssn.device_binder = self.bind

    def _task(self, task: TaskInfo) -> TaskDevices | str:
        got = self._prepared.get(task.uid)
        if got is None:
            try:
                got = prepare_task(
                    task.spec.devices, task.spec.annotations, self.config, self.vendors
                )
            except (PolicyError, KeyError) as exc:
                got = str(exc)
            self._prepared[task.uid] = got
        return got

    def _cards(self, node: NodeInfo) -> list[tuple[CardSpec, CardUsage]]:
        return [(c.spec, c.usage) for c in node.cards]

    def predicate(self, task: TaskInfo, node: NodeInfo) -> Status | None:
        if not task.spec.devices:
            return None
        for req in task.spec.devices:
            if self.enabled_vendors and req.vendor not in self.enabled_vendors:
                return unresolvable(self.name, f"device vendor {req.vendor} is not enabled")
        prepared = self._task(task)
        if isinstance(prepared, str):
            return unresolvable(self.name, prepared)
        result = fit_node(prepared, self._cards(node), node.annotations)
        if not isinstance(result, NodeFit):
            return unschedulable(self.name, *result.reasons)
        self._fits[(task.uid, node.name)] = result
        return None

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        if self.weight <= 0 or not task.spec.devices:
            return 0.0
        fit = self._fits.get((task.uid, node.name))
        prepared = self._task(task)
        if fit is None or isinstance(prepared, str):
            return 0.0
        return node_preference(prepared.node_policy, fit.score) * self.weight

    def bind(self, task: TaskInfo, node: NodeInfo) -> tuple[SliceAssignment, ...]:
        prepared = self._task(task)
        if isinstance(prepared, str):
            return ()
        result = fit_node(prepared, self._cards(node), node.annotations)
        self._fits.clear()
        if not isinstance(result, NodeFit):
            return ()
        seqs = {c.spec.uuid: c.seq for c in node.cards}
        return tuple(
            SliceAssignment(card=a.card, node=node.name, slice=a.slice, expected_seq=seqs[a.card])
            for a in result.assignments
        )
