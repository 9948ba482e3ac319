"""Volcano's HyperNode tree over a session's nodes (`api/hyper_node_info.go`): which nodes each
HyperNode holds, its parent, its tier, and the lowest common ancestor of two HyperNodes.

A member of type Node is chosen by exactMatch (the name), regexMatch (searched in the node name,
as Go's `MatchString`, the pattern read as Go's regexp: services/core/goregex.py) or labelMatch (every requirement holds; an empty selector chooses none);
a member of type HyperNode by exactMatch only, and its nodes are its parent's too. A HyperNode
named as a member by two HyperNodes, or one that is its own ancestor, makes the tree unusable:
Volcano's cache is then not ready and hard-mode gangs wait, with the reason (`problem`).

Above the real trees sits Volcano's virtual cluster root (`framework/session.go`
`addClusterTopHyperNode`, `ClusterTopHyperNode`): tier one above the highest real tier (at least
1), holding every node of the session — nodes in no HyperNode too — and the parent of every
HyperNode that has none. A hard gang allowed that tier may go anywhere in the cluster, and two
HyperNodes with no common real ancestor meet there.

Built once per session, and only when a job asks for a network topology: nothing here runs for
a cluster whose jobs do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.events import HyperNodeChanged
from contracts.workloads import HyperNodeMember
from services.core.goregex import GoRegexError, compile_go
from services.core.scheduling.nodelabels import requirement_matches

#: Volcano's name for the virtual root (`framework.ClusterTopHyperNode`)
ROOT = "<cluster-top-hypernode>"


@dataclass(slots=True)
class Topology:
    tier: dict[str, int] = field(default_factory=dict)  # HyperNode → its tier
    nodes: dict[str, frozenset[str]] = field(default_factory=dict)  # HyperNode → its real nodes
    parent: dict[str, str] = field(default_factory=dict)
    by_tier: dict[int, tuple[str, ...]] = field(default_factory=dict)  # tier → HyperNodes, by name
    tier_names: dict[str, int] = field(default_factory=dict)  # spec.tierName → its tier
    leaf: dict[str, str] = field(default_factory=dict)  # node → its lowest-tier HyperNode
    problem: str = ""  # why the tree cannot be used (two parents, a cycle)
    root_tier: int = 1  # the virtual root's tier (ROOT is in every map above)

    @property
    def tiers(self) -> tuple[int, ...]:
        """Every tier, the root's last."""
        return tuple(sorted(self.by_tier))

    @property
    def real_tiers(self) -> tuple[int, ...]:
        """The tiers of the cluster's own HyperNodes (the root's left out)."""
        return tuple(t for t in sorted(self.by_tier) if t != self.root_tier)

    def ancestors(self, name: str) -> list[str]:
        """`name` and its ancestors, nearest first (a cycle was refused at build)."""
        out = [name]
        while (up := self.parent.get(out[-1])) is not None and up not in out:
            out.append(up)
        return out

    def lca(self, a: str, b: str) -> str | None:
        """The lowest HyperNode holding both (`GetLCAHyperNode`): the root when they share no real
        one (None only for a HyperNode in a cycle)."""
        mine = set(self.ancestors(a))
        return next((h for h in self.ancestors(b) if h in mine), None)

    def spanning(self, nodes: Iterable[str]) -> str | None:
        """The lowest HyperNode holding every one of `nodes`: the root when they share no real
        one or some node is in none (None: a node not of this session)."""
        found: str | None = None
        everywhere = self.nodes.get(ROOT, frozenset())
        for n in nodes:
            leaf = self.leaf.get(n) or (ROOT if n in everywhere else None)
            if leaf is None:  # not a node of this session
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
            pattern = compile_go(member.regex)  # Go's regexp, as Volcano's cache reads it
        except GoRegexError:  # refused at admission; an old log's pattern chooses nothing
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
    # Volcano's topTier: 1, or one above the highest real tier
    topo.root_tier = max([1, *(t + 1 for t in by_tier)])
    topo.tier[ROOT] = topo.root_tier
    topo.nodes[ROOT] = frozenset(labels)
    for name in sorted(specs):
        if name not in topo.parent:
            topo.parent[name] = ROOT
    topo.by_tier[topo.root_tier] = (ROOT,)
    return topo
