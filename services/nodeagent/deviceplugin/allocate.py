"""Allocate: what the container runtime is told for the cards Tessera committed. Pure: the
pod's annotations and the kubelet's request in, the response and the pod's annotation patch out.

The kubelet asks once per container and resource, with device IDs of its own choosing; the
cards are the ones the binder wrote in `…-devices-to-allocate` (HAMi's protocol, hami.md §3.3):
each call takes the first container slot that still holds devices and erases it, and only when
no `…-devices-to-allocate` of the pod holds a device any more is the pod's `bind-phase` set to
`success` (the caller then releases the node lock). The environment is what the runtimes and
the in-container limiters read:

- Ascend: `ASCEND_VISIBLE_DEVICES` = the cards' indices (Ascend's docker runtime); in template
  mode `ASCEND_VNPU_SPECS` = the vNPU template the runtime carves; on a hami-core card the
  vNPU hook's quota and shared regions (`NPU_MEM_QUOTA`, `NPU_PRIORITY`, …) and its mounts.
- NVIDIA: `NVIDIA_VISIBLE_DEVICES` = the GPUs' UUIDs, and HAMi-core's
  `CUDA_DEVICE_MEMORY_LIMIT_<i>` / `CUDA_DEVICE_SM_LIMIT`, with libvgpu.so preloaded; and what
  HAMi's webhook writes into the pod's spec, which Tessera (no webhook) gives here:
  `GPU_CORE_UTILIZATION_POLICY` = the device config's `gpuCorePolicy` unless `default`, and
  `CUDA_TASK_PRIORITY` = the container's `nvidia.com/priority` limit where it has one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contracts import hami
from contracts.devices import CardSpec
from services.nodeagent.deviceplugin.resources import Resource


class AllocateError(ValueError):
    """The request cannot be served for this pod (names the pod's annotation and the rule)."""


@dataclass(frozen=True, slots=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class Grant:
    """One container's answer."""

    envs: dict[str, str]
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True, slots=True)
class Allocation:
    grants: tuple[Grant, ...]
    patch: dict[str, str]  # pod annotations to write (the erased slots, maybe bind-phase)
    done: bool  # no devices left to allocate: bind-phase success, release the lock


@dataclass(frozen=True, slots=True)
class HostPaths:
    """Where the vendors' files are on the node (the chart mounts the same paths)."""

    hami_core: str = "/usr/local"  # HAMi's gpuHookPath: <it>/vgpu/libvgpu.so
    vnpu_core: str = "/usr/local/hami-vnpu-core"
    shared_region: str = "/usr/local/hami-shared-region"
    ascend_driver: str = "/usr/local/Ascend/driver"
    npu_smi: str = "/usr/local/sbin/npu-smi"
    vgpu_lock: str = "/tmp/vgpulock"  # HAMi-core's lock directory, shared by the node's containers


DEFAULT_PATHS = HostPaths()


def remaining(annotations: Mapping[str, str]) -> int:
    """Devices still to allocate over every vendor's `…-devices-to-allocate`."""
    n = 0
    for key, value in annotations.items():
        if key.startswith("hami.io/") and key.endswith("-devices-to-allocate"):
            try:
                n += sum(len(slot) for slot in hami.decode_pod_devices(key, value))
            except hami.CodecError:
                continue
    return n


#: the vendors whose in-container limiter is installed on the node (HAMi-core's libvgpu.so and
#: its ld.so.preload; the vNPU hook's ld.so.preload)
ALL_LIMITERS = frozenset({"nvidia", "huawei"})


def allocate(resource: Resource, cards: Mapping[str, CardSpec], annotations: Mapping[str, str],
             requests: Sequence[Sequence[str]], *, containers: Sequence[str], pod_uid: str,
             paths: HostPaths = DEFAULT_PATHS, oversubscribe: bool = False,
             limiters: frozenset[str] = ALL_LIMITERS, uncontrolled: frozenset[str] = frozenset(),
             core_policy: str = "", priorities: Mapping[str, str] | None = None) -> Allocation:  # fmt: skip
    """Serve `requests` (the kubelet's device IDs per container) from the pod's annotations.

    `containers`: the pod's container names in slot order (init containers first), for the
    per-container directories of the limiters. `limiters`: the vendors whose limiter the node
    has (the caller looks); without it a whole card is given bare and a slice is refused —
    mounted anyway, the runtime made the missing files empty directories and the slice ran
    with no limit, its card over-committed in silence. `uncontrolled`: the containers that set
    `CUDA_DISABLE_CONTROL=true`, whose HAMi-core is not preloaded (HAMi's switch).
    `core_policy`: the device config's `gpuCorePolicy`; `priorities`: each container's
    `nvidia.com/priority` limit (HAMi's webhook makes them the env below)."""
    key = resource.to_allocate
    slots = hami.decode_pod_devices(key, annotations.get(key, ""))
    grants = []
    for ids in requests:
        slot = next((i for i, devs in enumerate(slots) if devs), None)
        if slot is None:
            raise AllocateError(f"{key}: no devices left to allocate for {resource.name} "
                                f"(the kubelet asks for {len(ids)})")  # fmt: skip
        devices = slots[slot]
        if len(devices) != len(ids):
            raise AllocateError(f"{key}: device number not matched: the kubelet asks for {len(ids)} "
                                f"{resource.name}, container slot {slot} holds {len(devices)}")  # fmt: skip
        specs = []
        for d in devices:
            card = cards.get(d.uuid)
            if card is None:
                raise AllocateError(f"{key}: card {d.uuid} is not one of this node's {resource.name}")
            specs.append(card)
        container = containers[slot] if slot < len(containers) else f"container-{slot}"
        where = f"{pod_uid}_{container}"
        if resource.vendor == "nvidia":
            grant = _nvidia(devices, specs, where, paths, oversubscribe, "nvidia" in limiters,
                            preload=container not in uncontrolled)  # fmt: skip
            grant.envs.update(webhook_env(core_policy, (priorities or {}).get(container)))
            grants.append(grant)
        else:
            grants.append(_ascend(devices, specs, annotations, where, paths, "huawei" in limiters))
        slots[slot] = []
    patch = {key: hami.encode_pod_devices(slots)}
    done = remaining({**annotations, **patch}) == 0
    if done:
        patch[hami.BIND_PHASE] = "success"
    return Allocation(tuple(grants), patch, done)


def webhook_env(core_policy: str, priority: str | None) -> dict[str, str]:
    """The env HAMi's webhook (`MutateAdmission`) adds to a GPU container: the core policy when
    it is not `default`, the task priority when the container has a priority limit."""
    envs = {}
    if core_policy and core_policy != "default":
        envs["GPU_CORE_UTILIZATION_POLICY"] = core_policy
    if priority is not None:
        envs["CUDA_TASK_PRIORITY"] = priority
    return envs


def _whole(devices: Sequence[hami.PodDevice], cards: Sequence[CardSpec]) -> bool:
    """Nothing to limit: whole cards, or cards served whole (split count 1, the node side's
    answer to a missing limiter), which a slice then holds alone — the scheduler still fits a
    slice on such a card, and refused it was made again onto it."""
    return all((d.memory >= c.memory and d.cores >= 100) or c.split_count <= 1
               for d, c in zip(devices, cards, strict=True))  # fmt: skip


def _without_limiter(devices: Sequence[hami.PodDevice], cards: Sequence[CardSpec], envs: dict[str, str],
                     files: str, install: str) -> Grant:  # fmt: skip
    """Where the node has no limiter: the cards bare when there is nothing to limit, else a
    refusal naming the files and how to install them."""
    if _whole(devices, cards):
        return Grant(envs)
    raise AllocateError(f"card {cards[0].uuid}: a slice needs the in-container limiter ({files}), which is "
                        f"not on this node, so its memory and core limits could not be enforced: {install}, "
                        "or ask for whole cards")  # fmt: skip


def _ascend(devices: Sequence[hami.PodDevice], cards: Sequence[CardSpec],
            annotations: Mapping[str, str], where: str, paths: HostPaths, limiter: bool = True) -> Grant:  # fmt: skip
    envs = {"ASCEND_VISIBLE_DEVICES": ",".join(str(c.index) for c in cards)}
    first = devices[0]
    if cards[0].mode != "hami-core":
        template = hami.runtime_templates(annotations).get(first.uuid, "")
        if template and first.memory < cards[0].memory:  # a whole card carves no vNPU
            envs["ASCEND_VNPU_SPECS"] = template
        return Grant(envs)
    if not limiter:
        return _without_limiter(devices, cards, envs, f"{paths.vnpu_core}/ld.so.preload and its library",
                                "install the vNPU hook there (HAMi's ascend-device-plugin image)")  # fmt: skip
    envs.update({
        "NPU_MEM_QUOTA": str(first.memory),
        "NPU_PRIORITY": str(first.cores),
        "NPU_GLOBAL_SHM_PATH": f"/hami-shared-region/{cards[0].index}_global_registry",
        "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem",
    })  # fmt: skip
    driver = paths.ascend_driver
    mounts = (
        Mount("/usr/local/sbin/npu-smi", paths.npu_smi),
        Mount("/etc/ascend_install.info", "/etc/ascend_install.info"),
        Mount(f"{driver}/lib64", f"{driver}/lib64"),
        Mount(f"{driver}/version.info", f"{driver}/version.info"),
        Mount("/hami-vnpu-core", paths.vnpu_core),
        Mount("/etc/ld.so.preload", f"{paths.vnpu_core}/ld.so.preload"),
        Mount("/hami-shared-region", paths.shared_region, read_only=False),
        Mount("/hami-vnpu-shmem", f"{paths.vnpu_core}/containers/{where}", read_only=False),
    )
    return Grant(envs, mounts)


def _nvidia(devices: Sequence[hami.PodDevice], cards: Sequence[CardSpec], where: str,
            paths: HostPaths, oversubscribe: bool, limiter: bool = True, preload: bool = True) -> Grant:  # fmt: skip
    if any(c.mode == "mig" for c in cards):
        raise AllocateError(f"card {next(c.uuid for c in cards if c.mode == 'mig')} is in MIG mode, "
                            "which Tessera's device plugin does not serve")  # fmt: skip
    hook = f"{paths.hami_core}/vgpu"
    envs = {"NVIDIA_VISIBLE_DEVICES": ",".join(c.uuid for c in cards)}
    if not limiter:
        return _without_limiter(devices, cards, envs, f"HAMi-core's {hook}/libvgpu.so and {hook}/ld.so.preload",
                                f"install HAMi-core's library in {hook} (HAMi's device-plugin image copies it)")  # fmt: skip
    for i, d in enumerate(devices):
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{d.memory}m"
    envs["CUDA_DEVICE_SM_LIMIT"] = str(devices[0].cores)
    # the shared cache lives in the container's own host directory (the node monitor reads it)
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{hook}/cache/vgpu.cache"
    if oversubscribe:
        envs["CUDA_OVERSUBSCRIBE"] = "true"
    mounts = (
        Mount(f"{hook}/libvgpu.so", f"{hook}/libvgpu.so"),
        Mount(f"{hook}/cache", f"{hook}/containers/{where}", read_only=False),
        Mount("/tmp/vgpulock", paths.vgpu_lock, read_only=False),
        *([Mount("/etc/ld.so.preload", f"{hook}/ld.so.preload")] if preload else []),
    )
    return Grant(envs, mounts)
