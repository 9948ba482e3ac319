"""`deviceshare` (Volcano `plugins/deviceshare`, volcano.md §3): accelerator sharing through the
device layer (`services.core.devices`: HAMi per-card fit, reasons, card policies, node score).

Predicate: the task's device requests must fit the node's cards (HAMi reasons aggregated per
node, e.g. `"2/2 CardInsufficientMemory"`). NodeOrder: only when `deviceshare.ScheduleWeight`
> 0 (Volcano), the device layer's node score under the node policy × weight. The card choice
made by the predicate is what the session books (Volcano books it in the predicates plugin's
allocate handler). Arguments: `deviceshare.SchedulePolicy` (card policy: binpack | spread |
HAMi chains; or a placement policy `fgd` | `fgd-exact` | `tessera`, see below),
`deviceshare.ScheduleWeight`,
`deviceshare.NodeSchedulePolicy` (Tessera: HAMi's node policy, default binpack),
`deviceshare.VGPUEnable` / `deviceshare.AscendHAMiVNPUEnable` (vendor switches),
`deviceshare.HamiVnpuCore`. Per-pod `hami.io/gpu-scheduler-policy` and
`hami.io/node-scheduler-policy` override them for that pod.

Placement policies (`deviceshare.SchedulePolicy: tessera | fgd | fgd-exact`): node *and* card
choice come from `services.core.placement`, the same `Policy.evaluate` the openb replay drives
(`benchmarks/openb.py`). NodeOrder then scores every task, CPU-only ones included (where they go
decides how much card capacity CPU strands), as ScheduleWeight (1 if unset) × the policy's
score, with ties going to the earlier node in inventory order (the replay's first-in-order
rule); the card(s) the policy picked on the chosen node are tried first at bind time, still
under HAMi's checks. The predicate stays HAMi's fit. The target workload is derived from the
session's tasks (`placementrank.session_workload`). For the policy to decide alone, it must be
the only node-order plugin of the configuration (or outweigh the others); tasks the placement
model cannot express (several device requests, template slices) keep HAMi's order. One
difference from the replay remains on purpose: on clusters of 100+ nodes the session scores only
Volcano's sample of feasible nodes (`actions/nodes.num_to_find`), the replay scores them all.
"""

from __future__ import annotations

from dataclasses import replace
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
from services.core.devices.policies import PLACEMENT_POLICIES, node_preference
from services.core.placement import POLICIES, Policy, Request, fits
from services.core.scheduling.config import PluginConf
from services.core.scheduling.model import NodeInfo, TaskInfo
from services.core.scheduling.plugins.placementrank import (
    ClusterCards,
    node_view,
    placement_ranker,
    preferring,
    session_workload,
)
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


#: NodeOrder score of a node HAMi admits but the placement model does not (rounding at the edge):
#: below any policy score, so it is only chosen when nothing else fits.
UNFIT_SCORE = -1.0e9


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
        #: the placement policy's name when SchedulePolicy is one; built per session
        self.placement = policy if policy in PLACEMENT_POLICIES else ""
        if self.placement:
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
        self.policy: Policy | None = None
        self._cluster: ClusterCards | None = None
        self._requests: dict[str, Request | None] = {}
        self._order_scale = 1.0

    def on_session_open(self, ssn: Session) -> None:
        if ssn.conf.vendors is not None:  # a device-config.yaml given to the scheduler
            self.vendors = ssn.conf.vendors
        ssn.device_binder = self.bind
        if self.placement:
            self._cluster = ClusterCards(ssn.node_list)
            tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
            workload = session_workload(tasks, self._cluster)
            if workload is not None:
                self.policy = POLICIES[self.placement](workload, self._cluster.cards)
            self._order_scale = 1.0 / (len(ssn.snapshot.nodes) + 1)

    def _request(self, task: TaskInfo) -> Request | None:
        if task.uid not in self._requests:
            assert self._cluster is not None
            self._requests[task.uid] = self._cluster.request(task)
        return self._requests[task.uid]

    def placement_score(self, task: TaskInfo, node: NodeInfo) -> float | None:
        """The placement policy's score for ``node`` (higher is better), ties broken towards the
        earlier node; None when the policy does not apply to this task."""
        if self.policy is None:
            return None
        request = self._request(task)
        if request is None:
            return None
        view = node_view(node)
        if not fits(view, request):
            return UNFIT_SCORE  # HAMi's fit let it through; the placement model did not
        score = self.policy.evaluate(view, request).score
        if not isinstance(score, (int, float)):
            raise TypeError(f"{self.placement}: node order needs a scalar score, got {score!r}")
        step = self.policy.score_step
        return float(score) - (step * node.order * self._order_scale if step else 0.0)

    def placement_cards(self, task: TaskInfo, node: NodeInfo) -> tuple[str, ...]:
        """Uuids of the cards the placement policy takes on ``node`` (empty: no opinion)."""
        request = self._request(task) if self.policy is not None else None
        if request is None or not request.num_cards:
            return ()
        view = node_view(node)
        if not fits(view, request):
            return ()
        assert self.policy is not None
        cards = self.policy.evaluate(view, request).cards
        return tuple(node.cards[i].spec.uuid for i in cards)

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
        cards = self._cards(node)
        result = fit_node(prepared, cards, node.annotations)
        if not isinstance(result, NodeFit):
            need = max((r.memory for r in task.spec.devices), default=0)
            return unschedulable(self.name, *result.explained(cards, need))
        self._fits[(task.uid, node.name)] = result
        return None

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        if self.placement:
            score = self.placement_score(task, node)
            if score is not None:
                return score * (self.weight if self.weight > 0 else 1.0)
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
        chosen = self.placement_cards(task, node) if self.placement else ()
        if chosen and prepared.ranker is not None:
            prepared = replace(prepared, ranker=preferring(chosen, prepared.ranker))
        result = fit_node(prepared, self._cards(node), node.annotations)
        self._fits.clear()
        if not isinstance(result, NodeFit):
            return ()
        seqs = {c.spec.uuid: c.seq for c in node.cards}
        return tuple(
            SliceAssignment(card=a.card, node=node.name, slice=a.slice, expected_seq=seqs[a.card])
            for a in result.assignments
        )
