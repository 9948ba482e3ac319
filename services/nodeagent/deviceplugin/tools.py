"""Reading this node's cards with the vendor tools (`npu-smi info`, `nvidia-smi -q -x`), or
from a fixture directory holding their recorded outputs (`npu-smi.txt`, `nvidia-smi.xml`).

Each read runs the tools again, so a card that turned Critical (npu-smi's Health) or whose row
remapping failed (nvidia-smi) is reported unhealthy at the next refresh. A tool that is not
installed means that vendor has no cards here; a tool that fails is an error (a node that
suddenly reports no cards would retire them all).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from contracts.events import NodeRegistered
from services.core.devices.catalogue import Catalogue
from services.core.devices.nodeconfig import NodeDeviceConfig
from services.nodeagent.inventory import discovered_node

NPU_SMI_FIXTURE, NVIDIA_SMI_FIXTURE = "npu-smi.txt", "nvidia-smi.xml"


class ToolError(RuntimeError):
    """A vendor tool is installed but did not answer (names the command and its message)."""


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise ToolError(f"`{' '.join(argv)}` exited {proc.returncode}: {err.decode(errors='replace')[:300]}")
    return out.decode(errors="replace")


@dataclass(frozen=True, slots=True)
class Discovery:
    node: str
    catalogue: Catalogue
    fixture: Path | None = None
    npu_smi: str = "npu-smi"
    nvidia_smi: str = "nvidia-smi"
    node_config: NodeDeviceConfig | None = None
    hami_vnpu_core: bool | None = None  # None: the node config's, else the device config's

    async def outputs(self) -> tuple[str, str]:
        """(`npu-smi info` output, `nvidia-smi -q -x` output), "" for a vendor absent here."""
        if self.fixture is not None:
            npu, gpu = self.fixture / NPU_SMI_FIXTURE, self.fixture / NVIDIA_SMI_FIXTURE
            return (npu.read_text() if npu.exists() else "", gpu.read_text() if gpu.exists() else "")
        npu_text = await _run(self.npu_smi, "info") if shutil.which(self.npu_smi) else ""
        gpu_text = await _run(self.nvidia_smi, "-q", "-x") if shutil.which(self.nvidia_smi) else ""
        return npu_text, gpu_text

    async def read(self) -> NodeRegistered:
        """The node's cards as the device config and this node's node-config entry make them."""
        npu_text, gpu_text = await self.outputs()
        return discovered_node(self.node, 0, 0, npu_smi=npu_text, nvidia_smi_xml=gpu_text,
                               catalogue=self.catalogue, hami_vnpu_core=self.hami_vnpu_core,
                               node_config=self.node_config)  # fmt: skip
