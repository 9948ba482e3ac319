"""The event log as JSONL (`seq, subject, headers, data`), written by `--events` and read by
`--replay`; `data` is the event body as JSON, so the file is readable and re-encodes exactly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from services.runtime.eventlog.model import StoredMessage


def write_jsonl(path: Path, messages: Iterable[StoredMessage]) -> None:
    with path.open("w") as f:
        for m in messages:
            f.write(json.dumps({"seq": m.seq, "subject": m.subject, "headers": dict(m.headers),
                                "data": json.loads(m.data)}, sort_keys=True, separators=(",", ":")))  # fmt: skip
            f.write("\n")


def read_jsonl(path: Path) -> list[StoredMessage]:
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        data = json.dumps(row["data"], separators=(",", ":")).encode()
        out.append(StoredMessage(int(row["seq"]), str(row["subject"]), data, dict(row["headers"])))
    return out
