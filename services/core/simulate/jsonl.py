"""The event log as JSONL (`seq, subject, headers, data`), written by `--events` and read by
`--replay`; `data` is the event body as JSON, so the file is readable and re-encodes exactly
(`raw` instead for a body that is not JSON at all, so even a poisoned log round-trips)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from services.runtime.eventlog.model import StoredMessage


def jsonl_line(m: StoredMessage) -> str:
    """One stored message as one line (no newline): what `--replay` reads back exactly."""
    row: dict[str, object] = {"seq": m.seq, "subject": m.subject, "headers": dict(m.headers)}
    try:
        row["data"] = json.loads(m.data)
    except ValueError:  # a body that is not even JSON (poison): kept as it is
        row["raw"] = m.data.decode("utf-8", "replace")
    return json.dumps(row, sort_keys=True, separators=(",", ":"))


def write_jsonl(path: Path, messages: Iterable[StoredMessage]) -> None:
    with path.open("w") as f:
        for m in messages:
            f.write(jsonl_line(m))
            f.write("\n")


class NotALog(ValueError):
    """A file read as a log that is not one (a service's log, an inventory, a terminal's text), or
    two logs in one: its message names the file, the line and how to write a log."""


#: how to get a file this module reads, said in every refusal of one
WRITE_ONE = "write one with `tessera events --output-file LOG.jsonl`"


def read_jsonl(path: Path) -> list[StoredMessage]:
    """The file's messages, refused (`NotALog`) at the first line that is not one, or whose
    sequence does not follow the one before it: a log's sequences strictly increase, and a
    repeat or a step back (a line pasted twice, two logs joined) is folded twice otherwise."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise NotALog(f"{path} is not text, so not a Tessera log ({WRITE_ONE})") from None
    out: list[StoredMessage] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        msg = _message(line)
        if msg is None:
            raise NotALog(f"{path} line {n} is not an event of a Tessera log ({WRITE_ONE})")
        if out and msg.seq <= out[-1].seq:
            raise NotALog(f"{path} line {n}: sequence #{msg.seq} follows #{out[-1].seq}: a line repeated, "
                          "or two logs joined? (keep one log's lines, in its order)")  # fmt: skip
        out.append(msg)
    return out


def _message(line: str) -> StoredMessage | None:
    """One line as `jsonl_line` writes it, None when it is anything else."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    seq, subject, headers = row.get("seq"), row.get("subject"), row.get("headers")
    if type(seq) is not int or not isinstance(subject, str) or not isinstance(headers, dict):
        return None
    if "raw" in row:
        data = str(row["raw"]).encode()
    elif "data" in row:
        data = json.dumps(row["data"], separators=(",", ":")).encode()
    else:
        return None
    return StoredMessage(seq, subject, data, {str(k): str(v) for k, v in headers.items()})
