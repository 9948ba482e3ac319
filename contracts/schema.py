"""JSON Schema export of every event; `python -m contracts.schema` rewrites the committed copy.

The committed file is what non-Python consumers read; a test fails when code and file drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from contracts.events import ALL_EVENTS

SCHEMA_PATH = Path(__file__).with_name("schema") / "events.json"


def render() -> str:
    schemas, components = msgspec.json.schema_components(ALL_EVENTS, ref_template="#/$defs/{name}")
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Tessera events",
        "oneOf": schemas,
        "$defs": components,
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
        if current != text:
            print(f"{SCHEMA_PATH} is stale: run `python -m contracts.schema`", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
