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


def read_jsonl(path: Path) -> list[StoredMessage]:
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if "raw" in row:
            data = str(row["raw"]).encode()
        else:
            data = json.dumps(row["data"], separators=(",", ":")).encode()
        out.append(StoredMessage(int(row["seq"]), str(row["subject"]), data, dict(row["headers"])))
    return out
