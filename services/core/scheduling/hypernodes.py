"""Volcano's HyperNode tree over a session's nodes (`api/hyper_node_info.go`): which nodes each
HyperNode holds, its parent, its tier, and the lowest common ancestor of two HyperNodes.

A member of type Node is chosen by exactMatch (the name), regexMatch (searched in the node name,
as Go's `MatchString`) or labelMatch (every requirement holds; an empty selector chooses none);
a member of type HyperNode by exactMatch only, and its nodes are its parent's too. A HyperNode
named as a member by two HyperNodes, or one that is its own ancestor, makes the tree unusable:
Volcano's cache is then not ready and hard-mode gangs wait, with the reason (`problem`).

Built once per session, and only when a job asks for a network topology: nothing here runs for
a cluster whose jobs do not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.events import HyperNodeChanged
from contracts.workloads import HyperNodeMember
from services.core.scheduling.nodelabels import requirement_matches


@dataclass(slots=True)
class Topology:
    tier: dict[str, int] = field(default_factory=dict)  # HyperNode → its tier
    nodes: dict[str, frozenset[str]] = field(default_factory=dict)  # HyperNode → its real nodes
    parent: dict[str, str] = field(default_factory=dict)
    by_tier: dict[int, tuple[str, ...]] = field(default_factory=dict)  # tier → HyperNodes, by name
    tier_names: dict[str, int] = field(default_factory=dict)  # spec.tierName → its tier
    leaf: dict[str, str] = field(default_factory=dict)  # node → its lowest-tier HyperNode
    problem: str = ""  # why the tree cannot be used (two parents, a cycle)

    @property
    def tiers(self) -> tuple[int, ...]:
        return tuple(sorted(self.by_tier))

    def ancestors(self, name: str) -> list[str]:
        """`name` and its ancestors, nearest first (a cycle was refused at build)."""
        out = [name]
        while (up := self.parent.get(out[-1])) is not None and up not in out:
            out.append(up)
        return out

    def lca(self, a: str, b: str) -> str | None:
        """The lowest HyperNode holding both (`GetLCAHyperNode`); None when they share none."""
        mine = set(self.ancestors(a))
        return next((h for h in self.ancestors(b) if h in mine), None)

    def spanning(self, nodes: Iterable[str]) -> str | None:
        """The lowest HyperNode holding every one of `nodes` (None: some node is in none, or
        they share none)."""
        found: str | None = None
        for n in nodes:
            leaf = self.leaf.get(n)
            if leaf is None:
                return None
            found = leaf if found is None else self.lca(found, leaf)
            if found is None:
                return None
        return found


def _node_members(member: HyperNodeMember, names: Iterable[str],
                  labels: Mapping[str, Mapping[str, str]]) -> set[str]:  # fmt: skip
    if member.exact:
        return {member.exact}
    if member.regex:
        try:
            pattern = re.compile(member.regex)
        except re.error:  # refused at admission; an old log's pattern chooses nothing
            return set()
        return {n for n in names if pattern.search(n)}
    if member.labels:
        return {n for n in names
                if all(requirement_matches(r, dict(labels.get(n) or {})) for r in member.labels)}  # fmt: skip
    return set()


def build(
    hypernodes: Iterable[HyperNodeChanged], labels: Mapping[str, Mapping[str, str]]
) -> Topology:
    """The tree over the nodes `labels` names (node → its labels)."""
    specs = {h.name: h for h in hypernodes}
    topo = Topology()
    names = sorted(labels)
    direct: dict[str, set[str]] = {}
    children: dict[str, list[str]] = {}
    for name, h in specs.items():
        topo.tier[name] = h.tier
        if h.tier_name:
            topo.tier_names.setdefault(h.tier_name, h.tier)
        own: set[str] = set()
        for m in h.members:
            if m.type == "HyperNode":
                if not m.exact:
                    continue
                had = topo.parent.get(m.exact)
                if had is not None and had != name and not topo.problem:
                    first, second = sorted((had, name))
                    topo.problem = (f"HyperNode {m.exact} is a member of both {first} and {second} "
                                    "(a HyperNode has one parent)")  # fmt: skip
                topo.parent.setdefault(m.exact, name)
                children.setdefault(name, []).append(m.exact)
            else:
                own |= _node_members(m, names, labels)
        direct[name] = own & set(labels)

    def real(name: str, chain: tuple[str, ...]) -> frozenset[str]:
        if name in topo.nodes:
            return topo.nodes[name]
        if name in chain:
            if not topo.problem:
                topo.problem = (
                    f"HyperNodes {' → '.join((*chain[chain.index(name) :], name))} form a cycle"
                )
            return frozenset()
        out = set(direct.get(name, ()))
        for child in children.get(name, ()):
            if child in specs:  # a member not created yet holds nothing (Volcano waits for it)
                out |= real(child, (*chain, name))
        topo.nodes[name] = frozenset(out)
        return topo.nodes[name]

    for name in sorted(specs):
        real(name, ())
    by_tier: dict[int, list[str]] = {}
    for name in sorted(specs):
        by_tier.setdefault(specs[name].tier, []).append(name)
    topo.by_tier = {t: tuple(v) for t, v in by_tier.items()}
    for name in sorted(specs, key=lambda n: (specs[n].tier, n)):
        for n in topo.nodes[name]:
            topo.leaf.setdefault(n, name)
    return topo
