"""vcctl-style commands against a running system: `apply`, `delete`, `queue …`, `job …`.

Each one is a NATS request to a service endpoint (`<root>.api.admission.apply`,
`<root>.api.queue.command`); the CLI finds the system through `tessera up`'s state file unless
`--nats` says where. Exit codes: 0 done, 1 refused/rejected (reasons printed), 2 cannot reach it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import yaml
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from contracts.api import (
    ApplyReply,
    ApplyRequest,
    CommandReply,
    CommandRequest,
    decode,
    encode,
)
from contracts.subjects import Subjects
from services.cli.connection import Unreachable, connect, connection_args, nats_url

SERVICE_ERROR = "Nats-Service-Error"


async def request(url: str, root: str, service: str, endpoint: str, body: bytes,
                  timeout: float = 60.0) -> bytes:  # fmt: skip
    """One request/reply; a service error or no responder becomes `Unreachable` with why."""
    nc = await connect(url)
    try:
        msg = await nc.request(f"{Subjects(root).api(service)}.{endpoint}", body, timeout=timeout)
    except NoRespondersError:
        raise Unreachable(f"the {service} service is not running (no responder)") from None
    except NatsTimeout:
        raise Unreachable(f"the {service} service did not answer within {timeout:g}s") from None
    finally:
        await nc.close()
    if msg.headers and msg.headers.get(SERVICE_ERROR):
        raise Unreachable(f"{service} failed: {msg.headers.get(SERVICE_ERROR)}")
    return msg.data


def apply_text(url: str, root: str, text: str, dry_run: bool = False) -> ApplyReply:
    body = encode(ApplyRequest(manifest=text, dry_run=dry_run))
    return decode(asyncio.run(request(url, root, "admission", "apply", body)), ApplyReply)


def print_apply(reply: ApplyReply, output: str, dry_run: bool = False) -> None:
    if output != "table":
        data = {"results": [
            {"kind": r.kind, "namespace": r.namespace, "name": r.name, "outcome": r.outcome,
             "reasons": list(r.reasons), "warnings": list(r.warnings)}
            for r in reply.results], "error": reply.error}  # fmt: skip
        print(json.dumps(data, indent=2) if output == "json" else yaml.safe_dump(data, sort_keys=False))
        return
    if reply.error:
        print(f"error: {reply.error}", file=sys.stderr)
    suffix = " (dry run)" if dry_run else ""
    for r in reply.results:
        ns = f"{r.namespace}/" if r.namespace else ""
        print(f"{r.kind.lower()}/{ns}{r.name} {r.outcome}{suffix}")
        for reason in r.reasons:
            print(f"    {reason}")
        for warning in r.warnings:  # kubectl prints API warnings as `Warning: ...`
            print(f"    Warning: {warning}")


def cmd_apply(args: argparse.Namespace) -> int:
    texts = []
    for f in args.filename:
        try:
            texts.append(sys.stdin.read() if f == "-" else Path(f).read_text())
        except OSError as exc:
            print(f"error: {f}: {exc.strerror}", file=sys.stderr)
            return 2
    try:
        url = nats_url(args)
        reply = apply_text(url, args.root, "\n---\n".join(texts), args.dry_run)
    except Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_apply(reply, args.output, args.dry_run)
    return 1 if reply.rejected else 0


def command(args: argparse.Namespace, action: str, name: str, namespace: str = "") -> int:
    body = encode(CommandRequest(action=action, name=name, namespace=namespace))
    try:
        data = asyncio.run(request(nats_url(args), args.root, "queue", "command", body))
    except Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reply = decode(data, CommandReply)
    print(reply.message if reply.ok else f"error: {reply.message}",
          file=sys.stdout if reply.ok else sys.stderr)  # fmt: skip
    return 0 if reply.ok else 1


def cmd_delete(args: argparse.Namespace) -> int:
    if args.filename:
        from services.core.workload import ManifestError, load_documents

        try:
            docs = load_documents(Path(args.filename).read_text())
        except (OSError, ManifestError) as exc:
            print(f"error: {args.filename}: {exc}", file=sys.stderr)
            return 2
        targets = [(str((d.get("metadata") or {}).get("namespace") or "default"),
                    str((d.get("metadata") or {}).get("name") or ""))
                   for d in docs if d.get("kind") in ("Job", "Pod", "PodGroup")]  # fmt: skip
    elif args.kind in ("job", "pod", "podgroup") and args.name:
        targets = [(args.namespace, args.name)]
    else:
        print("error: give `delete job|pod NAME` or `delete -f FILE`", file=sys.stderr)
        return 2
    worst = 0
    for ns, name in targets:
        worst = max(worst, command(args, "delete", name, ns))
    return worst


def cmd_queue(args: argparse.Namespace) -> int:
    if args.action == "create":
        spec: dict = {"weight": args.weight}
        if args.capability:
            spec["capability"] = dict(kv.split("=", 1) for kv in args.capability.split(","))
        if args.parent:
            spec["parent"] = args.parent
        doc = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": args.name}, "spec": spec}  # fmt: skip
        try:
            reply = apply_text(nats_url(args), args.root, json.dumps(doc))
        except Unreachable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print_apply(reply, "table")
        return 1 if reply.rejected else 0
    return command(args, args.action, args.name)


def cmd_job(args: argparse.Namespace) -> int:
    return command(args, args.action, args.name, args.namespace)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    apply = sub.add_parser("apply", help="submit Queues, Jobs, PodGroups, Pods (YAML or JSON)")
    apply.add_argument("-f", "--filename", action="append", required=True, help="file, or - for stdin")
    apply.add_argument("--dry-run", action="store_true", help="validate only, write nothing")
    apply.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    connection_args(apply)
    apply.set_defaults(func=cmd_apply)

    delete = sub.add_parser("delete", help="delete a job (or a pod's implied job)")
    delete.add_argument("kind", nargs="?", choices=["job", "pod", "podgroup"])
    delete.add_argument("name", nargs="?")
    delete.add_argument("-n", "--namespace", default="default")
    delete.add_argument("-f", "--filename", default="", help="delete the Jobs/Pods of a file")
    connection_args(delete)
    delete.set_defaults(func=cmd_delete)

    queue = sub.add_parser("queue", help="create, open or close a queue")
    queue.add_argument("action", choices=["create", "open", "close"])
    queue.add_argument("name")
    queue.add_argument("--weight", type=int, default=1)
    queue.add_argument("--capability", default="", help="e.g. cpu=8,memory=64Gi")
    queue.add_argument("--parent", default="")
    connection_args(queue)
    queue.set_defaults(func=cmd_queue)

    job = sub.add_parser("job", help="suspend or resume a job")
    job.add_argument("action", choices=["suspend", "resume"])
    job.add_argument("name")
    job.add_argument("-n", "--namespace", default="default")
    connection_args(job)
    job.set_defaults(func=cmd_job)
