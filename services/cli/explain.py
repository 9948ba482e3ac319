"""`tessera explain job|pod NAME`: why it waits, or why it went where it went — from the log alone.

    tessera explain job npu-train-job [-n NS] [-o json] [--from log.jsonl] [--at SEQ|TIME]

The story (`services.core.story`) is the object's timeline, the reasons the scheduler recorded
with its last decision (the first rule that failed in words, the nodes grouped and counted, the
smallest change that would unblock it), and for a placed pod each plugin's part of its node's
score, why those cards, and the runners-up. `--from` reads a JSONL log (`tessera events
--output-file`, `tessera simulate --events`) instead of the live NATS; `--at` answers as of an
earlier point (a sequence, `12.5s` of a simulated log's clock, or an ISO 8601 time on a live
log's store clock; `services.core.logpoint`, as `replay --until`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from services.cli.connection import connection_args, nats_url
from services.core.logpoint import PointError, cut, past_the_end
from services.core.story import story
from services.runtime.eventlog.model import StoredMessage


def _waiting_lines(w: dict[str, Any]) -> list[str]:
    head = "Why it waits"
    if w.get("session") or w.get("seq"):
        head += f" (session {w.get('session', 0)}, log #{w.get('seq', 0)}"
        head += f", {w['time']})" if w.get("time") else ")"
    why = w["why"]
    if w.get("groups") and why.startswith("0/"):  # the groups below say the rest
        why = why.split(":", 1)[0] + ":"
    plugin = w.get("plugin") or ""
    named = not plugin or why.endswith(":") or f"({plugin}" in why or f"{plugin}:" in why
    lines = [f"{head}:", f"  {why}" + ("" if named else f"   [{plugin}]")]
    if w.get("groups"):
        shown = sum(g["nodes"] for g in w["groups"])
        if not why.endswith(":"):  # the headline was a job-level rule: the nodes follow it
            lines.append(f"  per node ({shown} of {w.get('nodes') or shown}):")
        width = max(len(str(g["nodes"])) for g in w["groups"])
        for g in w["groups"]:
            plugin = f"{g['plugin']}; " if g["plugin"] else ""
            more = "…" if g["nodes"] > len(g["examples"]) else ""
            lines.append(f"    {str(g['nodes']).rjust(width)} × {g['reason']}   "
                         f"({plugin}{', '.join(g['examples'])}{more})")  # fmt: skip
    elif w.get("node_reasons"):  # a log written before the reasons had words
        lines.append("  per node:")
        lines += [f"    {n}: {r}" for n, r in sorted(w["node_reasons"].items())]
    if w.get("reason") and w["reason"] != w["why"]:
        lines.append(f"  scheduler's reason: {w['reason']}")
    lines += ["What would unblock it:", f"  {w['unblock'] or 'nothing the log can tell'}"]
    return lines


def _cores(card: dict[str, Any]) -> str:
    """Counted cores (Ascend aiCores: whole cards, vNPU templates) as `get po` prints them;
    a percentage where the card's cores are 100 (NVIDIA, HAMi soft slices)."""
    total = card.get("card_cores") or 0
    if total and total != 100:
        return f"{card['cores']}/{total} aiCores"
    return f"{card['cores']}% cores"


def _placed_lines(p: dict[str, Any]) -> list[str]:
    n = p.get("feasible") or 0
    among = " (the only feasible node)" if n == 1 else f" among {n} feasible nodes" if n else ""
    lines = [f"Why {p['task']} went to {p['node']} (session {p['session']}, log #{p['seq']}): score "
             f"{p['score']:g}{among}"]  # fmt: skip
    if p["parts"]:
        width = max(len(k) for k in p["parts"])
        lines += [f"  {k.ljust(width)}  {v:g}" for k, v in p["parts"].items()]
    if p["cards"]:
        cards = ", ".join(f"{c['uuid']} ({c['memory']} MB, {_cores(c)}"
                          + (f", {c['template']}" if c["template"] else "") + ")" for c in p["cards"])  # fmt: skip
        lines.append(f"Cards: {cards}")
        if p["cards_why"]:
            lines.append(f"  {p['cards_why']}")
    if p["runners_up"]:
        lines.append("Not the runners-up:")
        for r in p["runners_up"]:
            gap = p["score"] - r["score"]
            why = (f"{gap:g} less" if gap > 0 else
                   "same score: the earlier node in scan order wins ties")  # fmt: skip
            lines.append(f"  {r['node']}  score {r['score']:g} ({why})")
    elif n == 1:
        lines.append("No runner-up: every other node failed a predicate for this pod.")
    return lines


def render(s: dict[str, Any]) -> str:
    """The story as text (pure: the dict in, lines out)."""
    what = "Pod" if s["kind"] == "pod" else "Job"
    where = f" on {s['node']}" if s.get("node") else ""
    head = f"{what} {s['namespace']}/{s['name']}"
    extra = []
    if s["kind"] == "pod" and s["job"] != s["name"]:
        extra.append(f"job {s['job']}")
    if s.get("queue"):
        extra.append(f"queue {s['queue']}")
    if s.get("min_available") is not None:
        extra.append(f"minAvailable {s['min_available']}")
    lines = [f"{head}" + (f" ({', '.join(extra)})" if extra else "") + f": {s['phase']}{where}"]
    if s.get("pods"):
        lines.append("Pods: " + ", ".join(f"{n} {ph}" for n, ph in sorted(s["pods"].items())))
    lines.append("Timeline:")
    if s["timeline_dropped"]:
        lines.append(f"  … {s['timeline_dropped']} earlier events")
    for e in s["timeline"]:
        session = f"session {e['session']}" if e["session"] else ""
        lines.append(f"  #{e['seq']:<6d} {e['time']:<21s} {session:<11s} {e['event']:<17s} "
                     f"{e['details']}".rstrip())  # fmt: skip
    if "waiting" in s:
        waiting = _waiting_lines(s["waiting"])
        if s.get("as_of"):  # (the rule from that session; its amounts from the log as it stands)
            waiting.insert(1, f"  (amounts as of log #{s['as_of']}: the scheduler logs a rule's words once, "
                              "not each time its numbers move)")  # fmt: skip
        if s.get("placeable_at"):
            waiting.insert(1, f"  (a session over the log as it stands, #{s['placeable_at']}, would place it "
                              "now: the scheduler has not run one since — is it up, and the leader?)")  # fmt: skip
        lines += waiting
    if "placed" in s:
        lines += _placed_lines(s["placed"])
    if "deleted" in s:  # the log's last word on it, after how it got there
        d = s["deleted"]
        lines.append(f"Gone: deleted at #{d['seq']}" + (f" ({d['time']})" if d["time"] else ""))
    return "\n".join(lines)


def _messages(args: argparse.Namespace) -> list[StoredMessage]:
    if args.from_file:
        from services.core.simulate.jsonl import read_jsonl

        return read_jsonl(Path(args.from_file))
    from services.cli.get import read_log

    return asyncio.run(read_log(nats_url(args), args.root))


def _by_podgroup_name(messages: list[StoredMessage], args: argparse.Namespace) -> dict[str, Any] | None:
    """The story of the job whose PodGroup `get pg` lists as `args.name` (Volcano's names:
    `podgroup-<pod uid>`, `<job>-<job uid>`)."""
    from services.cli import kubeobjects as ko
    from services.core.simulate.report import build_report

    cat = ko.catalog(messages)
    for job in build_report(messages)["jobs"]:
        if job["namespace"] == args.namespace and ko.podgroup_name(cat, job) == args.name:
            return story(messages, "job", job["name"], args.namespace, args.root, fresh=True, clock=_clock(args))
    return None


def _clock(args: argparse.Namespace) -> float | None:
    """A session's time for the re-run: a live cluster's now; a file or an `--at` cut, the
    newest session's recorded clock (a simulation's is virtual)."""
    return None if args.from_file or args.at else time.time()


def cmd_explain(args: argparse.Namespace) -> int:
    from services.core.simulate.jsonl import NotALog

    try:
        messages = _messages(args)
    except NotALog as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {args.from_file}: cannot read it: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.at:
        try:
            if note := past_the_end(messages, args.at):
                print(note, file=sys.stderr)
            messages = cut(messages, args.at, "--at")
        except PointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    s = story(messages, args.kind, args.name, args.namespace, args.root, fresh=True, clock=_clock(args))
    if s is None and args.kind == "job":  # (pg, podgroup and vcjob are normalised to job)
        s = _by_podgroup_name(messages, args)
    if s is None:
        print(f"error: {args.kind} {args.name!r} not found in namespace {args.namespace}"
              + (f" as of {args.at}" if args.at else "") + " in Tessera's log", file=sys.stderr)  # fmt: skip
        if not args.at:  # a refused pod never enters the log: the cluster says why
            print("  (a pod admission refused is not in the log: its PodScheduled condition and a Warning "
                  "Event name the rule — `kubectl describe pod`; a pod whose schedulerName is not "
                  "volcano or tessera is not Tessera's)", file=sys.stderr)  # fmt: skip
        return 1
    print(json.dumps(s, indent=2) if args.output == "json" else render(s))
    return 0


KINDS = {"job": "job", "jobs": "job", "vcjob": "job", "pg": "job", "podgroup": "job",
         "pod": "pod", "pods": "pod", "po": "pod"}  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why a job or pod waits, or why it went to its node and cards")
    p.add_argument("kind", choices=list(KINDS), metavar="KIND", help="job|vcjob|pg or pod|po")
    p.add_argument("name", metavar="NAME", help="the object's name")
    p.add_argument("-n", "--namespace", default="default", help="namespace (default: default)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument("--from", dest="from_file", default="", metavar="LOG.jsonl",
                   help="read this JSONL log (tessera events --output-file) instead of the live NATS")  # fmt: skip
    p.add_argument("--at", default="", metavar="SEQ|TIME",
                   help="as of a log sequence (40), a simulated log's seconds (12.5s) or a live log's store time (ISO 8601)")  # fmt: skip
    connection_args(p)
    p.set_defaults(func=lambda a: cmd_explain(_normalised(a)))


def _normalised(args: argparse.Namespace) -> argparse.Namespace:
    args.kind = KINDS[args.kind]
    return args
