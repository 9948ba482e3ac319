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
            raise ManifestError(str(exc).splitlines()[0]) from None
    docs: list[dict[str, Any]] = []
    for item in raw:
        docs.extend(_expand(item))
    return docs


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
