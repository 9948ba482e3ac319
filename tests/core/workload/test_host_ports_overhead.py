"""Host ports and pod overhead at admission (issue 22): what NodePorts and the resource fit read,
and the API server's port rules in its words."""

from __future__ import annotations

import pytest

from contracts.workloads import HostPort, TaskSpec
from services.core.devices import build_vendors
from services.core.workload import Workload, admit, load_documents
from services.core.workload.devicerequests import hami_parser

REG = build_vendors()


def run(text: str) -> Workload:
    return admit(load_documents(text), hami_parser(REG), REG.resource_names())


def pod(spec: str) -> str:
    return f"{{apiVersion: v1, kind: Pod, metadata: {{name: p}}, spec: {spec}}}"


def task(spec: str) -> TaskSpec:
    w = run(pod(spec))
    assert not w.rejections, [r.line() for r in w.rejections]
    return w.jobs[0].tasks[0]


def reasons(spec: str) -> list[str]:
    return [r.line() for r in run(pod(spec)).rejections]


def test_host_ports_of_app_and_init_containers_are_read_with_their_defaults() -> None:
    t = task("{initContainers: [{name: i, image: busybox, ports: [{containerPort: 9, hostPort: 9}]}],"
             " containers: [{name: c, image: busybox, ports: [{containerPort: 80, hostPort: 8080},"
             " {containerPort: 53, hostPort: 53, protocol: UDP, hostIP: 10.0.0.1},"
             " {containerPort: 81}]}]}")
    assert t.host_ports == (
        HostPort(port=8080, protocol="TCP", ip="0.0.0.0"),
        HostPort(port=53, protocol="UDP", ip="10.0.0.1"),
        HostPort(port=9, protocol="TCP", ip="0.0.0.0"),
    )


def test_host_network_publishes_the_container_port() -> None:
    t = task("{hostNetwork: true, containers: [{name: c, image: busybox, ports: [{containerPort: 8080}]}]}")
    assert t.host_ports == (HostPort(port=8080),)


@pytest.mark.parametrize(
    ("port", "want"),
    [
        ("{containerPort: 80, hostPort: 70000}",
         "spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
        ("{containerPort: 80, hostPort: -1}",
         "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive"),
        ("{containerPort: 80, hostPort: http}",
         'spec.containers[0].ports[0].hostPort: Invalid value: "http": must be between 1 and 65535, inclusive'),
        ("{containerPort: 80, hostPort: 8080, protocol: HTTP}",
         'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
        ("{containerPort: 80, hostPort: 8080, protocol: tcp}",
         'spec.containers[0].ports[0].protocol: Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"'),
        ("{containerPort: 80, hostPort: 8080, hostIP: 10.0.0}",
         'spec.containers[0].ports[0].hostIP: Invalid value: "10.0.0": must be a valid IP address'),
        ("{hostPort: 8080}", "spec.containers[0].ports[0].containerPort: Required value"),
        ("{containerPort: 0, hostPort: 8080}",
         "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive"),
    ],
)  # fmt: skip
def test_invalid_ports_are_refused_naming_field_and_rule(port: str, want: str) -> None:
    assert reasons(f"{{containers: [{{name: c, image: busybox, ports: [{port}]}}]}}") == [want]


def test_a_host_port_twice_in_one_pod_is_a_duplicate() -> None:
    got = reasons("{containers: [{name: a, image: busybox, ports: [{containerPort: 80, hostPort: 8080}]},"
                  " {name: b, image: busybox, ports: [{containerPort: 81, hostPort: 8080}]}]}")
    assert got == ['spec.containers[1].ports[0].hostPort: Duplicate value: "TCP/0.0.0.0/8080"']


def test_host_network_host_port_must_match_the_container_port() -> None:
    got = reasons("{hostNetwork: true, containers: [{name: c, image: busybox,"
                  " ports: [{containerPort: 80, hostPort: 8080}]}]}")
    assert got == ["spec.containers[0].ports[0].hostPort: Invalid value: 8080: "
                   "must match `containerPort` when `hostNetwork` is true"]


def test_overhead_is_added_after_the_init_container_maximum() -> None:
    """kube-scheduler: max(Σ app containers, max init container) + overhead, per resource."""
    t = task("{overhead: {cpu: 250m, memory: 128Mi}, initContainers: [{name: i, image: busybox,"
             " resources: {requests: {cpu: 2, memory: 64Mi}}}], containers: [{name: a, image: busybox,"
             " resources: {requests: {cpu: 500m, memory: 1Gi}}}, {name: b, image: busybox,"
             " resources: {requests: {cpu: 500m, memory: 1Gi}}}]}")
    assert (t.cpu_milli, t.memory_mib) == (2250, 2176)


def test_overhead_counts_in_the_implied_pod_groups_min_resources() -> None:
    w = run(pod("{overhead: {cpu: 1}, containers: [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]}"))
    assert w.jobs[0].min_resources == {"cpu": 2000}


def test_a_bad_overhead_quantity_is_refused() -> None:
    got = reasons("{overhead: {cpu: lots}, containers: [{name: c, image: busybox}]}")
    assert len(got) == 1 and got[0].startswith("spec.overhead.cpu: "), got


def test_scheduling_gates_are_read_in_order() -> None:
    t = task("{schedulingGates: [{name: example.com/a}, {name: b}],"
             " containers: [{name: c, image: busybox}]}")
    assert t.scheduling_gates == ("example.com/a", "b")


@pytest.mark.parametrize(("gates", "line"), [
    ("[{name: a}, {name: a}]", 'spec.schedulingGates[1].name: Duplicate value: "a"'),
    ("[{name: a}, {}]", "spec.schedulingGates[1].name: Required value"),
])  # fmt: skip
def test_scheduling_gates_the_api_server_refuses_are_refused_by_name(gates: str, line: str) -> None:
    """A gate without a name, or named twice, is refused as the API server refuses it, rather
    than a pod held gated on a gate nobody could remove."""
    got = reasons(f"{{schedulingGates: {gates}, containers: [{{name: c, image: busybox}}]}}")
    assert any(line in r for r in got), got
