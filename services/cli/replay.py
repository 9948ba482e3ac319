"""`tessera replay`: the recorded log, re-run (`--verify`) or rebuilt at a point (`--until`).

    tessera replay --verify [--from LOG.jsonl]       # exit 0: every decision reproduced
    tessera replay --until SEQ|TIME [--from LOG.jsonl] [-o table|json|yaml]

`--verify` re-runs every recorded scheduling session from the state the log held at its
`based_on` sequence, with the configuration it ran with (`services.core.scheduling.verify`), and
stops at the first decision it does not reproduce: exit 1 with the session, the job, both
events, the fields that differ and the inputs whose digest differs from what the scheduler saw.
`--until` folds the log up to a sequence (or the last event at or before a time: `90s` on a
simulated log's clock, an ISO 8601 time on a live log's store clock — `services.core.logpoint`,
as `explain --at`) and prints pods, jobs, queues and cards as `tessera get` does. Exit 2 when the
log cannot be read, holds no events, or the point is not one of it (a clock it does not carry,
before its start).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from services.cli.connection import connection_args, nats_url
from services.core.logpoint import PointError, cut, past_the_end
from services.core.scheduling.verify import Verdict, decoded, verify
from services.runtime.eventlog.model import StoredMessage

SECTIONS = ("pods", "jobs", "queues", "cards")


class LogUnreadable(Exception):
    pass


def load(args: argparse.Namespace) -> list[StoredMessage]:
    if args.from_file:
        from services.core.simulate.jsonl import NotALog, read_jsonl

        try:
            return read_jsonl(Path(args.from_file))
        except NotALog as exc:
            raise LogUnreadable(str(exc)) from None
        except OSError as exc:
            raise LogUnreadable(f"{args.from_file}: cannot read it: {exc.strerror or exc}") from None
    from services.cli.get import read_log

    return asyncio.run(read_log(nats_url(args), args.root))


def purged(messages: Sequence[StoredMessage]) -> tuple[int, int | None]:
    """Sequences missing from the log (`tessera compact` purged them), and the first of them:
    a session based on a state that held it cannot be rebuilt."""
    if not messages or messages[-1].seq == len(messages):
        return 0, None
    first = next((i + 1 for i, m in enumerate(messages) if m.seq != i + 1), None)
    return messages[-1].seq - len(messages), first


def verdict_text(v: Verdict, poisoned: int, missing: tuple[int, int | None] = (0, None),
                 cut_here: bool = True) -> list[str]:  # fmt: skip
    d = v.divergence
    lines = []
    gone, first_gone = missing
    if v.unverifiable and first_gone is not None:
        lines.append(f"not verified: the log was compacted ({gone} sequences missing, the first #{first_gone}): "
                     f"{v.unverifiable} sessions whose state or decisions reach past it cannot be re-run "
                     "(compaction forgets finished jobs and card history); a log exported before "
                     "`tessera compact` or the queue service's --compact-every (`tessera events "
                     "--output-file`) verifies whole")  # fmt: skip
    if d is None:
        whole = (v.incomplete is None or cut_here) and not v.unverifiable
        word = "verified" if whole else "reproduced (not all verified)"
        lines.append(f"{word}: {v.decisions} decisions of {v.sessions} sessions reproduced "
                     f"({v.events} events folded)")  # fmt: skip
    else:
        lines.append(f"diverged after {v.decisions} reproduced decisions ({v.sessions} whole sessions):")
        lines += d.lines()
    for name, n in sorted(v.input_notes.items()):
        lines.append(f"note: {n} sessions reproduced although their {name} digest differs")
    if v.first_input_note is not None:
        session, based_on, names = v.first_input_note
        lines.append(f"note: the first is session {session} (based on #{based_on}: {', '.join(names)}): "
                     "the log up to there is not what the scheduler saw — an edited log, or one folded "
                     "by older rules")  # fmt: skip
    if v.incomplete is not None and cut_here:
        session, based_on, rest = v.incomplete
        lines.append(f"note: last session incomplete (the log ends inside it): {rest} decisions not verified "
                     f"(session {session}, based on #{based_on})")  # fmt: skip
    elif v.incomplete is not None:
        session, based_on, rest = v.incomplete
        lines.append(f"not verified: the log ends inside session {session} (based on #{based_on}), which "
                     f"would make {rest} more decisions: an export cut short, or a divergence in the last "
                     f"session — nothing in the log tells them apart; `--until {based_on}` verifies the rest")  # fmt: skip
    if v.unrecorded:
        lines.append(f"note: {v.unrecorded} decisions carry no session record (written by a "
                     "scheduler before sessions were recorded): not verified")  # fmt: skip
    if poisoned:
        lines.append(f"note: {poisoned} undecodable events skipped, as the services skip them")
    if gone and not v.unverifiable:
        lines.append(f"note: {gone} sequences are missing (the log was compacted) after every recorded session")
    return lines


def state_text(messages: list[StoredMessage], output: str) -> str:
    from services.cli.get import (
        CARD_COLUMNS,
        JOB_COLUMNS,
        POD_COLUMNS,
        QUEUE_COLUMNS,
        _table_view,
        render,
        with_notes,
    )
    from services.core.simulate.report import build_report

    report = build_report(messages)
    at = messages[-1].seq if messages else 0
    records = {k: report[k] for k in SECTIONS}
    if output == "json":
        return json.dumps({"seq": at, **records}, indent=2)
    if output == "yaml":
        return yaml.safe_dump({"seq": at, **records}, sort_keys=False).rstrip()
    columns = {"pods": POD_COLUMNS, "jobs": JOB_COLUMNS, "queues": QUEUE_COLUMNS, "cards": CARD_COLUMNS}
    parts = [f"state at #{at}"]
    for k in SECTIONS:
        rows = _table_view(k, records[k])
        parts.append(f"\n{k.upper()}\n" + render(rows, with_notes(columns[k], rows), "table"))
    return "\n".join(parts)


def cmd_replay(args: argparse.Namespace) -> int:
    if not args.verify and args.until is None:
        print("tessera replay: say --verify or --until SEQ|TIME", file=sys.stderr)
        return 2
    try:
        messages = load(args)
        if not messages:  # a verdict over nothing would read as a pass (a failed export, a typo)
            where = args.from_file or "the live log"
            raise LogUnreadable(f"{where} holds no events: nothing to verify or rebuild (write a log with "
                                "`tessera events --output-file LOG.jsonl`, or run `tessera up` and apply work)")  # fmt: skip
        if args.until is not None:  # with --verify: the sessions up to that point
            if note := past_the_end(messages, args.until):
                print(note, file=sys.stderr)
            messages = cut(messages, args.until, "--until")
            print(state_text(messages, args.output))
            if not args.verify:
                return 0
        stored, poisoned = decoded(messages)
    except (LogUnreadable, PointError) as exc:
        print(f"tessera replay: {exc}", file=sys.stderr)
        return 2
    missing = purged(messages)
    v = verify(stored, complete_below=missing[1])
    # a log that ends inside a session is that session cut short only when the user cut it
    # (`--until`): a file that ends there may as well hold a last session that diverges, and a
    # gate must not pass it (helper-37's review)
    cut_here = args.until is not None
    print("\n".join(verdict_text(v, poisoned, missing, cut_here)))
    # a compacted log verifies what precedes its first gap and says how much it could not re-run:
    # not a divergence (it read as one), nor a pass for a gate that checked less than the log
    return 0 if v.ok and (v.incomplete is None or cut_here) and not v.unverifiable else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="re-run the recorded sessions (--verify) or rebuild a point (--until)")
    p.add_argument("--verify", action="store_true",
                   help="re-run every recorded session; exit 1 at the first decision not reproduced")  # fmt: skip
    p.add_argument("--until", metavar="SEQ|TIME",
                   help="print the state (pods, jobs, queues, cards) the log held at this sequence, or time (90s on a simulated log, ISO 8601 on a live one)")  # fmt: skip
    p.add_argument("--from", dest="from_file", metavar="LOG.jsonl",
                   help="a log written by `events --output-file` or `simulate --events` (default: the live NATS)")  # fmt: skip
    p.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table",
                   help="format of --until's state")  # fmt: skip
    connection_args(p)
    p.set_defaults(func=cmd_replay)
