"""`get nodes` AGE of a Node deleted and made again under its name (review rev-sre, finding 7):
kubectl shows the new object's creationTimestamp; Tessera showed the first registration's."""

from __future__ import annotations

import msgspec

from contracts.envelope import TYPE
from contracts.events import NodeLost, NodeRegistered
from contracts.subjects import Subjects
from services.cli import kubeobjects as ko
from services.kube.nodesource import _same
from services.runtime.eventlog.model import StoredMessage


def _log(events: list[tuple[NodeRegistered | NodeLost, str]]) -> list[StoredMessage]:
    s = Subjects()
    return [
        StoredMessage(i, s.node(ev.node), msgspec.json.encode(ev), {TYPE: type(ev).__name__, ko.TIME_HEADER: at})
        for i, (ev, at) in enumerate(events, 1)
    ]


def _reg(node: str, uid: str = "", cpu: int = 8000) -> NodeRegistered:
    return NodeRegistered(node=node, cpu_milli=cpu, memory_mib=1024, uid=uid)


def test_a_node_made_again_under_its_name_is_born_at_its_first_registration() -> None:
    cat = ko.catalog(_log([
        (_reg("n0"), "2026-12-01T00:00:00Z"),           # an older agent's: no uid
        (_reg("n3", "u-old"), "2026-12-01T00:00:00Z"),
        (_reg("n0", "u-n0", cpu=4000), "2026-12-01T00:05:00Z"),  # the same object, uid now said
        (_reg("n3", "u-old", cpu=4000), "2026-12-01T00:06:00Z"),  # an update of the same object
        (NodeLost(node="n3", reason="node deleted"), "2026-12-01T00:09:00Z"),
        (_reg("n3", "u-new"), "2026-12-01T00:09:05Z"),  # made again: another object
        (_reg("n3", "u-new", cpu=2000), "2026-12-01T00:09:30Z"),
    ]))  # fmt: skip
    assert cat.nodes["n0"].time == "2026-12-01T00:00:00Z"
    assert cat.nodes["n3"].time == "2026-12-01T00:09:05Z"


def test_an_upgraded_agent_does_not_register_a_node_again_for_its_uid_alone() -> None:
    assert _same(_reg("n0"), _reg("n0", "u-n0"))
    assert not _same(_reg("n0", "u-old"), _reg("n0", "u-new"))
    assert not _same(_reg("n0"), _reg("n0", "u-n0", cpu=1))
