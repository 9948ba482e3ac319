"""`python -m services.nodeagent`: one process hosting many simulated nodes.

python -m services.nodeagent --nats URL --inventory nodes.yaml [--heartbeat 1]
python -m services.nodeagent --node gpu-1 --cpu 64 --memory 512Gi --nvidia-smi-xml q.xml
... [--monitor --node-timeout 40]   # also watch heartbeats until the queue service does
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts.events import NodeRegistered
from services.core.devices.nodeconfig import NodeConfigError
from services.core.workload.quantity import cpu_milli, memory_mib_down
from services.nodeagent.heartbeat import nats_sink
from services.nodeagent.inventory import (
    discovered_node,
    machine_arch,
    nodes_from_inventory,
    read_node_config,
)
from services.nodeagent.monitor import NodeMonitor
from services.nodeagent.service import NodeAgent
from services.runtime import eventloop
from services.runtime.bootstrap import (
    common_parser,
    device_catalogue,
    run_service,
    scheduler_names,
)
from services.runtime.eventlog import EventLog


def parser() -> argparse.ArgumentParser:
    p = common_parser("nodeagent")
    p.add_argument("--inventory", type=Path, help="inventory YAML: the nodes to host")
    p.add_argument("--node", help="host one node described by discovery outputs")
    p.add_argument("--cpu", default="0", help="--node's cpu (Kubernetes quantity)")
    p.add_argument("--memory", default="0", help="--node's memory (Kubernetes quantity)")
    p.add_argument("--npu-smi", type=Path, help="a file with `npu-smi info` output")
    p.add_argument("--nvidia-smi-xml", type=Path, help="a file with `nvidia-smi -q -x` output")
    p.add_argument("--hami-vnpu-core", action="store_true", help="Ascend soft-slicing node (unless the node config says; neither: the device config's vnpus.hamiVnpuCore)")
    p.add_argument("--node-config", type=Path,
                   help="HAMi node-config.yaml (nodes: [{name, hami-vnpu-core, vDeviceCount, "
                        "filterDevices}]): per-node split count, soft slicing, filtered cards")  # fmt: skip
    p.add_argument("--heartbeat", type=float, default=1.0, help="seconds between heartbeats")
    p.add_argument("--monitor", action="store_true", help="also host the node-liveness monitor")
    p.add_argument("--node-timeout", type=float, default=40.0, help="silence before NodeLost (node-monitor-grace-period)")
    return p


def hosted_nodes(args: argparse.Namespace) -> list[NodeRegistered]:
    catalogue = device_catalogue(args.device_config)
    node_config = read_node_config(args.node_config)
    nodes = nodes_from_inventory(args.inventory, catalogue, node_config) if args.inventory else []
    if args.node:
        nodes.append(
            discovered_node(
                args.node,
                cpu_milli(args.cpu),
                memory_mib_down(args.memory),
                npu_smi=args.npu_smi.read_text() if args.npu_smi else "",
                nvidia_smi_xml=args.nvidia_smi_xml.read_text() if args.nvidia_smi_xml else "",
                catalogue=catalogue,
                hami_vnpu_core=args.hami_vnpu_core or None,  # not given: the node config's, the device config's
                node_config=node_config.get(args.node),
                arch=machine_arch(),
            )
        )
    return nodes


def kube_agent(event_log: EventLog, args: argparse.Namespace) -> object:
    """Every node of the cluster in one process (nodes, HAMi handshakes, pod phases)."""
    from services.kube.nodesource import KubeNodeAgent

    return KubeNodeAgent(event_log, args.kube, scheduler_names=scheduler_names(args),
                         catalogue=device_catalogue(args.device_config))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.kubeconfig or args.in_cluster:
        return eventloop.run(run_service("nodeagent", args, lambda log: kube_agent(log, args)))
    if not args.inventory and not args.node:
        parser().error("give --inventory FILE and/or --node NAME (with discovery outputs), "
                       "or --kubeconfig PATH")  # fmt: skip
    try:
        nodes = hosted_nodes(args)
    except NodeConfigError as exc:
        parser().error(f"--node-config {args.node_config}: {exc}")

    def build(event_log: EventLog) -> NodeAgent:
        nc = getattr(event_log, "nc", None)
        monitor = NodeMonitor(event_log, timeout=args.node_timeout) if args.monitor else None
        return NodeAgent(
            event_log,
            nodes,
            heartbeat_every=args.heartbeat,
            beat=nats_sink(nc) if nc is not None else None,
            monitor=monitor,
            monitor_nc=nc,
        )

    return eventloop.run(run_service("nodeagent", args, build))


if __name__ == "__main__":
    sys.exit(main())
