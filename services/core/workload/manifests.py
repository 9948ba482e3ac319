"""Reading manifests: multi-document YAML or JSON → (document index, mapping) pairs.

Reading is separate from admission so a file that cannot be read at all (bad YAML) is an input
error for the caller, while a well-formed object that breaks a rule is a rejection.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

#: libyaml's loader when PyYAML was built with it (≈ 10× faster on big manifests), same rules.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(ValueError):
    """The text is not YAML/JSON, or a document is not a mapping."""


def load_documents(text: str) -> list[dict[str, Any]]:
    """Every non-empty document; a JSON array or a `kind: List` expands to its items."""
    raw: list[Any]
    try:
        raw = [json.loads(text)]
    except json.JSONDecodeError:
        try:
            raw = list(yaml.load_all(text, Loader=SAFE_LOADER))
        except yaml.YAMLError as exc:
            raise ManifestError(yaml_problem(exc, text)) from None
    docs: list[dict[str, Any]] = []
    for item in raw:
        docs.extend(_expand(item))
    return docs


def syntax_problem(text: str) -> str | None:
    """Why `text` is not YAML (or JSON), in `yaml_problem`'s words; None when it reads. The
    parser's events are streamed, never composed, so a file of aliases expanding to gigabytes
    costs no more than its length (the CLI checks each file it sends, to name the bad one)."""
    try:
        json.loads(text)
        return None
    except json.JSONDecodeError:
        pass
    try:
        for _ in yaml.parse(text, Loader=SAFE_LOADER):
            pass
    except yaml.YAMLError as exc:
        return yaml_problem(exc, text)
    return None


def yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """A YAML error as a reader can act on it: where (line and column, from 1), what the parser
    found and what it was doing — `line 4, column 1: found character that cannot start any
    token (while scanning for the next token)`. Its first line alone ("while scanning for the
    next token") named neither the place nor the problem."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return " ".join(str(exc).split())
    mark = exc.problem_mark
    out = f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem or 'not YAML'}"
    if exc.context:
        began = exc.context_mark
        at = (f" that began at line {began.line + 1}, column {began.column + 1}"
              if began is not None and (began.line, began.column) != (mark.line, mark.column) else "")  # fmt: skip
        out += f" ({exc.context}{at})"
    lines = text.splitlines()
    if mark.line < len(lines) and lines[mark.line][mark.column : mark.column + 1] == "\t":
        out += "; it is a tab: YAML indents with spaces only"
    return out


def _expand(item: Any) -> list[dict[str, Any]]:
    if item is None:
        return []
    if isinstance(item, list):
        out: list[dict[str, Any]] = []
        for sub in item:
            out.extend(_expand(sub))
        return out
    if not isinstance(item, dict):
        raise ManifestError(f"a document must be a mapping, got {type(item).__name__}")
    if item.get("kind") == "List" and isinstance(item.get("items"), list):
        return _expand(item["items"])
    return [item]
