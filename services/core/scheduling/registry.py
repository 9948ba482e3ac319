"""Plugin and action registries, built in one bootstrap function (STYLE §3, §14): name →
factory, duplicates refused, nothing registered by import side effects."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

from services.core.scheduling.config import PluginConf
from services.core.scheduling.hooks import Plugin
from services.core.scheduling.session import PluginFactory, Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> None:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[name] = item

    def as_mapping(self) -> Mapping[str, T]:
        return dict(self._items)


def build_plugins() -> Mapping[str, PluginFactory]:
    from services.core.scheduling.plugins.binpack import BinpackPlugin
    from services.core.scheduling.plugins.capacity import CapacityPlugin
    from services.core.scheduling.plugins.cdp import CdpPlugin
    from services.core.scheduling.plugins.conformance import ConformancePlugin
    from services.core.scheduling.plugins.deviceshare import DeviceSharePlugin
    from services.core.scheduling.plugins.drf import DrfPlugin
    from services.core.scheduling.plugins.gang import GangPlugin
    from services.core.scheduling.plugins.networktopology import NetworkTopologyAwarePlugin
    from services.core.scheduling.plugins.nodegroup import NodeGroupPlugin
    from services.core.scheduling.plugins.nodeorder import NodeOrderPlugin
    from services.core.scheduling.plugins.overcommit import OvercommitPlugin
    from services.core.scheduling.plugins.pdb import PdbPlugin
    from services.core.scheduling.plugins.predicates import PredicatesPlugin
    from services.core.scheduling.plugins.priority import PriorityPlugin
    from services.core.scheduling.plugins.proportion import ProportionPlugin
    from services.core.scheduling.plugins.resourcequota import ResourceQuotaPlugin
    from services.core.scheduling.plugins.sla import SlaPlugin

    reg: Registry[Callable[[PluginConf], Plugin]] = Registry("plugin")
    for cls in (PriorityPlugin, GangPlugin, ConformancePlugin, DrfPlugin, PredicatesPlugin,
                ProportionPlugin, CapacityPlugin, OvercommitPlugin, BinpackPlugin,
                NodeOrderPlugin, DeviceSharePlugin, SlaPlugin, ResourceQuotaPlugin,
                NetworkTopologyAwarePlugin, CdpPlugin, PdbPlugin, NodeGroupPlugin):  # fmt: skip
        reg.register(cls.name, cls)
    return reg.as_mapping()


def build_actions() -> Mapping[str, Action]:
    from services.core.scheduling.actions.allocate import AllocateAction
    from services.core.scheduling.actions.backfill import BackfillAction
    from services.core.scheduling.actions.enqueue import EnqueueAction
    from services.core.scheduling.actions.preempt import PreemptAction
    from services.core.scheduling.actions.reclaim import ReclaimAction

    reg: Registry[Action] = Registry("action")
    for action in (EnqueueAction(), AllocateAction(), BackfillAction(), PreemptAction(),
                   ReclaimAction()):  # fmt: skip
        reg.register(action.name, action)
    return reg.as_mapping()
