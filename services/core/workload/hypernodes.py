"""Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`) and a gang's `spec.networkTopology`,
read as Volcano writes them, with the CRD's and the webhook's rules in their words.

A HyperNode becomes `HyperNodeChanged` — the one translation for `tessera apply`, the API
server's objects (services/kube/podsource.py) and `tessera simulate` — so every path decides on
the same facts. The rules: `spec.tier` an integer >= 0 (required), at least one member, a
member's type `Node` or `HyperNode`, its selector exactly one of exactMatch / regexMatch /
labelMatch (the CRD's two CEL rules and the webhook's), an exactMatch name a DNS-1123
subdomain, a regexMatch pattern Go's regexp compiles (services/core/goregex.py: Go's words for
what it refuses, Python's `re` accepting more and less), a labelMatch a valid label selector.
A HyperNode member is resolved by exactMatch only (Volcano's cache skips the others): a regex
or label selector on one is refused here instead of being a member that never joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.events import HyperNodeChanged
from contracts.workloads import HyperNodeMember, NetworkTopology
from services.core.goregex import GoRegexError, compile_go
from services.core.workload import names
from services.core.workload.fields import FREE, LABEL_SELECTOR, METADATA, Schema
from services.core.workload.podaffinity import Problem, label_selector
from services.core.workload.rejection import invalid, required

API_VERSION = "topology.volcano.sh/v1alpha1"
MEMBER_TYPES = ("Node", "HyperNode")

SELECTOR: Schema = {"exactMatch": {"name": FREE}, "regexMatch": {"pattern": FREE},
                    "labelMatch": LABEL_SELECTOR}  # fmt: skip
HYPERNODE: Schema = {
    "apiVersion": FREE, "kind": FREE, "metadata": METADATA, "status": FREE,
    "spec": {"tier": FREE, "tierName": FREE, "members": [{"type": FREE, "selector": SELECTOR}]},
}  # fmt: skip
HYPERNODE_KINDS: dict[tuple[str, str], Schema] = {(API_VERSION, "HyperNode"): HYPERNODE}

NETWORK_TOPOLOGY_MODES = ("hard", "soft")


def _integer(raw: object) -> int | None:
    if isinstance(raw, bool) or not isinstance(raw, int):
        return None
    return raw


def _member(raw: object, path: str, problems: list[Problem]) -> HyperNodeMember | None:
    if not isinstance(raw, Mapping):
        problems.append((path, invalid(raw, "must be an object")))
        return None
    kind = raw.get("type")
    if kind is None:
        problems.append((f"{path}.type", required()))
    elif kind not in MEMBER_TYPES:
        problems.append(
            (f"{path}.type", f'Unsupported value: "{kind}": supported values: "Node", "HyperNode"')
        )
    selector = raw.get("selector") or {}
    if not isinstance(selector, Mapping):
        problems.append((f"{path}.selector", invalid(selector, "must be an object")))
        return None
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if not given:
        problems.append((f"{path}.selector", "Invalid value: \"object\": Either ExactMatch or RegexMatch "
                         "or LabelMatch must be specified"))  # fmt: skip
        return None
    if len(given) > 1:
        problems.append((f"{path}.selector", "Invalid value: \"object\": Only one of ExactMatch, "
                         "RegexMatch, or LabelMatch can be specified"))  # fmt: skip
        return None
    if kind == "HyperNode" and given[0] != "exactMatch":
        problems.append((f"{path}.selector.{given[0]}", "Forbidden: a HyperNode member is chosen by "
                         "exactMatch only (Volcano ignores regexMatch and labelMatch on one)"))  # fmt: skip
    exact = regex = ""
    labels = None
    if given[0] == "exactMatch":
        name = (
            (selector.get("exactMatch") or {}).get("name")
            if isinstance(selector.get("exactMatch"), Mapping)
            else None
        )
        if not name or not isinstance(name, str):
            problems.append(
                (f"{path}.selector.exactMatch.name", required("member exactMatch name is required"))
            )
        else:
            for msg in names.dns1123_subdomain(name):
                problems.append((f"{path}.selector.exactMatch.name", invalid(name, msg)))
            exact = name
    elif given[0] == "regexMatch":
        body = selector.get("regexMatch")
        pattern = body.get("pattern") if isinstance(body, Mapping) else None
        if not pattern or not isinstance(pattern, str):
            problems.append((f"{path}.selector.regexMatch.pattern",
                             required("member regexMatch pattern is required")))  # fmt: skip
        else:
            try:
                compile_go(pattern)  # Go's regexp.Compile, as Volcano's webhook
            except GoRegexError as exc:
                problems.append((f"{path}.selector.regexMatch.pattern",
                                 invalid(pattern, f"member regexMatch pattern is invalid: {exc}")))  # fmt: skip
            regex = pattern
    else:
        labels = label_selector(selector.get("labelMatch"), f"{path}.selector.labelMatch", problems)
    return HyperNodeMember(type=str(kind or ""), exact=exact, regex=regex, labels=labels)


def hypernode_event(doc: Mapping[str, Any]) -> tuple[HyperNodeChanged | None, list[Problem]]:
    """The HyperNode's event, or the problems that refuse it (field path, rule)."""
    problems: list[Problem] = []
    meta = doc.get("metadata") or {}
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return None, [("spec", required())]
    raw_tier = spec.get("tier")
    tier = _integer(raw_tier)
    if raw_tier is None:
        problems.append(("spec.tier", required()))
    elif tier is None:
        problems.append(("spec.tier", invalid(raw_tier, "must be an integer")))
    elif tier < 0:
        problems.append(("spec.tier", invalid(raw_tier, "should be greater than or equal to 0")))
    tier_name = spec.get("tierName") or ""
    if not isinstance(tier_name, str) or len(tier_name) > 253:
        problems.append(
            ("spec.tierName", invalid(tier_name, "must be a string of at most 253 characters"))
        )
    raw_members = spec.get("members")
    if not isinstance(raw_members, list) or not raw_members:
        problems.append(("spec.members", required("should have at least 1 items")))
        raw_members = []
    members = [_member(m, f"spec.members[{i}]", problems) for i, m in enumerate(raw_members)]
    if problems:
        return None, problems
    return HyperNodeChanged(name=str(meta.get("name") or ""), tier=int(tier or 0), tier_name=str(tier_name),
                            members=tuple(m for m in members if m is not None)), []  # fmt: skip


def network_topology(raw: object, path: str, problems: list[Problem]) -> NetworkTopology | None:
    """`spec.networkTopology` of a Job or PodGroup: mode `hard` (the CRD's default) or `soft`,
    `highestTierAllowed` an integer >= 0, `highestTierName` at most 253 characters, not both
    (Volcano's webhooks refuse the pair)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append((path, invalid(raw, "must be an object")))
        return None
    for key in raw:
        if key not in ("mode", "highestTierAllowed", "highestTierName"):
            problems.append((f"{path}.{key}", "unknown field"))
    mode = raw.get("mode") or "hard"
    if mode not in NETWORK_TOPOLOGY_MODES:
        problems.append(
            (f"{path}.mode", f'Unsupported value: "{mode}": supported values: "hard", "soft"')
        )
    tier: int | None = None
    if raw.get("highestTierAllowed") is not None:
        tier = _integer(raw.get("highestTierAllowed"))
        if tier is None or tier < 0:
            problems.append((f"{path}.highestTierAllowed",
                             invalid(raw.get("highestTierAllowed"), "must be an integer >= 0")))  # fmt: skip
            tier = None
    tier_name = raw.get("highestTierName") or ""
    if not isinstance(tier_name, str) or len(tier_name) > 253:
        problems.append(
            (
                f"{path}.highestTierName",
                invalid(tier_name, "must be a string of at most 253 characters"),
            )
        )
        tier_name = ""
    if tier is not None and tier_name:  # the Job and PodGroup webhooks' validateNetworkTopology
        problems.append((path, "must not specify 'highestTierAllowed' and 'highestTierName' in "
                         "networkTopology simultaneously"))  # fmt: skip
    return NetworkTopology(mode=str(mode), highest_tier=tier, highest_tier_name=str(tier_name))
