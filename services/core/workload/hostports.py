"""A pod's host ports (`containers[].ports[].hostPort`) for kube-scheduler's NodePorts filter.

kube-scheduler counts the ports of init containers too (its NodePorts plugin reads every
container of the pod), so both lists are read. Defaults are the API server's: protocol TCP,
hostIP 0.0.0.0 (every address), and with `hostNetwork: true` the hostPort is the containerPort
(the container binds the node's own port). The checks are the API server's
(`validateContainerPorts`, `AccumulateUniqueHostPorts`), in its words, so a manifest Tessera
accepts is one a cluster accepts.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from contracts.workloads import HostPort
from services.core.workload.rejection import invalid, quoted

PROTOCOLS = ("SCTP", "TCP", "UDP")
PORT_RANGE = "must be between 1 and 65535, inclusive"

#: (field path, rule): what admission turns into rejections
Problem = tuple[str, str]


def _port_number(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw))
    except ValueError:
        return None


def host_ports(
    spec: Mapping[str, Any], path: str
) -> tuple[tuple[HostPort, ...], list[Problem]]:
    """The pod's host ports in container order (app containers first) and what is wrong with
    them; a port that fails a check is left out (the pod is refused anyway)."""
    host_network = spec.get("hostNetwork") is True
    out: list[HostPort] = []
    problems: list[Problem] = []
    for list_name in ("containers", "initContainers"):
        seen: set[str] = set()  # the API server checks uniqueness within each list
        listed: Sequence[Any] = spec.get(list_name) or []
        for i, c in enumerate(listed):
            if not isinstance(c, Mapping):
                continue
            for j, p in enumerate(c.get("ports") or []):
                where = f"{path}.spec.{list_name}[{i}].ports[{j}]"
                if not isinstance(p, Mapping):
                    problems.append((where, invalid(p, "must be a container port")))
                    continue
                got = _one(p, where, host_network, problems)
                if got is None:
                    continue
                key = f"{got.protocol}/{got.ip}/{got.port}"
                if key in seen:
                    problems.append((f"{where}.hostPort", f"Duplicate value: {quoted(key)}"))
                    continue
                seen.add(key)
                out.append(got)
    return tuple(out), problems


def _one(
    p: Mapping[str, Any], where: str, host_network: bool, problems: list[Problem]
) -> HostPort | None:
    """One `ports[]` entry → its host port, None when it publishes none (or is invalid)."""
    ok = True
    container = _port_number(p.get("containerPort"))
    if p.get("containerPort") is None:
        problems.append((f"{where}.containerPort", "Required value"))
        ok = False
    elif container is None or not 1 <= container <= 65535:
        problems.append((f"{where}.containerPort", invalid(p.get("containerPort"), PORT_RANGE)))
        ok = False
    raw = p.get("hostPort")
    port = 0 if raw is None else _port_number(raw)
    if port is None or port < 0 or port > 65535:
        problems.append((f"{where}.hostPort", invalid(raw, PORT_RANGE)))
        return None
    if host_network and ok:
        if port == 0:
            port = container or 0  # defaulted: the node's port is the container's
        elif port != container:
            problems.append((f"{where}.hostPort", invalid(
                raw, "must match `containerPort` when `hostNetwork` is true")))  # fmt: skip
            return None
    protocol = str(p.get("protocol") or "TCP")
    if protocol not in PROTOCOLS:
        shown = ", ".join(quoted(x) for x in PROTOCOLS)
        problems.append((f"{where}.protocol",
                         f"Unsupported value: {quoted(protocol)}: supported values: {shown}"))  # fmt: skip
        ok = False
    ip = str(p.get("hostIP") or "0.0.0.0")
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        problems.append((f"{where}.hostIP", invalid(ip, "must be a valid IP address")))
        ok = False
    if not ok or port == 0:
        return None
    return HostPort(port=port, protocol=protocol, ip=ip)
