"""Tessera's node side on a cluster: the node agent of one node with 8 Ascend 910B3 cards (a
discovery fixture) registers them with a kubelet over real unix sockets and on its Node in
HAMi's annotations; the control plane schedules and binds a pod with two 16 GB slices, and the
kubelet's Allocate gets exactly those cards' environment, the lock released and the pod's
HAMi annotations still readable. A card that turns Critical goes Unhealthy to the kubelet and
unhealthy in the allocator's ledger; an Allocate the plugin refuses fails the pod and frees
its slices."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts import hami
from contracts.events import CardRegistered, SliceReleased, SliceReserved
from services.cli.up import ControlPlane
from services.core.devices.catalogue import default_catalogue
from services.kube import pods as kpods
from services.kube.client import nodes_path
from services.nodeagent.deviceplugin.allocate import HostPaths
from services.nodeagent.deviceplugin.node import NodeSide
from services.nodeagent.deviceplugin.server import PluginServers
from services.nodeagent.deviceplugin.tools import NPU_SMI_FIXTURE, NVIDIA_SMI_FIXTURE, Discovery
from services.runtime.eventlog.jetstream import JetStreamLog
from tests.allocator.scenario import decoded
from tests.kube.cluster import Cluster
from tests.kube.fakekubelet import FakeKubelet
from tests.kube.workload import as_pod
from tests.processes import wait_until

NODE = "npu-1"
RESOURCE = "huawei.com/Ascend910B3"
DISCOVERY = Path(__file__).resolve().parents[1] / "fixtures" / "discovery"
RECORDED = DISCOVERY / "npu-smi-910b3x8.txt"
SLICE = {RESOURCE: "1", f"{RESOURCE}-memory": "16384"}


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    """Short: a unix socket path must stay under 108 bytes, pytest's temp paths may not."""
    d = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def hami_core_installed(root: Path) -> HostPaths:
    """Host paths with HAMi-core's limiter in place (a stand-in library: only its presence is
    read), so NVIDIA cards are served in shares."""
    hook = root / "vgpu"
    hook.mkdir(parents=True)
    (hook / "libvgpu.so").write_bytes(b"\x7fELF")
    (hook / "ld.so.preload").write_text(f"{hook / 'libvgpu.so'}\n")
    return HostPaths(hami_core=str(root), vgpu_lock=str(root / "vgpulock"))


def two_slices(name: str) -> dict:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "a", "resources": {"limits": SLICE}}, {"name": "b", "resources": {"limits": SLICE}}]}})  # fmt: skip


async def test_node_side_registers_and_allocates_the_committed_cards(cluster: Cluster, tmp_path: Path,
                                                                     plugin_dir: Path) -> None:  # fmt: skip
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    healthy = RECORDED.read_text().replace("Critical", "OK      ")
    (cards_dir / NPU_SMI_FIXTURE).write_text(healthy)
    await cluster.create_node(NODE)
    catalogue = default_catalogue()
    side = NodeSide(cluster.kube, Discovery(NODE, catalogue, fixture=cards_dir), catalogue=catalogue)
    servers = PluginServers(side, plugin_dir)
    cp = ControlPlane(tmp_path / "state", kubeconfig=str(cluster.kubeconfig))
    async with FakeKubelet(plugin_dir, cluster.kube, NODE, wrong_count=frozenset({"bad"})) as kubelet:
        await side.refresh()
        await servers.sync()
        # the kubelet sees HAMi's count: 8 cards × split count 4 (65536 // 16384)
        served = ("huawei.com/Ascend910", "huawei.com/Ascend910B", RESOURCE)
        await kubelet.wait_for(lambda: all(len(kubelet.devices.get(r, [])) == 32 for r in served))
        # the family and pre-v2.7 names too, which the article's YAML asks (same devices)
        assert sorted((r.resource_name, r.version) for r in kubelet.registrations) == [
            ("huawei.com/Ascend910", "v1beta1"), ("huawei.com/Ascend910B", "v1beta1"), (RESOURCE, "v1beta1")]  # fmt: skip
        assert {d.health for d in kubelet.devices[RESOURCE]} == {"Healthy"}
        node = await cluster.kube.get(nodes_path(NODE))
        ann = node["metadata"]["annotations"]
        registered = hami.decode_register(hami.ascend_register_key("Ascend910B3"), ann[hami.ascend_register_key("Ascend910B3")])
        assert [(d.uuid, d.index, d.count, d.devmem, d.devcore, d.health, d.network_id) for d in registered] == [
            (f"{NODE}-Ascend910B3-{i}", i, 4, 65536, 20, True, 0 if i <= 3 else 1) for i in range(8)]  # fmt: skip
        assert ann[hami.ascend_handshake_key("Ascend910B3")].startswith("Reported_")
        assert node["status"]["allocatable"][RESOURCE] == "32"

        await asyncio.to_thread(cp.start, lambda _line: None)
        try:
            await cluster.create_pod(two_slices("pair"))
            await kubelet.wait_for(lambda: "pair" in kubelet.admitted)
            pod = await cluster.pod("default", "pair")
            assert pod is not None and kpods.phase(pod) == "Running", kubelet.admitted["pair"]
            pa = pod["metadata"]["annotations"]
            committed = hami.allocated_devices(pa)  # what the binder wrote: one card per container
            assert [(d.memory, d.type) for d in committed] == [(16384, "Ascend910B3")] * 2
            assert committed[0].uuid != committed[1].uuid
            got = kubelet.admitted["pair"]
            index = {f"{NODE}-Ascend910B3-{i}": str(i) for i in range(8)}
            assert got.envs == [{"ASCEND_VISIBLE_DEVICES": index[d.uuid], "ASCEND_VNPU_SPECS": "vir05_1c_16g"}
                                for d in committed]  # fmt: skip
            # the kubelet was steered to shares of those very cards
            assert [ids[0].rsplit("-", 1)[0] for ids in got.chosen] == [d.uuid for d in committed]
            assert pa[hami.BIND_PHASE] == "success"
            assert hami.decode_pod_devices("k", pa[hami.ascend_to_allocate_key("Ascend910B3")]) == [[], []]
            assert set(hami.runtime_templates(pa)) == {d.uuid for d in committed}
            node = await cluster.kube.get(nodes_path(NODE))
            assert hami.NODE_LOCK not in (node["metadata"].get("annotations") or {})

            # the article's whole card by the family name: the kubelet asks the family's plugin,
            # which answers with the card Tessera committed
            await cluster.create_pod(as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "family"},
                                             "spec": {"containers": [{"name": "c", "resources": {
                                                 "limits": {"huawei.com/Ascend910": "1"}}}]}}))  # fmt: skip
            await kubelet.wait_for(lambda: "family" in kubelet.admitted)
            family = await cluster.pod("default", "family")
            assert family is not None and kpods.phase(family) == "Running", kubelet.admitted["family"]
            whole = hami.allocated_devices(family["metadata"]["annotations"])
            assert [(d.memory, d.type) for d in whole] == [(65536, "Ascend910B3")]
            assert [e["ASCEND_VISIBLE_DEVICES"] for e in kubelet.admitted["family"].envs] == [index[whole[0].uuid]]

            # a card turns Critical: the kubelet is told, the allocator's ledger too
            (cards_dir / NPU_SMI_FIXTURE).write_text(RECORDED.read_text())
            assert await side.refresh()
            names = sorted(r.resource_name for r in kubelet.registrations)  # each its own stream

            def sick(resource: str) -> set[str]:
                return {d.ID.rsplit("-", 1)[0] for d in kubelet.devices[resource] if d.health == "Unhealthy"}

            await kubelet.wait_for(lambda: all(sick(n) for n in names))
            assert {n: sick(n) for n in names} == {n: {f"{NODE}-Ascend910B3-6"} for n in names}

            # an Allocate the plugin refuses: bind-phase failed, lock released, slices freed
            await cluster.create_pod(as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                                             "spec": {"containers": [{"name": "c", "resources": {"limits": SLICE}}]}}))  # fmt: skip
            await kubelet.wait_for(lambda: "bad" in kubelet.admitted)
            assert "device number not matched" in kubelet.admitted["bad"].error
            bad = await cluster.pod("default", "bad")
            assert bad is not None and bad["metadata"]["annotations"][hami.BIND_PHASE] == "failed"
            node = await cluster.kube.get(nodes_path(NODE))
            assert hami.NODE_LOCK not in (node["metadata"].get("annotations") or {})

            log = await JetStreamLog.connect(cp.url)
            events: list = []

            async def recorded() -> bool:
                nonlocal events
                events = decoded([m async for m in log.replay()])
                freed = any(isinstance(e, SliceReleased) and e.owner.endswith("/bad") for e in events)
                sick = any(isinstance(e, CardRegistered) and e.card.uuid == f"{NODE}-Ascend910B3-6"
                           and not e.usage.healthy for e in events)  # fmt: skip
                return freed and sick

            try:
                await wait_until(recorded, 60, "the refused pod's slices freed, card 6 unhealthy in the ledger")
            finally:
                await log.close()
        finally:
            await asyncio.to_thread(cp.stop)
            await servers.stop()
    reserved = {e.card for e in events if isinstance(e, SliceReserved) and e.owner.endswith("/pair")}
    assert reserved == {d.uuid for d in committed}


async def test_the_command_serves_nvidia_and_registers_again_after_a_kubelet_restart(
        cluster: Cluster, tmp_path: Path, plugin_dir: Path) -> None:  # fmt: skip
    """`python -m services.nodeagent.deviceplugin` as the DaemonSet runs it: 2 A100s split 10
    ways are 20 `nvidia.com/gpu`; a restarted kubelet (its directory emptied, a new socket)
    gets the plugin registered again at once, not at the next refresh (30 s; an hour here:
    the kubelet held the node's devices at 0 meanwhile); SIGTERM stops it cleanly."""
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    shutil.copy(DISCOVERY / "nvidia-smi-a100x2.xml", cards_dir / NVIDIA_SMI_FIXTURE)
    await cluster.create_node("gpu-1")
    log = tmp_path / "plugin.log"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.nodeagent.deviceplugin", "--node", "gpu-1",
        "--kubeconfig", str(cluster.kubeconfig), "--device-plugin-dir", str(plugin_dir),
        "--discovery-fixture", str(cards_dir), "--report-every", "3600",
        "--hami-core-path", hami_core_installed(tmp_path / "hami-core").hami_core,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)  # fmt: skip
    try:
        for _restart in range(2):
            async with FakeKubelet(plugin_dir, cluster.kube, "gpu-1") as kubelet:
                await kubelet.wait_for(lambda k=kubelet: len(k.devices.get("nvidia.com/gpu", [])) == 20)
                assert [r.resource_name for r in kubelet.registrations] == ["nvidia.com/gpu"]
                assert {d.topology.nodes[0].ID for d in kubelet.devices["nvidia.com/gpu"]} == {0}
            await asyncio.to_thread(_empty, plugin_dir)  # what a starting kubelet does to the directory
        node = await cluster.kube.get(nodes_path("gpu-1"))
        gpus = hami.decode_register(hami.NVIDIA_REGISTER, node["metadata"]["annotations"][hami.NVIDIA_REGISTER])
        assert [(d.index, d.count, d.devmem, d.devcore, d.mode, d.health) for d in gpus] == [
            (0, 10, 40960, 100, "hami-core", True), (1, 10, 40960, 100, "hami-core", True)]  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(proc.communicate(), 15)
        assert proc.returncode == 0, output.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            output, _ = await proc.communicate()
            log.write_bytes(output)


def _empty(directory: Path) -> None:
    for f in directory.iterdir():
        f.unlink()


async def test_cards_that_can_no_longer_be_read_go_unhealthy_until_they_can(
        cluster: Cluster, tmp_path: Path, plugin_dir: Path) -> None:  # fmt: skip
    """nvidia-smi failing as a whole (a GPU fallen off the bus): after a few failed reads in a
    row every card is Unhealthy to the kubelet and unhealthy in HAMi's register annotation, and
    the kubelet still gets an answer; once a read succeeds they are healthy again. Before, the
    last read's Healthy stood for good."""
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    recorded = (DISCOVERY / "nvidia-smi-a100x2.xml").read_text()
    (cards_dir / NVIDIA_SMI_FIXTURE).write_text(recorded)
    await cluster.create_node("gpu-1")
    catalogue = default_catalogue()
    side = NodeSide(cluster.kube, Discovery("gpu-1", catalogue, fixture=cards_dir), catalogue=catalogue,
                    paths=hami_core_installed(tmp_path / "hami-core"))  # fmt: skip
    servers = PluginServers(side, plugin_dir)
    stopping = asyncio.Event()

    async def registered_health() -> list[bool]:
        node = await cluster.kube.get(nodes_path("gpu-1"))
        value = ((node["metadata"].get("annotations") or {}).get(hami.NVIDIA_REGISTER)) or ""
        return [d.health for d in hami.decode_register(hami.NVIDIA_REGISTER, value)]

    async def registered_is(want: list[bool]) -> bool:
        return await registered_health() == want

    async with FakeKubelet(plugin_dir, cluster.kube, "gpu-1") as kubelet:
        running = asyncio.create_task(side.run(stopping, 0.05, on_refresh=servers.sync, retry=0.05))
        try:
            def kubelet_health(health: str) -> bool:
                devices = kubelet.devices.get("nvidia.com/gpu", [])
                return len(devices) == 20 and {d.health for d in devices} == {health}

            await kubelet.wait_for(lambda: kubelet_health("Healthy"))
            assert await registered_health() == [True, True]
            (cards_dir / NVIDIA_SMI_FIXTURE).write_text("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error")
            await kubelet.wait_for(lambda: kubelet_health("Unhealthy"))
            await wait_until(lambda: registered_is([False, False]), 30, "both GPUs registered unhealthy")
            (cards_dir / NVIDIA_SMI_FIXTURE).write_text(recorded)
            await kubelet.wait_for(lambda: kubelet_health("Healthy"))
            await wait_until(lambda: registered_is([True, True]), 30, "both GPUs registered healthy again")
        finally:
            stopping.set()
            await asyncio.wait_for(running, 30)
            await servers.stop()


async def test_a_mig_gpu_goes_unhealthy_to_the_kubelet_and_a_refused_write_is_no_unreadable_card(
        cluster: Cluster, tmp_path: Path) -> None:  # fmt: skip
    """What ListAndWatch sends is the node side's resources after a refresh: the MIG GPU's
    devices Unhealthy there too, not only in the annotation. And an API server refusing the
    Node's annotations (here: no such Node) while the tools read fine leaves the cards healthy:
    counted as unreadable, every card went Unhealthy and back at each retry."""
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    xml = (DISCOVERY / "nvidia-smi-a100x2.xml").read_text()
    (cards_dir / NVIDIA_SMI_FIXTURE).write_text(xml.replace("<current_mig>Disabled</current_mig>",
                                                            "<current_mig>Enabled</current_mig>", 1))  # fmt: skip
    catalogue = default_catalogue()
    side = NodeSide(cluster.kube, Discovery("gpu-9", catalogue, fixture=cards_dir), catalogue=catalogue)
    stopping = asyncio.Event()
    running = asyncio.create_task(side.run(stopping, 0.01, retry=0.01))
    try:
        await wait_until(lambda: _at_least(side, 6), 30, "six reads, each write refused")
        health = {d.card: d.healthy for d in side.resources["nvidia.com/gpu"].devices}
        mig, plain = (c.uuid for c in sorted(side.cards.values(), key=lambda c: c.index))
        assert health == {mig: False, plain: True}, health
        assert not side.cards[mig].healthy and side.cards[plain].healthy
    finally:
        stopping.set()
        await asyncio.wait_for(running, 30)


async def _at_least(side: NodeSide, reads: int) -> bool:
    return side.reads >= reads
