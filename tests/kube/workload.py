"""The cluster the edge tests schedule: HAMi-registered nodes and the article's pods as
Kubernetes objects (what users `kubectl apply` today, with `schedulerName: volcano`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import yaml

from contracts import hami
from contracts.permissions import CLI
from tests.processes import ROOT

EXAMPLES = ROOT / "examples"
MEMORY_910B3 = 65536


#: what Tessera's node side serves on a node of 8 × 910B3 (each card 4 shares)
NODE_SIDE_ASCEND = {"huawei.com/Ascend910B3": "32", "huawei.com/Ascend910": "32", "huawei.com/Ascend910B": "32"}


def ascend_register(node: str, n: int = 8) -> str:
    return json.dumps([{"id": f"{node}-npu-{i}", "index": i, "count": 4, "devmem": MEMORY_910B3,
                        "devcore": 20, "type": "Ascend910B3", "health": True,
                        "custominfo": {"NetworkID": 0 if i <= 3 else 1}} for i in range(n)])  # fmt: skip


def nvidia_register_csv(node: str, n: int = 2) -> str:
    """HAMi's legacy CSV form: uuid,count,devmem,devcore,type,numa,health,index,mode:"""
    return "".join(f"GPU-{node}-{i},10,40960,100,NVIDIA A100-SXM4-40GB,0,true,{i},hami-core:"
                   for i in range(n))  # fmt: skip


async def hami_nodes(cluster: Any) -> list[str]:
    """node-a: template vNPU, node-b: hami-core soft slicing (8 × 910B3 each); gpu-1: 2 × A100
    registered in HAMi's legacy CSV form; node-c: cordoned. The Ascend nodes serve what
    Tessera's node side registers with their kubelets (`deviceplugin.resources`): 8 cards × 4
    shares under the model's name, the family name and the pre-v2.7 name."""
    shake = "Reported_2026.12.01 08:00:00"
    ascend = NODE_SIDE_ASCEND
    await cluster.create_node("node-a", allocatable=ascend, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("node-a"),
        hami.ascend_handshake_key("Ascend910B3"): shake})  # fmt: skip
    await cluster.create_node("node-b", allocatable=ascend, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("node-b"),
        hami.ascend_handshake_key("Ascend910B3"): shake, hami.VNPU_CORE: "true"})  # fmt: skip
    await cluster.create_node("gpu-1", allocatable={"nvidia.com/gpu": "20"}, annotations={
        hami.NVIDIA_REGISTER: nvidia_register_csv("gpu-1")})  # fmt: skip
    await cluster.create_node("node-c", unschedulable=True, allocatable=ascend, annotations={
        hami.ascend_register_key("Ascend910B3"): ascend_register("node-c"),
        hami.ascend_handshake_key("Ascend910B3"): shake})  # fmt: skip
    return ["node-a", "node-b", "gpu-1", "node-c"]


def as_pod(doc: dict[str, Any], scheduler: str = "volcano") -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    doc["spec"]["schedulerName"] = scheduler
    for c in doc["spec"]["containers"]:
        c.setdefault("image", "busybox")
    return doc


def article_pods() -> list[dict[str, Any]]:
    """The article's plain Pods and the 8 inference pods (+ the invalid `bad-typo`)."""
    docs = [*yaml.safe_load_all((EXAMPLES / "article.yaml").read_text()),
            *yaml.safe_load_all((EXAMPLES / "inference.yaml").read_text())]
    return [as_pod(d) for d in docs if d and d.get("kind") == "Pod"]


def gpu_pod(name: str) -> dict[str, Any]:
    return as_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": "1", "nvidia.com/gpumem": "10000"}}}]}})  # fmt: skip


def running_pod(name: str, node: str, annotations: dict[str, str] | None = None,
                memory: int = MEMORY_910B3) -> dict[str, Any]:  # fmt: skip
    """A pod some earlier scheduler placed: bound, Running, maybe with HAMi's annotations."""
    limits = {"huawei.com/Ascend910B3": "1"}
    if memory < MEMORY_910B3:
        limits["huawei.com/Ascend910B3-memory"] = str(memory)
    pod = as_pod({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "annotations": annotations or {}},
                  "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]}})  # fmt: skip
    pod["status"] = {"phase": "Running"}
    return pod


async def cli_json(cp: Any, *args: str, codes: tuple[int, ...] = (0,)) -> Any:
    """`tessera ARGS --nats <the plane's>` (an `-o records`/`-o json` listing): its JSON output,
    [] when it printed none; its exit code one of `codes`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli.main", *args, "--nats", cp.url,
        *(["--nats-creds", cp.creds(CLI)] if cp.creds(CLI) else []), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ})  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode in codes, err.decode()
    return json.loads(out) if out.strip().startswith((b"[", b"{")) else []
