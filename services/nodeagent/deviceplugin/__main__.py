"""`python -m services.nodeagent.deviceplugin`: Tessera's node side on one node.

python -m services.nodeagent.deviceplugin --node $NODE_NAME --in-cluster \
    [--device-plugin-dir /var/lib/kubelet/device-plugins] [--node-config node-config.yaml] \
    [--device-config device-config.yaml] [--discovery-fixture DIR] [--report-every 30]

No NATS: the node side speaks only to the API server (its Node's annotations, the pods it
allocates) and to the kubelet; Tessera's cluster-side node agent reads the annotations.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from services.core.devices.catalogue import default_catalogue
from services.core.devices.nodeconfig import NodeConfigError
from services.kube.client import Kube, Limits, agent_of
from services.nodeagent.deviceplugin.allocate import HostPaths
from services.nodeagent.deviceplugin.node import REPORT_EVERY, NodeSide
from services.nodeagent.deviceplugin.server import DEFAULT_DIR, PluginServers
from services.nodeagent.deviceplugin.tools import Discovery
from services.nodeagent.inventory import read_node_config
from services.runtime.bootstrap import device_catalogue


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python -m services.nodeagent.deviceplugin")
    p.add_argument("--node", default=env("NODE_NAME", ""), help="this node's name (default $NODE_NAME)")
    p.add_argument("--kubeconfig", default=env("TESSERA_KUBECONFIG", ""))
    p.add_argument("--in-cluster", action="store_true", help="the pod's service account")
    p.add_argument("--device-plugin-dir", type=Path, default=DEFAULT_DIR,
                   help="the kubelet's device-plugins directory (kubelet.sock and the plugins' sockets)")  # fmt: skip
    p.add_argument("--device-config", default=env("TESSERA_DEVICE_CONFIG", ""),
                   help="HAMi device-config.yaml (default: HAMi's chart values)")  # fmt: skip
    p.add_argument("--node-config", type=Path, help="HAMi node-config.yaml (this node's entry applies)")
    p.add_argument("--hami-vnpu-core", action="store_true", help="Ascend soft slicing (unless the node config says; neither: the device config's vnpus.hamiVnpuCore)")
    p.add_argument("--discovery-fixture", type=Path,
                   help="read npu-smi.txt / nvidia-smi.xml from this directory, not the tools (tests)")  # fmt: skip
    p.add_argument("--npu-smi", default="npu-smi", help="the npu-smi command")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="the nvidia-smi command")
    p.add_argument("--report-every", type=float, default=REPORT_EVERY, help="seconds between refreshes")
    p.add_argument("--hami-core-path", default=HostPaths.hami_core,
                   help="HAMi's gpuHookPath: HAMi-core's library is looked for in <it>/vgpu")  # fmt: skip
    p.add_argument("--log-level", default=env("TESSERA_LOG_LEVEL", "INFO"))
    return p


async def serve(args: argparse.Namespace) -> int:
    catalogue = device_catalogue(args.device_config) or default_catalogue()
    config = read_node_config(args.node_config).get(args.node)
    discovery = Discovery(args.node, catalogue, fixture=args.discovery_fixture, npu_smi=args.npu_smi,
                          nvidia_smi=args.nvidia_smi, node_config=config,
                          hami_vnpu_core=args.hami_vnpu_core or None)  # fmt: skip
    kube = await Kube.connect(args.kubeconfig, Limits(qps=10, burst=20), agent=agent_of("deviceplugin"))
    side = NodeSide(kube, discovery, catalogue=catalogue, paths=HostPaths(hami_core=args.hami_core_path))
    servers = PluginServers(side, args.device_plugin_dir)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await asyncio.gather(side.run(stopping, args.report_every, on_refresh=servers.sync),
                             servers.watch_kubelet(stopping))  # fmt: skip
    finally:
        await servers.stop()
        await kube.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.node:
        parser().error("--node NAME (or $NODE_NAME from the downward API) is required")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(serve(args))
    except NodeConfigError as exc:
        parser().error(f"--node-config {args.node_config}: {exc}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
