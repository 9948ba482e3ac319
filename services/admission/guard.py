"""Limits on submitted manifest text, checked before anything builds Python objects from it.

A manifest is untrusted input: a multi-megabyte body, a 100,000-level nesting (which makes
recursive parsers overflow the stack) or a "billion laughs" of YAML aliases (a few hundred bytes
expanding to gigabytes) must be refused with a reason, cheaply, by streaming the parser's events
instead of composing the document.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from services.core.workload.manifests import SAFE_LOADER


@dataclass(frozen=True, slots=True)
class Limits:
    max_bytes: int = 1_000_000  # NATS' default max payload is 1 MiB
    max_depth: int = 64  # Kubernetes objects nest ~15 levels; 64 leaves room
    max_nodes: int = 200_000  # scalars + collections after alias expansion
    max_documents: int = 5_000


class ManifestTooComplex(ValueError):
    """The text breaks one of the `Limits`; the message names which and by how much."""


def check_manifest(text: str, limits: Limits | None = None) -> None:
    limits = limits or Limits()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise ManifestTooComplex(f"manifest is {size} bytes; the limit is {limits.max_bytes}")
    try:
        _scan(text, limits)
    except yaml.YAMLError:
        return  # not YAML: the reader reports it (JSON is read separately)
    except RecursionError:
        raise ManifestTooComplex(f"nesting deeper than {limits.max_depth} levels") from None


def _scan(text: str, limits: Limits) -> None:
    depth = nodes = documents = 0
    anchored: dict[str, int] = {}  # anchor → nodes in its subtree
    open_anchors: list[tuple[str | None, int]] = []  # collections being read: (anchor, start)
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > limits.max_documents:
                raise ManifestTooComplex(f"more than {limits.max_documents} documents")
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            nodes += 1
            if depth > limits.max_depth:
                raise ManifestTooComplex(f"nesting deeper than {limits.max_depth} levels")
            open_anchors.append((event.anchor, nodes))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor:
                anchored[anchor] = nodes - start + 1
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                anchored[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            nodes += anchored.get(event.anchor, 1)
        if nodes > limits.max_nodes:
            raise ManifestTooComplex(
                f"more than {limits.max_nodes} values (after expanding YAML aliases)"
            )


DEFAULT_LIMITS = Limits()
