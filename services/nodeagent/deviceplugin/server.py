"""The kubelet's device-plugin API v1beta1 over gRPC: one plugin server per resource, each on
its own unix socket in the device-plugins directory, registered with the kubelet's
Registration service (`kubelet.sock` there).

The kubelet removes every plugin socket when it restarts and forgets the plugins, so a new
`kubelet.sock`, or one of our sockets gone, makes the servers start anew and register again
at the next refresh, as HAMi's plugins do on their file watch. The decisions are `NodeSide`'s; this module only speaks gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import grpc

from services.nodeagent.deviceplugin.allocate import AllocateError
from services.nodeagent.deviceplugin.api import deviceplugin_pb2 as pb
from services.nodeagent.deviceplugin.api import deviceplugin_pb2_grpc as pb_grpc
from services.nodeagent.deviceplugin.node import NodeSide
from services.nodeagent.deviceplugin.resources import Resource, preferred
from services.runtime.waits import within

log = logging.getLogger(__name__)

VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_DIR = Path("/var/lib/kubelet/device-plugins")
KUBELET_CHECK = 1.0  # seconds between looks at kubelet.sock
RETRY_REGISTER = 5.0  # seconds between registrations the kubelet refused


def listed(resource: Resource) -> pb.ListAndWatchResponse:
    devices = []
    for d in resource.devices:
        topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=d.numa)]) if d.numa is not None else None
        devices.append(pb.Device(ID=d.id, health=d.health, topology=topology))
    return pb.ListAndWatchResponse(devices=devices)


class Plugin(pb_grpc.DevicePluginServicer):
    """One resource's DevicePlugin service."""

    def __init__(self, side: NodeSide, resource: str) -> None:
        self.side = side
        self.resource = resource

    async def GetDevicePluginOptions(self, request: pb.Empty, context: object) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(get_preferred_allocation_available=True)

    async def ListAndWatch(self, request: pb.Empty, context: object):  # type: ignore[no-untyped-def]
        seen = -1
        while True:
            seen = await self.side.wait_change(seen)
            res = self.side.resources.get(self.resource)
            yield listed(res) if res is not None else pb.ListAndWatchResponse()

    async def GetPreferredAllocation(self, request: pb.PreferredAllocationRequest,
                                     context: object) -> pb.PreferredAllocationResponse:  # fmt: skip
        wanted = await self.side.wanted_cards(self.resource)
        out = [pb.ContainerPreferredAllocationResponse(deviceIDs=preferred(
            list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size, wanted))
            for r in request.container_requests]  # fmt: skip
        return pb.PreferredAllocationResponse(container_responses=out)

    async def Allocate(self, request: pb.AllocateRequest, context: grpc.aio.ServicerContext) -> pb.AllocateResponse:
        try:
            answer = await self.side.allocate(self.resource, [list(r.devices_ids) for r in request.container_requests])
        except AllocateError as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            raise  # abort raises; unreachable
        return pb.AllocateResponse(container_responses=[
            pb.ContainerAllocateResponse(envs=g.envs, mounts=[
                pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                for m in g.mounts])
            for g in answer.grants])  # fmt: skip

    async def PreStartContainer(self, request: pb.PreStartContainerRequest, context: object) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()


class PluginServers:
    """The running plugin servers of a node, kept in step with its resources and the kubelet."""

    def __init__(self, side: NodeSide, directory: Path) -> None:
        self.side = side
        self.directory = directory
        self.servers: dict[str, grpc.aio.Server] = {}
        self.registered: list[str] = []  # resource names, in the order registered
        self._kubelet: tuple[int, int] | None = None  # kubelet.sock's identity when registered
        self._syncing = asyncio.Lock()  # the refresh and the kubelet watch both sync

    def _kubelet_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.directory / KUBELET_SOCKET)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_ctime_ns  # an inode number may be reused at once

    def _stale(self, kubelet: tuple[int, int] | None) -> bool:
        """The kubelet (`kubelet`: its socket's identity now) restarted since we registered: a
        new kubelet.sock, or our sockets removed."""
        if kubelet is None:
            return False
        gone = any(not (self.directory / self.side.resources[n].socket).exists()
                   for n in self.servers if n in self.side.resources)  # fmt: skip
        return kubelet != self._kubelet or gone

    async def watch_kubelet(self, stopping: asyncio.Event, every: float = KUBELET_CHECK) -> None:
        """Register again within a second or two of a kubelet restart, as HAMi's plugins watch
        kubelet.sock: left to the next refresh (30 s), the kubelet held the node's devices at 0
        from its checkpoint meanwhile, and pods admitted then failed. A resource whose
        registration failed is asked again every `RETRY_REGISTER` seconds."""
        last_try = 0.0
        loop = asyncio.get_running_loop()
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await within(stopping.wait(), every)
            if stopping.is_set():
                return
            missing = any(n not in self.servers for n in self.side.resources)
            if self._stale(self._kubelet_id()) or (missing and loop.time() - last_try >= RETRY_REGISTER):
                last_try = loop.time()
                try:
                    await self.sync()
                except Exception:  # (the next check asks again)
                    log.exception("registering with the kubelet failed")

    async def sync(self) -> None:
        """Start a server for each new resource and register it; all anew after a kubelet restart."""
        async with self._syncing:
            await self._sync()

    async def _sync(self) -> None:
        kubelet = self._kubelet_id()
        if kubelet is None:
            log.warning("no %s in %s: the kubelet is not up (will retry)", KUBELET_SOCKET, self.directory)
            return
        if self._stale(kubelet):  # (a restarted kubelet removed our sockets)
            await self.stop()
            self._kubelet = kubelet
        for name, res in self.side.resources.items():
            if name not in self.servers:
                await self._start(res)

    async def _start(self, res: Resource) -> None:
        path = self.directory / res.socket
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by an earlier run
        server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(Plugin(self.side, res.name), server)
        server.add_insecure_port(f"unix://{path}")
        await server.start()
        self.servers[res.name] = server
        try:
            async with grpc.aio.insecure_channel(f"unix://{self.directory / KUBELET_SOCKET}") as channel:
                await pb_grpc.RegistrationStub(channel).Register(pb.RegisterRequest(
                    version=VERSION, endpoint=res.socket, resource_name=res.name,
                    options=pb.DevicePluginOptions(get_preferred_allocation_available=True)), timeout=10)  # fmt: skip
        except grpc.aio.AioRpcError as exc:
            await server.stop(None)
            del self.servers[res.name]
            log.warning("registering %s with the kubelet failed: %s (will retry)", res.name, exc.details())
            return
        self.registered.append(res.name)
        log.info("registered %s with the kubelet (%d devices, %s)", res.name, len(res.devices), res.socket)

    async def stop(self) -> None:
        for server in self.servers.values():
            await server.stop(None)
        self.servers.clear()
