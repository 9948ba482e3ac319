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
from collections.abc import Iterable
from pathlib import Path

import yaml
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from contracts.api import (
    KIND_RESOURCES,
    ApplyReply,
    ApplyRequest,
    CommandReply,
    CommandRequest,
    decode,
    encode,
)
from contracts.envelope import TYPE
from contracts.registry import UndecodableEvent, default_registry
from contracts.subjects import Subjects
from contracts.workloads import QueueSpec
from services.cli.connection import Unreachable, connect, connection_args, nats_url
from services.cli.get import kubeconfig_arg
from services.runtime.eventlog.model import StoredMessage

SERVICE_ERROR = "Nats-Service-Error"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: `delete KIND NAME`: the names users type → the kind shown in "… deleted".
DELETABLE = {"job": "job", "vcjob": "job", "pod": "pod", "po": "pod", "podgroup": "podgroup", "pg": "podgroup",
             "queue": "queue", "q": "queue"}  # fmt: skip
#: A deleted kind as the API server's NotFound names it (CRDs with their group), as `get` does.
NOT_FOUND_RESOURCES = {kind.lower(): KIND_RESOURCES[kind] for kind in ("Job", "Pod", "PodGroup", "Queue")}
#: what `delete -f` deletes, in its order: a queue after the jobs of the same file (Volcano's
#: webhook refuses to delete a queue that still holds PodGroups)
DELETE_ORDER = {"job": 0, "pod": 0, "podgroup": 0, "queue": 1}


async def request(url: str, root: str, service: str, endpoint: str, body: bytes,
                  timeout: float = 60.0) -> bytes:  # fmt: skip
    """One request/reply; a service error or no responder becomes `Unreachable` with why.
    The request carries a trace context: each job the service admits for it starts a trace of
    its own linked with this one (exported with `TESSERA_TRACE_EXPORTER` /
    `OTEL_TRACES_EXPORTER`)."""
    from opentelemetry.trace import SpanKind

    from services.runtime.telemetry import cli_tracer, inject, subject_template

    subject = f"{Subjects(root).api(service)}.{endpoint}"
    tracer = cli_tracer()  # first: a bad exporter variable is said before anything is asked
    nc = await connect(url)
    try:
        with tracer.start_as_current_span(
            f"send {subject_template(subject)}", kind=SpanKind.CLIENT,
            attributes={"messaging.system": "nats", "messaging.destination.name": subject},
        ):  # fmt: skip
            headers: dict[str, str] = {}
            inject(headers)
            msg = await nc.request(subject, body, timeout=timeout, headers=headers)
    except NoRespondersError:
        raise Unreachable(f"the {service} service is not running (no responder)") from None
    except NatsTimeout:
        raise Unreachable(f"the {service} service did not answer within {timeout:g}s") from None
    finally:
        await nc.close()
    if msg.headers and msg.headers.get(SERVICE_ERROR):
        raise Unreachable(f"{service} failed: {msg.headers.get(SERVICE_ERROR)}")
    return msg.data


def apply_text(url: str, root: str, text: str, dry_run: bool = False, create: bool = False) -> ApplyReply:
    body = encode(ApplyRequest(manifest=text, dry_run=dry_run, create=create))
    return decode(asyncio.run(request(url, root, "admission", "apply", body)), ApplyReply)


def print_apply(reply: ApplyReply, output: str, dry_run: bool = False,
                sources: dict[tuple[str, str, str], str] | None = None) -> None:  # fmt: skip
    """The reply as kubectl prints one; a rejected object names the file it came from
    (`sources`, as `object_files` gives them), as kubectl's `error when creating "<file>"`."""
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
        source = (sources or {}).get((r.kind, r.namespace, r.name)) if r.outcome == "rejected" else None
        print(f"{r.kind.lower()}/{ns}{r.name} {r.outcome}{suffix}" + (f" (from {source})" if source else ""))
        for reason in r.reasons:
            print(f"    {reason}")
        for warning in r.warnings:  # kubectl prints API warnings as `Warning: ...`
            print(f"    Warning: {warning}")


def manifest_files(names: list[str]) -> list[str]:
    """`-f` values as kubectl reads them: a directory means every YAML/JSON file in it (sorted,
    not recursive); `-` is stdin."""
    out: list[str] = []
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            out += sorted(str(p) for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file())
        else:
            out.append(name)
    return out


def readable(files: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (file, text) pairs that are YAML or JSON; each other one is said as kubectl says it
    (`error parsing <file>: …`) with its line, column and the parser's words. Checked here,
    file by file, because the service reads all the files as one text: its line numbers are
    not the file's, and one bad file refused every other one."""
    from services.core.workload.manifests import syntax_problem

    out = []
    for name, text in files:
        problem = syntax_problem(text)
        if problem is None:
            out.append((name, text))
        else:
            print(f"error: error parsing {name}: {problem}", file=sys.stderr)
    return out


def object_files(files: list[tuple[str, str]]) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) → the file the object came from, for naming it in a rejection
    (a cluster-scoped kind's namespace is "", as the reply gives it; both are kept). A file the
    size or nesting limits refuse is not read here: the service says why."""
    from services.admission.guard import ManifestTooComplex, check_manifest
    from services.core.workload.manifests import ManifestError, load_documents

    out: dict[tuple[str, str, str], str] = {}
    for name, text in files:
        if name == "-":
            continue
        try:
            check_manifest(text)
            docs = load_documents(text)
        except (ManifestTooComplex, ManifestError, RecursionError):
            continue
        for doc in docs:
            meta = doc.get("metadata")
            if not isinstance(meta, dict) or not meta.get("name"):
                continue
            kind, obj = str(doc.get("kind") or ""), str(meta["name"])
            out.setdefault((kind, str(meta.get("namespace") or "default"), obj), name)
            out.setdefault((kind, "", obj), name)
    return out


def cmd_apply(args: argparse.Namespace) -> int:
    files: list[tuple[str, str]] = []
    for f in manifest_files(args.filename):
        try:
            files.append((f, sys.stdin.read() if f == "-" else Path(f).read_text()))
        except OSError as exc:
            print(f"error: {f}: {exc.strerror}", file=sys.stderr)
            return 2
    if not files:
        print(f"error: no manifests in {', '.join(args.filename)}", file=sys.stderr)
        return 2
    # as kubectl: a file that is no YAML is said, and the objects of the others are applied
    good = readable(files)
    if not good:
        return 1
    reply = apply_text(nats_url(args), args.root, "\n---\n".join(text for _, text in good), args.dry_run)
    print_apply(reply, args.output, args.dry_run, object_files(good) if reply.rejected else None)
    return 1 if reply.rejected or len(good) < len(files) else 0


def command(args: argparse.Namespace, action: str, name: str, namespace: str = "", kind: str = "",
            shown: str = "", missing: str = "", ignore_missing: bool = False) -> int:  # fmt: skip
    """Send one command; print the service's answer (or `shown` for a success, when the CLI
    names the object as the user did: `pod default/x deleted`; `missing` for a refusal because
    there is no such job, in kubectl's words for the kind the user named)."""
    body = encode(CommandRequest(action=action, name=name, namespace=namespace, kind=kind))
    reply = decode(asyncio.run(request(nats_url(args), args.root, "queue", "command", body)), CommandReply)
    if reply.ok:
        print(shown or reply.message)
        return 0
    gone = (f"job {namespace}/{name} not found", f"queue {name!r} does not exist")  # the queue service's words
    if missing and reply.message in gone:
        if ignore_missing:  # kubectl delete --ignore-not-found: nothing said, nothing wrong
            return 0
        print(missing, file=sys.stderr)
        return 1
    print(f"error: {reply.message}", file=sys.stderr)
    return 1


def cmd_delete(args: argparse.Namespace) -> int:
    if args.filename:
        from services.core.workload import ManifestError, load_documents

        try:
            docs = load_documents(Path(args.filename).read_text())
        except (OSError, ManifestError) as exc:
            print(f"error: {args.filename}: {exc}", file=sys.stderr)
            return 2
        targets = [(str(d.get("kind")).lower(), str((d.get("metadata") or {}).get("namespace") or "default"),
                    str((d.get("metadata") or {}).get("name") or ""))
                   for d in docs if d.get("kind") in ("Job", "Pod", "PodGroup", "Queue")]  # fmt: skip
        for d in docs:
            if d.get("kind") not in ("Job", "Pod", "PodGroup", "Queue"):  # kubectl would delete it; say so
                print(f"skipped {d.get('kind')} {(d.get('metadata') or {}).get('name') or ''}: "
                      f"Tessera deletes Jobs, Pods, PodGroups and Queues", file=sys.stderr)  # fmt: skip
        targets.sort(key=lambda t: DELETE_ORDER[t[0]])
    elif args.kind and args.name:
        targets = [(DELETABLE[args.kind], args.namespace, name) for name in args.name]
    else:
        print("error: give `delete job|pod|podgroup|queue NAME...` or `delete -f FILE`", file=sys.stderr)
        return 2
    jobs = _podgroup_jobs(args) if any(kind == "podgroup" for kind, _, _ in targets) else {}
    worst = 0
    for kind, ns, name in targets:
        missing = f'Error from server (NotFound): {NOT_FOUND_RESOURCES[kind]} "{name}" not found'
        if kind == "queue":  # the queue service's rules: no jobs or child queues, never default or root
            worst = max(worst, command(args, "delete", name, kind="queue", shown=f"queue {name} deleted",
                                       missing=missing, ignore_missing=args.ignore_not_found))  # fmt: skip
            continue
        job = jobs.get((ns, name), name) if kind == "podgroup" else name
        # a pod: the queue service finds a Volcano Job's pod by its name and says what follows
        shown = "" if kind == "pod" else f"{kind} {ns}/{name} deleted"
        worst = max(worst, command(args, "delete", job, ns, kind="pod" if kind == "pod" else "",
                                   shown=shown, missing=missing, ignore_missing=args.ignore_not_found))  # fmt: skip
    return worst


def _podgroup_jobs(args: argparse.Namespace) -> dict[tuple[str, str], str]:
    """(namespace, PodGroup name as `get pg` names it: Volcano's `podgroup-<pod uid>`,
    `<job>-<job uid>`) → its job in the log; a name that is no such PodGroup is taken as the
    job's own name by the caller."""
    from services.cli import kubeobjects
    from services.cli.get import read_log
    from services.core.simulate.report import build_report

    messages = asyncio.run(read_log(nats_url(args), args.root))
    cat, jobs = kubeobjects.catalog(messages), build_report(messages)["jobs"]
    return {(j["namespace"], kubeobjects.podgroup_name(cat, j)): j["name"] for j in jobs}


def queue_manifest(spec: QueueSpec, weight: int | None = None, capability: dict[str, str] | None = None) -> dict:
    """A stored queue spec written back as the Volcano Queue that creates it — every field,
    affinity and dequeueStrategy too (an update that left them out reset them) — with `weight`
    / `capability` replaced when given (what `vcctl queue operate --action update` patches)."""
    from services.kube.volcano import queue_object

    doc = queue_object(spec)
    if weight is not None:
        doc["spec"]["weight"] = weight
    if capability is not None:
        doc["spec"]["capability"] = capability
    doc["metadata"].setdefault("annotations", {})
    doc["status"] = {"state": spec.state}
    return doc


def queue_spec_of(messages: Iterable[StoredMessage]) -> QueueSpec | None:
    """A queue's spec as its subject last set it: QueueCreated, then any QueueUpdated; None
    after a QueueDeleted (or before any of them)."""
    registry = default_registry()
    spec = None
    for m in messages:
        kind = m.headers.get(TYPE, "")
        if kind in ("QueueCreated", "QueueUpdated"):
            try:
                spec = registry.decode(kind, m.data).spec  # type: ignore[attr-defined]
            except UndecodableEvent:  # poison: readers skip it
                continue
        elif kind == "QueueDeleted":
            spec = None
    return spec


async def current_queue(url: str, root: str, name: str) -> QueueSpec | None:
    from services.cli.get import read_log

    return queue_spec_of(await read_log(url, root, Subjects(root).queue(name)))


def capability_arg(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split(",") if kv)


def capability_replaced(old: dict[str, str], new: dict[str, str]) -> str:
    """What `queue update --capability` says under `configured`: the flag sets the whole
    capability (there is no vcctl flag for it to follow: `vcctl queue operate --action update`
    patches the weight only), so a resource it leaves out is no longer capped. Said, because a
    `kubectl patch` user expects the other keys to stay — the queue could take every card."""
    given = ",".join(f"{k}={v}" for k, v in new.items())
    line = f"capability is now {given or '(none)'} (--capability replaces the whole capability)"
    dropped = {k: v for k, v in old.items() if k not in new}
    if not dropped:
        return f"    {line}"
    was = ", ".join(f"{k} (was {v})" for k, v in dropped.items())
    keep = ",".join(f"{k}={v}" for k, v in {**new, **dropped}.items())
    return f"    Warning: {line}: no longer capped: {was}; to keep it, give --capability {keep}"


def cmd_queue(args: argparse.Namespace) -> int:
    if args.kubeconfig:
        from services.cli import kubeverbs

        return kubeverbs.queue(args)
    url = nats_url(args)
    if args.action in ("create", "update"):
        capability: dict[str, str] | None = None
        note = ""  # update --capability: what the queue's capability is now
        if args.action == "create":
            spec: dict = {"weight": args.weight or 1}
            if args.capability:
                spec["capability"] = capability_arg(args.capability)
            if args.parent:
                spec["parent"] = args.parent
            doc = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                   "metadata": {"name": args.name}, "spec": spec}  # fmt: skip
        else:
            have = asyncio.run(current_queue(url, args.root, args.name))
            if have is None:
                print(f"error: queue {args.name!r} does not exist", file=sys.stderr)
                return 1
            if args.weight is None and args.capability is None:
                print("error: give --weight and/or --capability to update", file=sys.stderr)
                return 2
            if args.capability is not None:
                from services.core.workload.quantity import from_units

                capability = capability_arg(args.capability)
                note = capability_replaced({k: from_units(k, v) for k, v in have.capability.items()}, capability)
            doc = queue_manifest(have, args.weight, capability)
        reply = apply_text(url, args.root, json.dumps(doc), create=args.action == "create")
        print_apply(reply, "table")
        if note and not reply.rejected:
            print(note)
        return 1 if reply.rejected else 0
    return command(args, args.action, args.name, kind="queue")


def cmd_job(args: argparse.Namespace) -> int:
    if args.kubeconfig:
        from services.cli import kubeverbs

        return kubeverbs.job(args)
    if args.action == "delete":
        missing = f'Error from server (NotFound): jobs.batch.volcano.sh "{args.name}" not found'
        return command(args, "delete", args.name, args.namespace, shown=f"job {args.namespace}/{args.name} deleted",
                       missing=missing)  # fmt: skip
    return command(args, args.action, args.name, args.namespace)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    apply = sub.add_parser("apply", help="submit Queues, Jobs, PodGroups, Pods (YAML or JSON)")
    apply.add_argument("-f", "--filename", action="append", required=True,
                       help="file, directory (every .yaml/.yml/.json in it) or - for stdin; repeatable")  # fmt: skip
    apply.add_argument("--dry-run", action="store_true", help="validate only, write nothing")
    apply.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table",
                       help="table (default), json or yaml")  # fmt: skip
    connection_args(apply)
    apply.set_defaults(func=cmd_apply)

    delete = sub.add_parser("delete", help="delete jobs, pods, podgroups (a pod's or podgroup's job) or queues")
    delete.add_argument("kind", nargs="?", choices=list(DELETABLE), metavar="KIND",
                        help="job|vcjob, pod|po, podgroup|pg, queue|q")  # fmt: skip
    delete.add_argument("name", nargs="*", metavar="NAME", help="the objects' names")
    delete.add_argument("-n", "--namespace", default="default", help="namespace (default: default)")
    delete.add_argument("-f", "--filename", default="",
                        help="delete the Jobs/Pods/PodGroups/Queues of a file (its queues last)")  # fmt: skip
    delete.add_argument("--ignore-not-found", action="store_true",
                        help="an object that does not exist is no error (kubectl's flag): exit 0, nothing said")  # fmt: skip
    connection_args(delete)
    delete.set_defaults(func=cmd_delete)

    queue = sub.add_parser("queue", help="create, update, open, close or delete a queue")
    queue.add_argument("action", choices=["create", "update", "open", "close", "delete"],
                       help="delete is refused while the queue has jobs or child queues")  # fmt: skip
    queue.add_argument("name", metavar="NAME", help="the queue's name")
    queue.add_argument("--weight", type=int, default=None, help="share weight (create: default 1)")
    queue.add_argument("--capability", default=None,
                       help="upper limit, e.g. cpu=8,memory=64Gi,huawei.com/Ascend910B3=8 (update: replaces the "
                            "whole capability; a resource left out is no longer capped)")  # fmt: skip
    queue.add_argument("--parent", default="", help="parent queue (create only; default: root)")
    connection_args(queue)
    kubeconfig_arg(queue)
    queue.set_defaults(func=cmd_queue)

    job = sub.add_parser("job", help="suspend, resume, restart, terminate, complete or delete a job")
    job.add_argument("action", choices=["suspend", "resume", "restart", "terminate", "complete", "delete"],
                     help="suspend evicts its pods; resume submits it again; restart kills its pods and "
                          "runs them again (retry count +1, Failed at maxRetry); terminate / complete "
                          "kill its unfinished pods and end it Terminated / Completed (finished pods "
                          "are kept); delete removes it and its pods")  # fmt: skip
    job.add_argument("name", metavar="NAME", help="the job's name")
    job.add_argument("-n", "--namespace", default="default", help="namespace (default: default)")
    connection_args(job)
    kubeconfig_arg(job)
    job.set_defaults(func=cmd_job)
