"""JSON Schema export of every event; `python -m contracts.schema` rewrites the committed copy.

The committed file is what non-Python consumers read; a test fails when code and file drift.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from contracts.events import ALL_EVENTS
from contracts.generated import write_or_check

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
    return write_or_check(SCHEMA_PATH, render(), "python -m contracts.schema")


if __name__ == "__main__":
    raise SystemExit(main())
