"""The kubelet's side of the device-plugin API, for one node, over real unix sockets: its
Registration service on `kubelet.sock`, a ListAndWatch stream per registered plugin (the
devices it last sent, and the node's `status.allocatable` patched from the healthy ones, as a
kubelet does), and pod admission: a Pending pod bound to the node gets, per container and
device resource, GetPreferredAllocation then Allocate with IDs of the kubelet's choosing; it is
then Running, or Failed with `UnexpectedAdmissionError` when Allocate was refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from services.kube.client import Kube, KubeError, nodes_path, pods_path
from services.kube.listwatch import Reflector
from services.nodeagent.deviceplugin.api import deviceplugin_pb2 as pb
from services.nodeagent.deviceplugin.api import deviceplugin_pb2_grpc as pb_grpc
from services.runtime.tasks import cancel_all


@dataclass
class Admitted:
    """What the kubelet did for one pod: per container, the IDs it chose and the response."""

    chosen: list[list[str]] = field(default_factory=list)
    envs: list[dict[str, str]] = field(default_factory=list)
    mounts: list[list[tuple[str, str, bool]]] = field(default_factory=list)
    error: str = ""


class FakeKubelet(pb_grpc.RegistrationServicer):
    def __init__(self, directory: Path, kube: Kube, node: str, *, wrong_count: frozenset[str] = frozenset()) -> None:
        """`wrong_count`: pods for which the kubelet asks one device more than the container
        requests (an Allocate the plugin must refuse)."""
        self.directory = directory
        self.kube = kube
        self.node = node
        self.wrong_count = wrong_count
        self.registrations: list[pb.RegisterRequest] = []
        self.devices: dict[str, list[pb.Device]] = {}  # resource -> last ListAndWatch answer
        self.sends = 0
        self.admitted: dict[str, Admitted] = {}
        self.changed = asyncio.Condition()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._used: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._server: grpc.aio.Server | None = None

    async def __aenter__(self) -> FakeKubelet:
        self._server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.directory / 'kubelet.sock'}")
        await self._server.start()
        self._tasks.append(asyncio.create_task(self._pods()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await cancel_all(self._tasks)
        for ch in self._channels.values():
            await ch.close()
        assert self._server is not None
        await self._server.stop(None)

    async def wait_for(self, what: Any) -> None:
        """Until `what()` holds of this kubelet's state (woken by each change, no polling)."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(what), 60)

    async def _changed(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    # --- Registration --------------------------------------------------------------------------

    async def Register(self, request: pb.RegisterRequest, context: object) -> pb.Empty:
        self.registrations.append(request)
        channel = grpc.aio.insecure_channel(f"unix://{self.directory / request.endpoint}")
        self._channels[request.resource_name] = channel
        self._tasks.append(asyncio.create_task(self._watch(request.resource_name, channel)))
        await self._changed()
        return pb.Empty()

    async def _watch(self, resource: str, channel: grpc.aio.Channel) -> None:
        stub = pb_grpc.DevicePluginStub(channel)
        try:
            async for answer in stub.ListAndWatch(pb.Empty()):
                self.devices[resource] = list(answer.devices)
                self.sends += 1
                healthy = sum(d.health == "Healthy" for d in answer.devices)
                await self.kube.patch(nodes_path(self.node) + "/status",
                                      {"status": {"allocatable": {resource: str(healthy)}, "capacity": {resource: str(len(answer.devices))}}})  # fmt: skip
                await self._changed()
        except grpc.aio.AioRpcError as exc:
            # the plugin went away (stopped before this kubelet, in a test's teardown): as the
            # kubelet does, the watch ends and the resource waits for the next Register
            if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                raise

    # --- admission -----------------------------------------------------------------------------

    async def _pods(self) -> None:
        query = {"fieldSelector": f"spec.nodeName={self.node}"}
        async for ch in Reflector(self.kube, pods_path(), query=query).changes():
            if ch.kind != "upsert":
                continue
            meta = ch.obj.get("metadata") or {}
            name = str(meta.get("name"))
            if (ch.obj.get("spec") or {}).get("nodeName") != self.node or name in self.admitted:
                continue
            if (ch.obj.get("status") or {}).get("phase") not in (None, "Pending"):
                continue
            self.admitted[name] = Admitted()
            with contextlib.suppress(KubeError):
                await self._admit(ch.obj, self.admitted[name])
            await self._changed()

    async def _admit(self, pod: dict[str, Any], out: Admitted) -> None:
        meta = pod["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        for c in pod["spec"]["containers"]:
            limits = (c.get("resources") or {}).get("limits") or {}
            for resource, channel in self._channels.items():
                if resource not in limits:
                    continue
                stub = pb_grpc.DevicePluginStub(channel)
                n = int(limits[resource])
                free = [d.ID for d in self.devices.get(resource, []) if d.health == "Healthy" and d.ID not in self._used]
                pref = await stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
                    pb.ContainerPreferredAllocationRequest(available_deviceIDs=free, allocation_size=n)]))  # fmt: skip
                ids = list(pref.container_responses[0].deviceIDs)
                if name in self.wrong_count:
                    ids = free[: n + 1]
                try:
                    answer = await stub.Allocate(pb.AllocateRequest(
                        container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))  # fmt: skip
                except grpc.aio.AioRpcError as exc:
                    out.error = exc.details() or str(exc.code())
                    await self.kube.patch(pods_path(ns, name, "status"), {"status": {
                        "phase": "Failed", "reason": "UnexpectedAdmissionError", "message": out.error}})  # fmt: skip
                    return
                self._used.update(ids)
                grant = answer.container_responses[0]
                out.chosen.append(ids)
                out.envs.append(dict(grant.envs))
                out.mounts.append([(m.container_path, m.host_path, m.read_only) for m in grant.mounts])
        await self.kube.patch(pods_path(ns, name, "status"), {"status": {"phase": "Running"}})
