"""`tessera get|queue|job … --kubeconfig PATH`: the same verbs on a cluster's Volcano objects.

What vcctl does, through the API server (volcano.md §7): `get` lists Queues, Volcano Jobs,
PodGroups and pods; `queue create|update|delete` write the Queue; `queue open|close` and
`job suspend|resume|restart|terminate|complete` create a bus `Command` (`OpenQueue`/`CloseQueue`/
`AbortJob`/`ResumeJob`/`RestartJob`/`TerminateJob`/`CompleteJob`)
owned by and targeting the object, named `<object>-<action>-` plus the server's suffix, which
the controllers consume and delete; `job delete` deletes the Job (its PodGroup and pods go with
it by owner reference). Queue Commands live in namespace `default`, as vcctl creates them: a
Queue has no namespace of its own.

The rules Volcano's webhook enforces on delete are checked here too, so a cluster without the
webhook refuses the same way: `default` and `root` stay, and a queue with PodGroups or child
queues is not deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from services.cli import kuberows
from services.cli.connection import Unreachable

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
QUEUE_API, JOB_API = "scheduling.volcano.sh/v1beta1", "batch.volcano.sh/v1alpha1"
#: Kinds `get` can list from a cluster; nodes and cards are the log's view of the hardware.
KUBE_KINDS = ("queues", "jobs", "podgroups", "pods")
COMMAND_NAMESPACE_OF_QUEUES = "default"
PROTECTED_QUEUES = ("default", "root")
QUEUE_ACTIONS = {"open": "OpenQueue", "close": "CloseQueue"}
JOB_ACTIONS = {"suspend": "AbortJob", "resume": "ResumeJob", "restart": "RestartJob",
               "terminate": "TerminateJob", "complete": "CompleteJob"}  # fmt: skip


class Refused(Exception):
    """The cluster (or a rule checked on its behalf) said no; the message says why."""


def namespaced(group_version: str, plural: str, namespace: str = "", name: str = "") -> str:
    base = f"/apis/{group_version}" + (f"/namespaces/{namespace}" if namespace else "") + f"/{plural}"
    return f"{base}/{name}" if name else base


def queue_path(name: str = "") -> str:
    return f"{QUEUES}/{name}" if name else QUEUES


def jobs_path(namespace: str = "", name: str = "") -> str:
    return namespaced(JOB_API, "jobs", namespace, name)


def podgroups_path(namespace: str = "") -> str:
    return namespaced(QUEUE_API, "podgroups", namespace)


def commands_path(namespace: str) -> str:
    return namespaced("bus.volcano.sh/v1alpha1", "commands", namespace)


def run(kubeconfig: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """One client for the command; an API server that cannot be reached is `Unreachable`
    (exit 2, one line), a refusal `Refused` with the server's message."""
    return asyncio.run(_run(kubeconfig, work))


async def _run(kubeconfig: str, work: Callable[[Any], Awaitable[Any]]) -> Any:
    import aiohttp

    from services.kube.client import UNANSWERED, Kube, KubeError, Limits, agent_of

    try:
        kube = await Kube.connect(kubeconfig, Limits(qps=0), agent=agent_of("cli"))
    except KubeError as exc:
        raise Unreachable(f"cannot use kubeconfig {kubeconfig}: {exc.body or exc}") from None
    except (OSError, ValueError) as exc:  # a missing file, a file that is no kubeconfig
        raise Unreachable(f"cannot use kubeconfig {kubeconfig}: {exc}") from None
    kube.reach.quiet = True  # a one-shot command says its own one-line error
    try:
        return await work(kube)
    except KubeError as exc:
        if exc.status == 0:
            raise Unreachable(f"cannot reach the API server: {exc}") from None
        if exc.reason == UNANSWERED:  # (asked a few times first, as a restarting server needs)
            host = kube.api.configuration.host
            raise Unreachable(f"cannot reach the API server at {host}: {exc.body}") from None
        raise Refused(exc.message) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        host = kube.api.configuration.host
        raise Unreachable(f"cannot reach the API server at {host}: {exc}") from None
    finally:
        await kube.close()


async def _items(kube: Any, path: str) -> list[dict[str, Any]]:
    return list((await kube.get(path)).get("items") or [])


async def _rows(kube: Any, what: str, namespace: str) -> list[dict[str, Any]]:
    from services.kube.client import nodes_path, pods_path

    if what == "queues":
        allocatable = kuberows.allocatable_names(await _items(kube, nodes_path()))
        queues = await _items(kube, queue_path())
        return sorted((kuberows.queue_row(q, allocatable) for q in queues), key=lambda r: r["name"])
    if what == "jobs":
        rows = [kuberows.job_row(j) for j in await _items(kube, jobs_path(namespace))]
    elif what == "podgroups":
        rows = [kuberows.podgroup_row(pg) for pg in await _items(kube, podgroups_path(namespace))]
    else:
        cards = kuberows.node_cards(await _items(kube, nodes_path()))
        return kuberows.pod_rows(await _items(kube, pods_path(namespace)), cards)
    return sorted(rows, key=lambda r: (r["namespace"], r["name"]))


def rows(kubeconfig: str, what: str, namespace: str) -> list[dict[str, Any]]:
    """`get`'s records from the cluster (`namespace` "" = every namespace)."""
    return run(kubeconfig, lambda kube: _rows(kube, what, namespace))


#: The list path and the (apiVersion, kind) of each kind's items: a list's items carry neither.
_OBJECT_KINDS = {"queues": (QUEUE_API, "Queue"), "jobs": (JOB_API, "Job"), "podgroups": (QUEUE_API, "PodGroup"),
                 "pods": ("v1", "Pod")}  # fmt: skip


async def _objects(kube: Any, what: str, namespace: str) -> list[dict[str, Any]]:
    from services.kube.client import pods_path

    path = {"queues": queue_path(), "jobs": jobs_path(namespace), "podgroups": podgroups_path(namespace),
            "pods": pods_path(namespace)}[what]  # fmt: skip
    api, kind = _OBJECT_KINDS[what]
    return [{"apiVersion": api, "kind": kind, **o} for o in await _items(kube, path)]


def listed(kubeconfig: str, what: str, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(records, the objects as the API server has them, the pods' records) through one
    client: `get -o json|yaml` and `-l` on a cluster read the objects themselves."""

    async def work(kube: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        pods = await _rows(kube, "pods", namespace) if what in ("jobs", "podgroups") else []
        return await _rows(kube, what, namespace), await _objects(kube, what, namespace), pods

    return run(kubeconfig, work)


def _controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def command_for(target: dict[str, Any], action: str, namespace: str) -> dict[str, Any]:
    """The bus Command vcctl creates for `action` on `target` (volcano.md §1.3, §7)."""
    ref = _controller_ref(target)
    return {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"generateName": f"{ref['name']}-{action.lower()}-", "namespace": namespace,
                         "ownerReferences": [ref]},
            "action": action, "target": ref}  # fmt: skip


async def _get(kube: Any, path: str, what: str) -> dict[str, Any]:
    from services.kube.client import KubeError

    try:
        return await kube.get(path)
    except KubeError as exc:
        if exc.status == 404:
            raise Refused(f"{what} not found") from None
        raise


async def _issue(kube: Any, target: dict[str, Any], action: str, namespace: str) -> str:
    created = await kube.create(commands_path(namespace), command_for(target, action, namespace))
    return str((created.get("metadata") or {}).get("name") or "")


async def _queue_in_use(kube: Any, name: str) -> str:
    """Why Volcano's webhook would refuse deleting the queue ("" when it would not)."""
    if name in PROTECTED_QUEUES:
        from services.core.scheduling.lifecycle import UNDELETABLE_QUEUES

        return f"queue {name} can not be deleted: {UNDELETABLE_QUEUES[name]}"
    groups = [pg for pg in await _items(kube, podgroups_path()) if (pg.get("spec") or {}).get("queue") == name]
    if groups:
        return f"queue {name} can not be deleted: it has {len(groups)} PodGroup(s)"
    children = [q["metadata"]["name"] for q in await _items(kube, queue_path())
                if (q.get("spec") or {}).get("parent") == name]  # fmt: skip
    if children:
        return f"queue {name} can not be deleted: it is the parent of {', '.join(sorted(children))}"
    return ""


async def _queue(kube: Any, args: argparse.Namespace) -> str:
    from services.cli.control import capability_arg, capability_replaced
    from services.kube.client import KubeError

    name = args.name
    if args.action == "create":
        spec: dict[str, Any] = {"weight": args.weight or 1}
        if args.capability:
            spec["capability"] = capability_arg(args.capability)
        if args.parent:
            spec["parent"] = args.parent
        body = {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        try:
            await kube.create(queue_path(), body)
        except KubeError as exc:
            if exc.status == 409:
                raise Refused(f"queue {name} already exists") from None
            raise
        return f"queue/{name} created"
    queue = await _get(kube, queue_path(name), f"queue {name!r}")
    if args.action == "update":
        patch: dict[str, Any] = {}
        if args.weight is not None:
            patch["weight"] = args.weight
        note = ""
        if args.capability is not None:  # replaced, not merged: keys it drops are nulled
            old = (queue.get("spec") or {}).get("capability") or {}
            patch["capability"] = {**dict.fromkeys(old), **capability_arg(args.capability)}
            note = "\n" + capability_replaced({str(k): str(v) for k, v in old.items()},
                                              capability_arg(args.capability))  # fmt: skip
        await kube.patch(queue_path(name), {"spec": patch})
        return f"queue/{name} configured{note}"
    if args.action == "delete":
        why = await _queue_in_use(kube, name)
        if why:
            raise Refused(why)
        await kube.delete(queue_path(name))
        return f"queue {name} deleted"
    command = await _issue(kube, queue, QUEUE_ACTIONS[args.action], COMMAND_NAMESPACE_OF_QUEUES)
    return f"queue {name}: {QUEUE_ACTIONS[args.action]} requested (command {COMMAND_NAMESPACE_OF_QUEUES}/{command})"


async def _job(kube: Any, args: argparse.Namespace) -> str:
    ns, name = args.namespace, args.name
    job = await _get(kube, jobs_path(ns, name), f"job {ns}/{name}")
    if args.action == "delete":
        await kube.delete(jobs_path(ns, name))
        return f"job {ns}/{name} deleted"
    command = await _issue(kube, job, JOB_ACTIONS[args.action], ns)
    return f"job {ns}/{name}: {JOB_ACTIONS[args.action]} requested (command {ns}/{command})"


def _say(work: Callable[[Any], Awaitable[str]], kubeconfig: str) -> int:
    try:
        print(run(kubeconfig, work))
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def queue(args: argparse.Namespace) -> int:
    """`queue create|update|open|close|delete NAME --kubeconfig PATH`; exit 1 when refused."""
    if args.action == "update" and args.weight is None and args.capability is None:
        print("error: give --weight and/or --capability to update", file=sys.stderr)
        return 2
    return _say(lambda kube: _queue(kube, args), args.kubeconfig)


def job(args: argparse.Namespace) -> int:
    """`job suspend|resume|restart|terminate|complete|delete NAME --kubeconfig PATH`; exit 1
    when refused."""
    return _say(lambda kube: _job(kube, args), args.kubeconfig)
