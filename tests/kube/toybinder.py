"""A stand-in for another scheduler on the same API server: binds every pending pod that names it
(`spec.schedulerName`) to the Nodes in turn, one `pods/binding` each, nothing else.

It is what `benchmarks.k8s --against` is tested with where no kube-scheduler can be installed:
the driver must start a foreign scheduler from a command line, measure it through the same watch
and CPU reading as Tessera, and compare the two. Not a scheduler: no fit, no resources.

    python -m tests.kube.toybinder --kubeconfig PATH --name default-scheduler
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal

from services.kube.client import Kube, KubeError, Limits, nodes_path, pods_path
from services.kube.listwatch import Reflector


async def bind_all(kube: Kube, name: str) -> None:
    nodes = sorted(n["metadata"]["name"] for n in (await kube.get(nodes_path())).get("items", []))
    turn = itertools.cycle(nodes)
    unassigned = {"fieldSelector": f"spec.schedulerName={name},spec.nodeName="}  # as kube-scheduler's
    async for ch in Reflector(kube, pods_path(), unassigned).changes():
        pod = ch.obj
        if ch.kind != "upsert" or (pod.get("spec") or {}).get("nodeName"):
            continue
        meta = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": next(turn)}}  # fmt: skip
        try:
            await kube.create(pods_path(meta["namespace"], meta["name"], "binding"), body)
        except KubeError as exc:
            if exc.status not in (404, 409):  # gone, or bound meanwhile
                raise


async def main_async(args: argparse.Namespace) -> None:
    kube = await Kube.connect(args.kubeconfig, Limits(qps=0, connections=16), agent="toybinder")
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    binder = asyncio.create_task(bind_all(kube, args.name))
    try:
        await asyncio.wait([binder, asyncio.create_task(stopping.wait())], return_when=asyncio.FIRST_COMPLETED)
        if binder.done():
            binder.result()  # its failure, not a silent stop
    finally:
        binder.cancel()
        await kube.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.kube.toybinder")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--name", default="default-scheduler")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
