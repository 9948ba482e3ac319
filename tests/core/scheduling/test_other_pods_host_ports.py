"""Host ports held by other schedulers' pods (rev-shared finding 1): a DaemonSet's node-exporter
on hostPort 9100 is in `NodeUsage.others`, and kube-scheduler's NodePorts rule (HostPortInfo:
same protocol and port, addresses overlapping when either is 0.0.0.0) keeps Tessera's pods
asking that port off the node, as it keeps them off a port one of Tessera's own pods holds.
Before, only Tessera's tasks were read, and the kubelet refused the pod bound there."""

from __future__ import annotations

import pytest

from contracts.events import NodeUsage, OtherPods
from contracts.workloads import HostPort
from services.core.scheduling.config import DEFAULT_CONF, parse_conf
from services.core.scheduling.decide import decide, open_session
from services.core.scheduling.decisions import Decisions
from services.core.scheduling.snapshot import Snapshot
from services.core.scheduling.status import Code
from tests.core.scheduling.scenarios import Scenario, _simulation, bound_of

PORTS = "node(s) didn't have free ports for the requested pod ports"


def _scenario(port: str) -> Scenario:
    """Two nodes, n1 and n2; Tessera's pod `new` asks `port` (a flow-style ports entry)."""
    workload = (
        "{apiVersion: v1, kind: Pod, metadata: {name: new, namespace: default}, spec: "
        f"{{containers: [{{name: c, image: busybox, ports: [{port}], "
        "resources: {requests: {cpu: 1, memory: 1Gi}}}]}}"
    )
    inventory = {"nodes": [{"name": "n1", "cpu": 4, "memory": "8Gi"}, {"name": "n2", "cpu": 4, "memory": "8Gi"}]}
    return Scenario("inline", "other-pods-ports", DEFAULT_CONF, inventory, workload, {})


def _decide(port: str, held: dict[str, tuple[HostPort, ...]]) -> tuple[Decisions, Snapshot]:
    """One session after NodeUsage says a kube-system pod of another scheduler holds `held`'s
    ports on each node named."""
    sc = _scenario(port)
    sim = _simulation(sc, cycles=0)
    sim.run()
    for node, ports in held.items():
        others = (OtherPods(namespace="kube-system", labels={"app": "node-exporter"}, host_ports=ports),)
        sim.projection.apply(sim.projection.seq + 1, NodeUsage(node=node, pods=1, others=others))
    snap = sim.projection.snapshot()
    return decide(snap, parse_conf(sc.conf)), snap


TCP_9100 = HostPort(port=9100)


@pytest.mark.parametrize(("asked", "held", "refused"), [
    ("{containerPort: 9100, hostPort: 9100}", TCP_9100, True),  # the DaemonSet's port, 0.0.0.0 both
    ("{containerPort: 9100, hostPort: 9100, hostIP: 10.0.0.5}", TCP_9100, True),  # 0.0.0.0 held: every address
    ("{containerPort: 9100, hostPort: 9100}", HostPort(port=9100, ip="10.0.0.5"), True),  # 0.0.0.0 asked
    ("{containerPort: 9100, hostPort: 9100, hostIP: 10.0.0.6}", HostPort(port=9100, ip="10.0.0.5"), False),
    ("{containerPort: 9100, hostPort: 9100, protocol: UDP}", TCP_9100, False),  # another protocol
    ("{containerPort: 9100, hostPort: 9101}", TCP_9100, False),  # another port
])  # fmt: skip
def test_a_port_another_schedulers_pod_holds_is_not_free(asked: str, held: HostPort, refused: bool) -> None:
    """The port is held on both nodes: the pod waits with kube-scheduler's words, or is placed."""
    decisions, _ = _decide(asked, {"n1": (held,), "n2": (held,)})
    if refused:
        assert bound_of(decisions) == {}
        (u,) = decisions.unschedulable
        assert u.node_reasons == {"n1": PORTS, "n2": PORTS}, u.node_reasons
    else:
        assert list(bound_of(decisions)) == ["default/new"], decisions.unschedulable


def test_the_pod_goes_to_the_node_where_its_port_is_free() -> None:
    """Held on n1 only (the nodes alike in all else, n1 first): the pod goes to n2."""
    decisions, _ = _decide("{containerPort: 9100, hostPort: 9100}", {"n1": (TCP_9100,)})
    assert bound_of(decisions) == {"default/new": "n2"}


def test_explain_says_another_schedulers_pod_holds_it_and_no_eviction_frees_it() -> None:
    """No eviction of Tessera's frees another scheduler's port: the refusal is unresolvable
    (preempt and reclaim pass the node by), and explain names the namespace of the pod holding
    it, not a pod of Tessera's."""
    decisions, snap = _decide("{containerPort: 9100, hostPort: 9100}", {"n1": (TCP_9100,), "n2": (TCP_9100,)})
    (u,) = decisions.unschedulable
    held = f"hostPort TCP/9100 on 0.0.0.0: held by a pod of another scheduler in namespace kube-system ({PORTS})"
    assert [(g.reason, g.plugin, g.nodes) for g in u.groups] == [(held, "predicates", 2)], u.groups
    assert "ask another hostPort" in u.unblock, u.unblock
    ssn = open_session(snap, parse_conf(DEFAULT_CONF))  # type: ignore[arg-type]
    task = ssn.jobs["default/new"].tasks["new"]
    status = ssn.predicate(task, ssn.nodes["n1"])
    assert status is not None and status.reasons == (PORTS,)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, status
