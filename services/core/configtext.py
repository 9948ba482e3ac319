"""The configuration inside what a user pasted: the file itself, a `key: |` snippet, or the whole
ConfigMap.

Volcano's and HAMi's documentation show their configuration three ways: the bare text of
`volcano-scheduler.conf` / `device-config.yaml`, the `volcano-scheduler.conf: |` (or `conf: |`)
block from a ConfigMap's `data`, and the whole `kind: ConfigMap` manifest. Users copy whichever
they found, so `--scheduler-conf`, `--device-config` and the chart's values take all three; the
parsers then read the inner text, and an error names where in the paste it is
(`data.volcano-scheduler.conf: tiers[1].plugins[0]: …`).
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml

SCHEDULER_KEYS = ("volcano-scheduler.conf", "conf")
DEVICE_KEYS = ("device-config.yaml", "conf")


class PasteError(ValueError):
    """The paste is a ConfigMap (or its `data`) without the key the configuration lives under."""


def _pick(data: Mapping[object, object], keys: tuple[str, ...], where: str) -> tuple[str, str]:
    key = next((k for k in keys if k in data), None)
    if key is None and len(data) == 1:  # a ConfigMap with one key, whatever its name
        key = str(next(iter(data)))
    if key is None:
        raise PasteError(f"{where}: none of {', '.join(keys)} (it has {', '.join(sorted(map(str, data))) or 'nothing'})")
    value = data[key]
    if not isinstance(value, str):
        raise PasteError(f"{where}.{key}: expected the configuration text (`{key}: |`), got {type(value).__name__}")
    return value, f"{where}.{key}" if where else key


def unwrap(text: str, keys: tuple[str, ...]) -> tuple[str, str]:
    """(the configuration text, where it was in the paste: "" for the bare file). Text that is
    not YAML, or not a wrapper, is returned as is for the real parser to judge."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text, ""
    if not isinstance(doc, dict):
        return text, ""
    if doc.get("kind") == "ConfigMap" or set(doc) == {"data"}:
        data = doc.get("data") or {}
        if not isinstance(data, dict):
            raise PasteError(f"data: expected a mapping, got {type(data).__name__}")
        return _pick(data, keys, "data")
    if len(doc) == 1 and next(iter(doc)) in keys and isinstance(next(iter(doc.values())), str):
        return _pick(doc, keys, "")
    return text, ""
